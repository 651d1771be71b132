"""LAN mode acceptance: transfers with no server at all, found by mDNS, between network namespaces.

Every host is a network namespace made here: ``a`` (the sender), ``b`` (the receiver), ``c`` (a
stranger, or an official client) and ``d`` (an mDNS watcher), joined by a bridge in a fifth
namespace, with addresses in 198.18.0.0/24 and 2001:2::/64 (the benchmarking ranges). Multicast
stays on that bridge; nothing touches this machine's own interfaces. No mailbox or relay
process runs anywhere, except in the one test of the ``lan`` transport under a normal mailbox,
where the official mailbox server runs in the bridge namespace. Every namespace and every
process is removed (by PID) when a test ends, also when it fails.

Needs root (CI and the dev machines are root) and iproute2; works from inside the loopback-only
namespace of ``integration/netns-run`` too, because ``ip netns`` namespaces are siblings.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nsproc import NamespaceLab, Proc, hilltop_command

HERE = Path(__file__).resolve().parent
TEXT = "over the LAN, no server: ünïcode ✓"
HOSTS = {"a": 11, "b": 12, "c": 13, "d": 14}
BIG = 50_000_000

needs_netns = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None,
    reason="LAN tests build network namespaces: they need root and iproute2")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class LanLab(NamespaceLab):
    """A bridge namespace and four host namespaces on it; ``down()`` removes all of it."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, "hl")

    def _add(self, host: str) -> str:
        ns = self.add_namespace(host)
        etc = Path("/etc/netns") / ns  # no resolver, public wormhole names on loopback
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "resolv.conf").write_text("")
        (etc / "hosts").write_text("127.0.0.1 localhost\n"
                                   "127.0.0.1 relay.magic-wormhole.io transit.magic-wormhole.io\n")
        self.exec(host, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0",
                  "net.ipv6.conf.default.accept_dad=0")
        return ns

    def up(self) -> None:
        br = self._add("br")
        self.ip("-n", br, "link", "add", "br0", "type", "bridge")
        self.ip("-n", br, "addr", "add", "198.18.0.1/24", "dev", "br0")
        self.ip("-n", br, "link", "set", "br0", "up")
        for host, n in HOSTS.items():
            ns = self._add(host)
            # made directly inside the namespaces: no name ever exists in ours
            self.ip("link", "add", "eth0", "netns", ns, "type", "veth",
                    "peer", "name", f"v{host}", "netns", br)
            self.ip("-n", br, "link", "set", f"v{host}", "master", "br0", "up")
            self.ip("-n", ns, "addr", "add", f"198.18.0.{n}/24", "dev", "eth0")
            self.ip("-n", ns, "addr", "add", f"2001:2::{n}/64", "dev", "eth0", "nodad")
            self.ip("-n", ns, "link", "set", "eth0", "up")

    def tx_bytes(self, host: str) -> int:
        out = subprocess.run(["ip", "netns", "exec", self.ns(host), "cat",
                              "/sys/class/net/eth0/statistics/tx_bytes"],
                             check=True, capture_output=True, text=True, timeout=10)
        return int(out.stdout)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[LanLab]:
    lab = LanLab(tmp_path)
    try:
        lab.up()
        yield lab
    finally:
        lab.down()


def start_watcher(lab: LanLab) -> Proc:
    watcher = lab.run("d", "watch", [sys.executable, str(HERE / "mdns_watch.py"), "120"])
    watcher.wait_for("watching")
    return watcher


def start_sender(lab: LanLab, *args: str, cwd: Path | None = None) -> tuple[Proc, str, str]:
    sender = lab.run("a", "send", [*hilltop_command(), "send", "--lan", "--hide-progress", *args],
                     cwd=cwd)
    code = sender.wait_for(r"Wormhole code is: (\S+)").group(1)
    url = sender.wait_for(r"LAN mailbox: (ws://\S+)").group(1)
    return sender, code, url


def receive(lab: LanLab, code: str, cwd: Path, host: str = "b", name: str = "recv") -> Proc:
    return lab.run(host, name, [*hilltop_command(), "receive", "--lan", "--accept-file",
                                "--hide-progress", code], cwd=cwd)


