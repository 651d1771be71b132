"""``--tor`` on a private Tor network on 127.0.0.1 (see ``tornet.py``).

The mailbox and the transit relay are published as onion services (the private network has no
exits), so every client reaches them only through Tor. Run alone with ``-m tor``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tornet import Node, TorNetwork

pytestmark = [pytest.mark.tor, pytest.mark.interop]

ONION_WON = re.compile(r"\(->tor [a-z2-7]{56}\.onion:\d+")
SIZE = 5 * 1024 * 1024


@dataclass
class TorWorld:
    net: TorNetwork
    relay_url: str  # ws://<mailbox onion>:80/v1
    transit_helper: str  # tcp:<relay onion>:80
    sender: Node
    receiver: Node
    mailbox_port: int
    relay_port: int


@pytest.fixture(scope="session")
def tor_world(mailbox_server, transit_helper: str, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[TorWorld]:
    tor = shutil.which("tor") or ("/usr/sbin/tor" if os.path.exists("/usr/sbin/tor") else None)
    if tor is None:
        pytest.fail("Debian's tor is not installed (apt-get install tor)", pytrace=False)
    base = tmp_path_factory.mktemp("tor")
    mailbox_port = mailbox_server.port
    relay_port = int(transit_helper.rsplit(":", 1)[1])
    net = TorNetwork(base / "net", tor=tor)
    try:
        net.start()
        net.wait_bootstrapped(150)
        host = net.clients[0]
        mailbox_onion = net.publish(host, mailbox_port)
        relay_onion = net.publish(host, relay_port)
        for client in net.clients:
            net.wait_reachable(client, mailbox_onion, 80)
            net.wait_reachable(client, relay_onion, 80)
        yield TorWorld(net, f"ws://{mailbox_onion}:80/v1", f"tcp:{relay_onion}:80",
                       net.clients[0], net.clients[1], mailbox_port, relay_port)
    finally:
        net.stop()


def _hilltop(peers, world: TorWorld, *args: str, cwd: Path | None = None,
             helper: str | None = None):
    return peers.hilltop(*args, relay_url=world.relay_url,
                         transit_helper=helper or world.transit_helper, cwd=cwd)


def _official(peers, world: TorWorld, *args: str, cwd: Path | None = None,
              helper: str | None = None):
    return peers.official(*args, relay_url=world.relay_url,
                          transit_helper=helper or world.transit_helper, cwd=cwd)


# A relay neither side will dial under --tor (a private address cannot be reached through Tor),
# so the onion service is the only path: otherwise the official client's relay dial (2 s after
# its onion dial) can win while the fresh onion's first rendezvous is still being built.
NO_RELAY = "tcp:127.0.0.1:9"


def _payload(path: Path, size: int) -> bytes:
    data = os.urandom(size)
    path.write_bytes(data)
    return data


def test_hilltop_to_hilltop_onion(peers, tor_world: TorWorld, tmp_path: Path) -> None:
    w = tor_world
    data = _payload(tmp_path / "five.bin", SIZE)
    sender = _hilltop(peers, w, "send", "--tor-control-port", w.sender.control_endpoint,
                      str(tmp_path / "five.bin"))
    code = sender.wait_for_code(90)
    out = tmp_path / "got"
    out.mkdir()
    receiver = _hilltop(peers, w, "receive", "--tor-control-port", w.receiver.control_endpoint,
                        "--accept-file", code, cwd=out)
    got = receiver.finish(150)
    sent = sender.finish(30)
    assert got.returncode == 0, got.describe()
    assert sent.returncode == 0, sent.describe()
    assert (out / "five.bin").read_bytes() == data
    assert ONION_WON.search(got.stderr), got.describe()
    assert "tor-relay" not in got.stderr and "tor-relay" not in sent.stderr


def test_hilltop_sender_official_receiver(peers, tor_world: TorWorld, tmp_path: Path) -> None:
    """The official client dials our tor-tcp-v1 hint (it never makes an onion service)."""
    w = tor_world
    data = _payload(tmp_path / "small.bin", 200_000)
    sender = _hilltop(peers, w, "send", "--tor-control-port", w.sender.control_endpoint,
                      str(tmp_path / "small.bin"), helper=NO_RELAY)
    code = sender.wait_for_code(90)
    out = tmp_path / "got"
    out.mkdir()
    receiver = _official(peers, w, "receive", "--tor", "--tor-control-port",
                         w.receiver.control_endpoint, "--accept-file", code, cwd=out,
                         helper=NO_RELAY)
    got = receiver.finish(150)
    sent = sender.finish(30)
    assert got.returncode == 0, got.describe()
    assert sent.returncode == 0, sent.describe()
    assert (out / "small.bin").read_bytes() == data
    # the winner is the official's inbound connection to our onion service
    assert re.search(r"Sending \(tor [a-z2-7]{56}\.onion:\d+ \(inbound\)", sent.stderr), \
        sent.describe()


def test_official_sender_hilltop_socks_only_receiver(peers, tor_world: TorWorld,
                                                     tmp_path: Path) -> None:
    """SOCKS-only hilltop cannot make an onion service: both meet at the relay, via Tor."""
    w = tor_world
    data = _payload(tmp_path / "small.bin", 200_000)
    sender = _official(peers, w, "send", "--tor", "--tor-control-port",
                       w.sender.control_endpoint, str(tmp_path / "small.bin"))
    code = sender.wait_for_code(90)
    out = tmp_path / "got"
    out.mkdir()
    receiver = _hilltop(peers, w, "receive", "--tor-socks", f"127.0.0.1:{w.receiver.socks}",
                        "--accept-file", code, cwd=out)
    got = receiver.finish(150)
    sent = sender.finish(30)
    assert got.returncode == 0, got.describe()
    assert sent.returncode == 0, sent.describe()
    assert (out / "small.bin").read_bytes() == data
    assert "no onion service can be made" in got.stderr
    assert "Receiving (->tor-relay " in got.stderr, got.describe()


# --------------------------------------------------------------------------- leak test

def _socket_inodes(pid: int) -> set[str]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[8:-1])
    return found


def _tcp_table() -> dict[str, tuple[str, int, str, int, str]]:
    """inode -> (local ip, local port, remote ip, remote port, state) from /proc/net/tcp{,6}."""
    table = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(name).read_text().splitlines()[1:]:
            f = line.split()
            (lip, lport), (rip, rport) = (x.split(":") for x in (f[1], f[2]))
            table[f[9]] = (_ip(lip), int(lport, 16), _ip(rip), int(rport, 16), f[3])
    return table


def _ip(hexed: str) -> str:
    raw = bytes.fromhex(hexed)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words))


LISTEN = "0A"


def test_no_leaks(peers, tor_world: TorWorld, tmp_path: Path) -> None:
    """Our transit message names no IP address, and we talk to nothing but Tor."""
    w = tor_world
    _payload(tmp_path / "small.bin", 1000)
    sender = _hilltop(peers, w, "send", "--tor-control-port", w.sender.control_endpoint,
                      str(tmp_path / "small.bin"))
    code = sender.wait_for_code(90)
    seen: set[tuple[str, int, str, int, str]] = set()

    def sample() -> None:
        if sender.poll() is not None:
            return
        mine = _socket_inodes(sender.pid)
        seen.update(v for k, v in _tcp_table().items() if k in mine)

    peer = peers.run("leak-peer", [sys.executable, str(Path(__file__).parent /
                                                       "tor_leak_peer.py"),
                                   w.relay_url, w.receiver.control_endpoint, code],
                     relay_url=w.relay_url)
    deadline = time.monotonic() + 120
    while peer.poll() is None and time.monotonic() < deadline:
        sample()
        time.sleep(0.05)
    result = peer.finish(10)
    sender.kill()
    assert result.returncode == 0, result.describe()
    messages = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    transit = next(m["transit"] for m in messages if "transit" in m)
    hint_types = {h["type"] for h in transit["hints-v1"]}
    assert "tor-tcp-v1" in hint_types and "direct-tcp-v1" not in hint_types, transit
    for text in re.findall(r'"hostname":\s*"([^"]+)"', json.dumps(transit)):
        with pytest.raises(ValueError):
            ipaddress.ip_address(text)  # every hostname is a name (an onion), never an IP
        assert text.endswith(".onion"), transit
    tor_ports = {w.sender.control, w.sender.socks}
    listening = {s[1] for s in seen if s[4] == LISTEN}
    assert seen, "sampled no socket of the sender"
    for lip, lport, rip, rport, state in seen:
        if state == LISTEN:
            assert lip == "127.0.0.1", f"a listener on {lip}:{lport}: {seen}"
            continue
        # an outbound connection goes to Tor's control or SOCKS port; anything else must be
        # an inbound connection to our onion service's local listener (made by Tor itself)
        assert rport in tor_ports or lport in listening, \
            f"connection {lip}:{lport} -> {rip}:{rport} is not to Tor: {seen}"
        assert rport not in (w.mailbox_port, w.relay_port)
