"""What ``wormhole ssh invite`` accepts into authorized_keys, and how it writes the file."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
from pathlib import Path

import pytest

from hilltop.cli import sshkeys
from hilltop.errors import LocalError, RejectedError


def fake_key(kind: str = "ssh-ed25519") -> str:
    """A key line whose blob embeds its type, as real keys' do (the rest is filler)."""
    name = kind.encode()
    blob = len(name).to_bytes(4, "big") + name + (32).to_bytes(4, "big") + bytes(range(32))
    return f"{kind} {base64.b64encode(blob).decode()}"


def test_a_real_ssh_keygen_key_is_accepted(tmp_path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice@laptop",
                    "-f", str(tmp_path / "id")], check=True)
    text = (tmp_path / "id.pub").read_text()
    key = sshkeys.parse_public_key(text)
    assert (key.kind, key.keyid) == ("ssh-ed25519", "alice@laptop")
    assert key.line() == text.strip()


def test_a_key_without_comment_is_called_unknown_as_official_does() -> None:
    assert sshkeys.parse_public_key(fake_key() + "\n").keyid == "unknown"


@pytest.mark.parametrize("text", [
    'command="rm -rf ~" ' + fake_key(),            # options before the key
    'from="*",no-pty ' + fake_key(),
    fake_key() + " a\n" + fake_key() + " b",       # a second line
    fake_key() + " a\r" + fake_key(),
    fake_key() + " evil\x1b]0;title\x07",          # terminal controls in the comment
    fake_key() + " rtl\u202eexe.txt",
    "ssh-ed25519 !!notbase64!!",
    "ssh-ed25519",
    fake_key("ssh-rsa").replace("ssh-rsa", "ssh-ed25519", 1),  # blob of another type
    "",
    "ssh-ed25519 " + "A" * 20000,
])
def test_anything_but_one_plain_key_line_is_refused(text: str) -> None:
    with pytest.raises(RejectedError):
        sshkeys.parse_public_key(text)


def test_the_key_is_appended_with_safe_modes(tmp_path: Path) -> None:
    ssh = tmp_path / ".ssh"
    old = os.umask(0o022)
    try:
        assert sshkeys.append_key(ssh, sshkeys.parse_public_key(fake_key() + " one")) is None
    finally:
        os.umask(old)
    assert stat.S_IMODE(ssh.stat().st_mode) == 0o700
    keys = ssh / "authorized_keys"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    assert keys.read_text() == fake_key() + " one\n"


def test_existing_lines_stay_and_a_missing_newline_is_added(tmp_path: Path) -> None:
    ssh = tmp_path / ".ssh"
    ssh.mkdir(mode=0o700)
    keys = ssh / "authorized_keys"
    keys.write_text("ssh-rsa AAAAexisting old")  # no final newline
    keys.chmod(0o640)
    assert sshkeys.append_key(ssh, sshkeys.parse_public_key(fake_key() + " new")) is None
    assert keys.read_text() == f"ssh-rsa AAAAexisting old\n{fake_key()} new\n"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o640  # an existing file's mode is its owner's


def test_a_key_already_there_is_not_added_twice(tmp_path: Path) -> None:
    ssh = tmp_path / ".ssh"
    key = sshkeys.parse_public_key(fake_key() + " c")
    assert sshkeys.append_key(ssh, key) is None
    again = sshkeys.append_key(ssh, sshkeys.parse_public_key(fake_key() + " other comment"))
    assert again == ""  # there already, on a line without options
    assert (ssh / "authorized_keys").read_text().count("ssh-ed25519") == 1


RESTRICTED = [
    'restrict,command="rsync --server -e.LsfxC . /backup" {key} backup',
    'command="echo \\"a, b\\" c",no-pty {key}',  # an escaped quote, commas and blanks inside
    'from="10.0.0.0/8,192.168.1.1",cert-authority\t{key}',
    '  no-agent-forwarding   {key} spaced',
]


@pytest.mark.parametrize("template", RESTRICTED)
def test_a_key_there_with_options_keeps_its_line(tmp_path: Path, template: str) -> None:
    ssh = tmp_path / ".ssh"
    ssh.mkdir(mode=0o700)
    keys = ssh / "authorized_keys"
    line = template.format(key=fake_key())
    before = f"# mine\nssh-rsa AAAAother x\n{line}\n"
    keys.write_text(before)
    options = sshkeys.append_key(ssh, sshkeys.parse_public_key(fake_key() + " new comment"))
    assert options == line.strip().split(fake_key())[0].strip()
    assert keys.read_text() == before  # the restricted line stays the only one for the key


def test_options_naming_a_key_type_inside_quotes_do_not_confuse_the_reader() -> None:
    other = fake_key("ssh-rsa")
    text = f'command="ssh-ed25519 {fake_key().split()[1]}" {other}\n'
    key = sshkeys.parse_public_key(fake_key())
    assert sshkeys.existing_options(text, key) is None  # the ed25519 key is only quoted text
    assert sshkeys.existing_options(text, sshkeys.parse_public_key(other)) is not None


@pytest.mark.parametrize("line", ["", "   ", "# ssh-ed25519 AAAA", 'command="open ssh-ed25519',
                                  "restrict"])
def test_lines_without_a_key_are_skipped(line: str) -> None:
    assert sshkeys.split_key_line(line) is None


def test_a_symlinked_authorized_keys_is_refused(tmp_path: Path) -> None:
    ssh = tmp_path / ".ssh"
    ssh.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (ssh / "authorized_keys").symlink_to(victim)
    with pytest.raises(LocalError, match="symbolic link"):
        sshkeys.check_writable(ssh)
    with pytest.raises(LocalError, match="symbolic link"):
        sshkeys.append_key(ssh, sshkeys.parse_public_key(fake_key()))
    assert victim.read_text() == "precious\n"


def test_a_symlinked_ssh_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".ssh").symlink_to(elsewhere)
    with pytest.raises(LocalError, match="symbolic link"):
        sshkeys.check_writable(tmp_path / ".ssh")
    with pytest.raises(LocalError, match="symbolic link"):
        sshkeys.append_key(tmp_path / ".ssh", sshkeys.parse_public_key(fake_key()))
    assert list(elsewhere.iterdir()) == []


def test_check_writable_notes_what_will_be_created(tmp_path: Path) -> None:
    notes = sshkeys.check_writable(tmp_path / ".ssh")
    assert notes == [f"Note: '{tmp_path / '.ssh'}' not found; will be created"]


def test_the_sender_refuses_to_send_a_private_key(tmp_path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")],
                   check=True)
    with pytest.raises(LocalError, match="not an SSH public key"):
        sshkeys.read_public_key(tmp_path / "id")
    assert sshkeys.public_key_files(str(tmp_path)) == [tmp_path / "id.pub"]
    assert sshkeys.public_key_files(str(tmp_path / "id.pub")) == [tmp_path / "id.pub"]
    with pytest.raises(LocalError, match="can't find"):
        sshkeys.public_key_files(str(tmp_path / "x"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(LocalError, match="no public keys"):
        sshkeys.public_key_files(str(tmp_path / "empty"))