def check_timing(recv: Proc, record_property: object) -> None:
    found = float(recv.wait_for(r"Found the sender's mailbox at \S+ after ([\d.]+) s").group(1))
    connected = float(recv.wait_for(
        r"Connected to the sender's mailbox ([\d.]+) s after finding it").group(1))
    print(f"LAN discovery: found after {found:.3f} s, connected {connected:.3f} s later")
    record_property("lan_found_s", found)  # type: ignore[operator]
    record_property("lan_discovery_to_connection_s", connected)  # type: ignore[operator]
    assert connected < 1.0, f"discovery to connection took {connected} s"


# --------------------------------------------------------------------------------------- tests
@needs_netns
def test_text_with_no_server_and_the_announcement_withdrawn(lab: LanLab,
                                                           record_property: object) -> None:
    watcher = start_watcher(lab)
    sender, code, url = start_sender(lab, "--text", TEXT)
    assert url.startswith("ws://198.18.0.11:") and url.endswith("/v1")
    recv = receive(lab, code, lab.workdir)
    assert recv.finish(30) == 0, recv.describe()
    assert recv.stdout == TEXT  # into a pipe: exactly as sent
    check_timing(recv, record_property)
    assert sender.finish(30) == 0, sender.describe()
    nameplate, words = code.split("-", 1)
    watcher.wait_for(rf"added nameplate-{nameplate}\.")
    watcher.wait_for(rf"removed nameplate-{nameplate}\.", 10)
    for word in words.split("-"):  # only the nameplate is ever announced
        assert word not in watcher.stdout


@needs_netns
@pytest.mark.parametrize("receiver_first", [True, False], ids=["receiver-first", "sender-first"])
def test_a_quick_receiver_is_served_in_either_order(lab: LanLab, tmp_path: Path,
                                                    busy_loop: None, receiver_first: bool) -> None:
    """Issue 27, item 1: a receiver that found the announcement before the sender armed its
    nameplate guard was refused ("serves only the nameplate it announced") and the sender
    waited for ever. Both start orders a user can produce, with a busy loop beside them."""
    code = "6-guitarist-revenge"
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.bin").write_bytes(os.urandom(300_000))
    dest = tmp_path / "dest"
    dest.mkdir()
    send_argv = [*hilltop_command(), "send", "--lan", "--hide-progress", "--code", code, "f.bin"]
    if receiver_first:
        recv = receive(lab, code, dest)
        recv.wait_for("Looking for nameplate 6 on the LAN")
        time.sleep(1.0)
        sender = lab.run("a", "send", send_argv, cwd=src)
    else:
        sender = lab.run("a", "send", send_argv, cwd=src)
        recv = receive(lab, code, dest)
    assert recv.finish(60) == 0, recv.describe() + sender.describe()
    assert sender.finish(30) == 0, sender.describe()
    assert (dest / "f.bin").read_bytes() == (src / "f.bin").read_bytes()
    for proc in (sender, recv):
        assert "Traceback" not in proc.stderr


@needs_netns
def test_big_file_and_directory(lab: LanLab, tmp_path: Path, record_property: object) -> None:
    src = tmp_path / "src"
    src.mkdir()
    big = src / "big.bin"
    big.write_bytes(os.urandom(BIG))
    sender, code, _url = start_sender(lab, "big.bin", cwd=src)
    dest = tmp_path / "dest"
    dest.mkdir()
    recv = receive(lab, code, dest)
    assert recv.finish(60) == 0, recv.describe()
    assert sender.finish(30) == 0, sender.describe()
    assert sha256(dest / "big.bin") == sha256(big)
    check_timing(recv, record_property)

    tree = src / "tree"
    (tree / "sub" / "deeper").mkdir(parents=True)
    (tree / "empty").mkdir()
    (tree / "a.txt").write_text("alpha\n")
    (tree / "sub" / "b.bin").write_bytes(os.urandom(300_000))
    (tree / "sub" / "deeper" / "c ünï.txt").write_text("gamma\n")
    sender, code, _url = start_sender(lab, "tree", cwd=src)
    recv = receive(lab, code, dest, name="recv-dir")
    assert recv.finish(60) == 0, recv.describe()
    assert sender.finish(30) == 0, sender.describe()
    got = dest / "tree"
    for rel in ("a.txt", "sub/b.bin", "sub/deeper/c ünï.txt"):
        assert (got / rel).read_bytes() == (tree / rel).read_bytes()
    assert (got / "empty").is_dir()


@needs_netns
def test_wrong_code_ends_the_session_and_sends_nothing(lab: LanLab, tmp_path: Path) -> None:
    watcher = start_watcher(lab)
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(BIG))
    sender, code, _url = start_sender(lab, "big.bin", cwd=src)
    nameplate = code.split("-")[0]
    wrong = f"{nameplate}-aardvark-adroitness"
    if wrong == code:
        wrong = f"{nameplate}-absurd-adroitness"
    before = lab.tx_bytes("a")
    stranger_dir = tmp_path / "stranger"
    stranger_dir.mkdir()
    stranger = receive(lab, wrong, stranger_dir, host="c", name="stranger")
    assert stranger.finish(30) != 0
    assert "wrong code" in stranger.stderr and "Traceback" not in stranger.stderr
    assert sender.finish(30) == 3, sender.describe()  # wrong code (cli/exitcodes.py)
    assert f"someone tried nameplate {nameplate} with a wrong code" in sender.stderr
    assert "Traceback" not in sender.stderr
    sent = lab.tx_bytes("a") - before
    print(f"the sender sent {sent} bytes in all during the wrong attempt")
    assert sent < 200_000, f"the sender sent {sent} bytes to a stranger"
    assert list(stranger_dir.iterdir()) == []
    watcher.wait_for(rf"removed nameplate-{nameplate}\.", 10)


@needs_netns
def test_official_client_joins_with_the_printed_url(lab: LanLab, tmp_path: Path,
                                                    peers_venv: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    payload = src / "payload.bin"
    payload.write_bytes(os.urandom(2_000_000))
    sender, code, url = start_sender(lab, "payload.bin", cwd=src)
    dest = tmp_path / "dest"
    dest.mkdir()
    official = lab.run("c", "official", [str(peers_venv / "bin" / "wormhole"), "--relay-url",
                                         url, "receive", "--accept-file", code], cwd=dest)
    assert official.finish(60) == 0, official.describe()
    assert sender.finish(30) == 0, sender.describe()
    assert sha256(dest / "payload.bin") == sha256(payload)


@needs_netns
def test_lan_transport_wins_when_direct_hints_are_wrong(lab: LanLab, tmp_path: Path,
                                                        peers_venv: Path) -> None:
    """A normal mailbox; both sides advertise an unreachable address; mDNS finds the way."""
    lab.run("br", "mailbox", [str(peers_venv / "bin" / "twist"), "wormhole-mailbox",
                              "--port", "tcp:4000:interface=198.18.0.1",
                              "--channel-db", str(tmp_path / "mailbox.sqlite")])
    lab.wait_listening("br", 4000)
    relay = "ws://198.18.0.1:4000/v1"
    code = "5-guitarist-revenge"
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.bin").write_bytes(os.urandom(3_000_000))
    dest = tmp_path / "dest"
    dest.mkdir()
    peer = [sys.executable, str(HERE / "lan_api_peer.py")]
    sender = lab.run("a", "api-send", [*peer, "send", relay, code, str(src / "f.bin")])
    recv = lab.run("b", "api-recv", [*peer, "receive", relay, code, str(dest)])
    assert recv.finish(60) == 0, recv.describe()
    assert sender.finish(30) == 0, sender.describe()
    assert sha256(dest / "f.bin") == sha256(src / "f.bin")
    for proc in (sender, recv):
        assert re.search(r"connected: lan 198\.18\.0\.1[12]:\d+", proc.stdout), proc.describe()


def test_unreachable_mailbox_suggests_lan(tmp_path: Path) -> None:
    """Plain loopback: a port nobody listens on stands for a mailbox that cannot be reached."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for args in (["send", "--text", "x"], ["receive", "7-guitarist-revenge"]):
        dead = f"ws://127.0.0.1:{port}/v1"
        proc = subprocess.run([*hilltop_command(), "--relay-url", dead, *args],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 1
        assert "cannot reach the mailbox server" in proc.stderr
        assert f"wormhole {args[0]} --lan" in proc.stderr
        assert "Traceback" not in proc.stderr
