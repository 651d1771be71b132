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
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tornet import Node, TorNetwork

from hilltop.transfer.offers import INLINE_LIMIT

pytestmark = [pytest.mark.tor, pytest.mark.interop,
              # the first test also sets up tor_world, whose own deadlines add up to 390 s
              # (bootstrap 150, four onion checks of 60) before the test's 150 s and more
              pytest.mark.timeout(900)]

# the receiver's status line when an onion service carried the transfer: its own dial of the
# sender's onion, or the sender's dial of its onion (then "(inbound)")
RECEIVING_ONION = re.compile(r"Receiving \(->tor [a-z2-7]{56}\.onion:\d+( \(inbound\))?\)\.\.\.")
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
             helper: str | None = None, env: dict[str, str] | None = None):
    return peers.hilltop(*args, relay_url=world.relay_url,
                         transit_helper=helper or world.transit_helper, cwd=cwd, env=env)


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


def _both_succeed(receiver, sender, received: Path, data: bytes, sender_timeout: float):
    """Wait for both peers (the receiver first); both exit 0 and ``received`` holds ``data``."""
    got = receiver.finish(150)
    sent = sender.finish(sender_timeout)
    assert got.returncode == 0, got.describe()
    assert sent.returncode == 0, sent.describe()
    assert received.read_bytes() == data
    return got, sent


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
    got, sent = _both_succeed(receiver, sender, out / "five.bin", data, 30)
    assert RECEIVING_ONION.search(got.stderr), got.describe()
    assert "tor-relay" not in got.stderr and "tor-relay" not in sent.stderr


def _official_receives(peers, w: TorWorld, sender, code: str, tmp_path: Path, data: bytes,
                       sender_timeout: float):
    """The official client receives ``small.bin`` over Tor (no relay); both must succeed."""
    out = tmp_path / "got"
    out.mkdir()
    receiver = _official(peers, w, "receive", "--tor", "--tor-control-port",
                         w.receiver.control_endpoint, "--accept-file", code, cwd=out,
                         helper=NO_RELAY)
    return _both_succeed(receiver, sender, out / "small.bin", data, sender_timeout)[1]


def test_hilltop_sender_official_receiver(peers, tor_world: TorWorld, tmp_path: Path) -> None:
    """The official client dials our tor-tcp-v1 hint (it never makes an onion service)."""
    w = tor_world
    data = _payload(tmp_path / "small.bin", 200_000)
    sender = _hilltop(peers, w, "send", "--tor-control-port", w.sender.control_endpoint,
                      str(tmp_path / "small.bin"), helper=NO_RELAY)
    code = sender.wait_for_code(90)
    sent = _official_receives(peers, w, sender, code, tmp_path, data, 30)
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
    got, sent = _both_succeed(receiver, sender, out / "small.bin", data, 30)
    assert "no onion service can be made" in got.stderr
    assert "Receiving (->tor-relay " in got.stderr, got.describe()


# --------------------------------------------------------------------------- onion lifecycle

HERE = Path(__file__).parent
ONION_KEY_BLOB = b"ED25519-V3:"  # how a v3 onion service key is spelt to and by Tor


def _files(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file()]


def test_onion_service_removed_and_key_never_written(peers, tor_world: TorWorld,
                                                    tmp_path: Path) -> None:
    """The service is made with DiscardPK (Tor never hands us its key), carries the transfer,
    and is deleted (DEL_ONION) when the transfer ends, while our control connection is still
    open; nothing key-like reaches HOME, TMPDIR, the working directory or Tor's data."""
    w = tor_world
    data = _payload(tmp_path / "small.bin", 100_000)
    home, tmp, work = (tmp_path / name for name in ("home", "tmp", "work"))
    for d in (home, tmp, work):
        d.mkdir()
    sender = peers.run("onion-peer", [sys.executable, str(HERE / "tor_onion_peer.py"),
                                      w.relay_url, w.sender.control_endpoint,
                                      str(tmp_path / "small.bin")],
                       relay_url=w.relay_url, cwd=work,
                       env={"HOME": str(home), "TMPDIR": str(tmp)})
    code = sender.wait_for_code(90)
    sent = _official_receives(peers, w, sender, code, tmp_path, data, 60)
    report = json.loads(sent.stdout.strip().splitlines()[-1])
    commands = report["commands"]

    adds = [c for c in commands if c["command"].startswith("ADD_ONION")]
    assert len(adds) == 1, commands
    add = adds[0]
    assert add["command"].startswith("ADD_ONION NEW:ED25519-V3 "), add
    flags = re.search(r"Flags=(\S+)", add["command"])
    assert flags and "DiscardPK" in flags.group(1).split(","), add
    assert "Detach" not in flags.group(1).split(","), add
    assert "PrivateKey" not in add["reply"], "Tor handed us the service's key"
    service = re.search(r"ServiceID=([a-z2-7]{56})", add["reply"])
    assert service, add
    onion = service.group(1)
    assert any(f"{onion}.onion" in c for c in report["connected"]), report["connected"]

    removed = [c for c in commands if c["command"] == f"DEL_ONION {onion}"]
    assert len(removed) == 1 and removed[0].get("reply", "").strip() == "OK", commands
    assert commands.index(removed[0]) > commands.index(add)
    assert onion not in report["current"], report  # asked over our own control connection
    assert onion not in report["detached"], report
    # and from a separate control connection, after the process is gone
    assert not any(onion in line for line in w.net.control(w.sender, "GETINFO onions/detached"))

    assert _files(home, tmp, work) == [], "the sender left files behind"
    for path in _files(w.net.workdir):  # every tor's data directory
        assert path.name != "hs_ed25519_secret_key", path
        assert ONION_KEY_BLOB not in path.read_bytes(), path


# --------------------------------------------------------------------------- --launch-tor

def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_launch_tor(peers, tor_world: TorWorld, tmp_path: Path) -> None:
    """--launch-tor: txtorcon starts a tor of our own. A ``tor`` wrapper first on PATH adds
    the private network's options (txtorcon.launch has no way to name directory authorities),
    so this is the real launch path: find ``tor``, start it, bootstrap, make the onion
    service; and the launched tor is gone when the transfer ends."""
    w = tor_world
    data = _payload(tmp_path / "small.bin", 100_000)
    bindir, tmp = tmp_path / "bin", tmp_path / "tmp"
    bindir.mkdir()
    tmp.mkdir()
    record = tmp_path / "launched.txt"
    w.net.write_tor_wrapper(bindir, record)
    env = {"PATH": f"{bindir}:{os.environ.get('PATH', '')}", "TMPDIR": str(tmp)}
    sender = _hilltop(peers, w, "send", "--launch-tor", str(tmp_path / "small.bin"),
                      env=env, helper=NO_RELAY)
    code = sender.wait_for_code(180)  # a fresh tor has to bootstrap first
    sent = _official_receives(peers, w, sender, code, tmp_path, data, 60)
    launches = record.read_text().splitlines()
    assert len(launches) == 1, launches
    pid = int(launches[0].split()[0])
    assert f"__OwningControllerProcess {sender.pid}" in launches[0], launches[0]
    # the official client (no onion service of its own) reached ours, on the launched tor
    assert re.search(r"Sending \(tor [a-z2-7]{56}\.onion:\d+ \(inbound\)", sent.stderr), \
        sent.describe()
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid), f"the launched tor (pid {pid}) outlived the transfer"
    assert _files(tmp) == [], "the launched tor's data directory was left behind"


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


def _socket_table() -> dict[str, tuple[str, str, int, str, int, str]]:
    """inode -> (protocol, local ip, local port, remote ip, remote port, state) from
    /proc/net/{tcp,tcp6,udp,udp6}."""
    table = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        for line in Path(f"/proc/net/{proto}").read_text().splitlines()[1:]:
            f = line.split()
            (lip, lport), (rip, rport) = (x.split(":") for x in (f[1], f[2]))
            table[f[9]] = (proto.rstrip("6"), _ip(lip), int(lport, 16), _ip(rip),
                           int(rport, 16), f[3])
    return table


def _ip(hexed: str) -> str:
    raw = bytes.fromhex(hexed)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words))


LISTEN = "0A"
AF_UNIX, SOCK_STREAM = socket.AF_UNIX, socket.SOCK_STREAM


def _audit_violations(events: list[dict], tor_ports: set[int]) -> list[dict]:
    """Audit-log entries showing a socket that is not TCP to Tor (or a local listener)."""
    bad = []
    for e in events:
        kind = e["event"]
        if kind == "socket.__new__":
            if e.get("family") != AF_UNIX and e.get("type") != SOCK_STREAM:
                bad.append(e)  # UDP, raw, or a family we cannot tell: none under --tor
        elif kind == "socket.connect":
            addr = e.get("address")
            if not isinstance(addr, str) and not (
                    isinstance(addr, list) and addr[0] == "127.0.0.1" and addr[1] in tor_ports):
                bad.append(e)
        elif kind == "socket.bind":
            addr = e.get("address")
            if not isinstance(addr, str) and not (isinstance(addr, list)
                                                  and addr[0] == "127.0.0.1"):
                bad.append(e)
        elif kind in ("socket.sendto", "socket.sendmsg"):
            if e.get("address") is not None:
                bad.append(e)
        elif e.get("host") not in ("127.0.0.1", None):
            bad.append(e)  # a name resolved here instead of by Tor: a DNS leak
    return bad


def test_audit_detects_leaks() -> None:
    """The leak test's judge is not blind: each kind of leak is flagged."""
    tor = {9050, 9051}
    ok = [{"event": "socket.__new__", "family": 2, "type": 1},
          {"event": "socket.connect", "address": ["127.0.0.1", 9050]},
          {"event": "socket.bind", "address": ["127.0.0.1", 0]},
          {"event": "socket.getaddrinfo", "host": "127.0.0.1", "port": 9050}]
    assert _audit_violations(ok, tor) == []
    for leak in ({"event": "socket.__new__", "family": 2, "type": 2},
                 {"event": "socket.connect", "address": ["127.0.0.1", 4001]},
                 {"event": "socket.connect", "address": ["198.18.0.1", 9050]},
                 {"event": "socket.bind", "address": ["0.0.0.0", 0]},
                 {"event": "socket.sendto", "address": ["127.0.0.1", 3478]},
                 {"event": "socket.getaddrinfo", "host": "relay.magic-wormhole.io"}):
        assert _audit_violations([leak], tor) == [leak]


def test_no_leaks(peers, tor_world: TorWorld, tmp_path: Path) -> None:
    """Our transit message names no IP address, and we talk to nothing but Tor: the peer's
    clear-net bait hints are not dialled, no name is resolved locally, no UDP socket exists,
    and the STUN server given with --stun is never asked (no punch under --tor).

    Two witnesses: a Python audit hook in the sender (every socket, bind, connect, lookup,
    including attempts that fail at once in this loopback-only namespace) and samples of the
    kernel's TCP/UDP tables for the sender's sockets."""
    w = tor_world
    # Over the inline limit: a smaller file would ride in the offer (the leak peer's api
    # Wormhole lists inline-file-v1), with no transit message or hints to check.
    _payload(tmp_path / "small.bin", INLINE_LIMIT + 1000)
    bait = socket.create_server(("127.0.0.1", 0))  # a leaky sender would dial this
    bait.setblocking(False)
    bait_port = bait.getsockname()[1]
    hints = [
        {"type": "direct-tcp-v1", "hostname": "127.0.0.1", "port": bait_port, "priority": 0.0},
        {"type": "direct-tcp-v1", "hostname": "leak-check.invalid", "port": bait_port,
         "priority": 0.0},
        {"type": "relay-v1", "hints": [{"type": "direct-tcp-v1", "hostname": "127.0.0.1",
                                        "port": w.relay_port, "priority": 0.0}]},
    ]
    audit = tmp_path / "sockets.jsonl"
    stun = socket.create_server(("127.0.0.1", 0))  # a STUN server given: never asked under --tor
    stun.setblocking(False)
    sender = peers.run("hilltop", [sys.executable, str(HERE / "socket_audit.py"), str(audit),
                                   "--relay-url", w.relay_url,
                                   "--transit-helper", w.transit_helper,
                                   "send", "--tor-control-port", w.sender.control_endpoint,
                                   "--stun", f"stun:127.0.0.1:{stun.getsockname()[1]}",
                                   str(tmp_path / "small.bin")],
                       relay_url=w.relay_url, transit_helper=w.transit_helper)
    code = sender.wait_for_code(90)
    seen: set[tuple[str, str, int, str, int, str]] = set()

    def sample() -> None:
        if sender.poll() is not None:
            return
        mine = _socket_inodes(sender.pid)
        seen.update(v for k, v in _socket_table().items() if k in mine)

    peer = peers.run("leak-peer", [sys.executable, str(HERE / "tor_leak_peer.py"),
                                   w.relay_url, w.receiver.control_endpoint, code,
                                   json.dumps(hints), "8"],
                     relay_url=w.relay_url)
    deadline = time.monotonic() + 150
    while peer.poll() is None and time.monotonic() < deadline:
        sample()
        time.sleep(0.05)
    result = peer.finish(10)
    sender.kill()
    for unasked in (bait, stun):
        with pytest.raises(BlockingIOError):
            unasked.accept()  # nobody dialled the bait, nobody asked the STUN server
        unasked.close()
    assert result.returncode == 0, result.describe()
    messages = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    transit = next(m["transit"] for m in messages if "transit" in m)
    hint_types = {h["type"] for h in transit["hints-v1"]}
    assert "tor-tcp-v1" in hint_types and "direct-tcp-v1" not in hint_types, transit
    assert "tcp-punch-v1" not in hint_types, transit
    for text in re.findall(r'"hostname":\s*"([^"]+)"', json.dumps(transit)):
        with pytest.raises(ValueError):
            ipaddress.ip_address(text)  # every hostname is a name (an onion), never an IP
        assert text.endswith(".onion"), transit

    tor_ports = {w.sender.control, w.sender.socks}
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    connects = [e["address"] for e in events if e["event"] == "socket.connect"]
    assert ["127.0.0.1", w.sender.socks] in connects, connects  # the hook was live
    assert _audit_violations(events, tor_ports) == []

    listening = {s[2] for s in seen if s[0] == "tcp" and s[5] == LISTEN}
    assert seen, "sampled no socket of the sender"
    assert not [s for s in seen if s[0] == "udp"], f"UDP sockets: {seen}"
    for _proto, lip, lport, rip, rport, state in seen:
        if state == LISTEN:
            assert lip == "127.0.0.1", f"a listener on {lip}:{lport}: {seen}"
            continue
        # an outbound connection goes to Tor's control or SOCKS port; anything else must be
        # an inbound connection to our onion service's local listener (made by Tor itself)
        assert rport in tor_ports or lport in listening, \
            f"connection {lip}:{lport} -> {rip}:{rport} is not to Tor: {seen}"
        assert rport not in (w.mailbox_port, w.relay_port, bait_port)


def test_dilated_channel_over_onion(tor_world: TorWorld, fresh_code: str) -> None:
    """Dilation under Tor: the mailbox and every L2 connection through Tor (no relay to dial,
    so an onion service carries it), 1 MB echoed with SHA-256 both ways; hilltop both ends
    (official dials only direct and relay hints for L2). ~11 s beside the shared network."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_dilation import finish, line, start

    w = tor_world
    size = 1_000_000
    listener = start(sys.executable, "dilation_peer.py", w.relay_url, fresh_code, "listen",
                     env={"HILLTOP_TOR_CONTROL": w.receiver.control_endpoint})
    opener = start(sys.executable, "dilation_peer.py", w.relay_url, fresh_code, "open",
                   str(size), env={"HILLTOP_TOR_CONTROL": w.sender.control_endpoint})
    opened = finish(opener, 150)
    served = finish(listener, 60)
    for out in (opened, served):
        used = [ln for ln in out.splitlines() if ln.startswith("dilation: connected: ")]
        assert used, out
        for u in used:  # an onion dial, or the peer's dial of our onion service
            assert "tor " in u and "tor-relay" not in u, out
            assert ".onion" in u or "(inbound)" in u, out
    echoed = line(opened, "echoed ").split()
    assert echoed[1] == str(size)
    assert line(served, "served ").split()[1:] == echoed[1:]


def test_durable_transfer_over_onion_across_a_dropped_l2(peers, tor_world: TorWorld,
                                                         fresh_code: str,
                                                         tmp_path: Path) -> None:
    """``wormhole receive --tor-control-port`` follows a durable sender under Tor
    (integration/durable_sender.py); no relay to dial, so an onion service carries every L2
    connection. The sender reads no further than a third until the receiver acknowledged it,
    then aborts its L2 connection; the next generation is a new onion connection and carries
    the rest. (Without the hold the whole 300 kB and the receiver's final answer could be
    acknowledged in one read, and the transfer ended before the drop: 1 CI run.) 17-21 s
    beside the shared network."""
    sys.path.insert(0, str(HERE.resolve()))
    from test_dilation import finish, line, start

    w = tor_world
    data = _payload(tmp_path / "durable.bin", 300_000)
    out = tmp_path / "got"
    out.mkdir()
    code = fresh_code
    receiver = _hilltop(peers, w, "receive", "--tor-control-port", w.receiver.control_endpoint,
                        "--debug-state", "race,l2,manager", "--accept-file", code, cwd=out,
                        helper=NO_RELAY)
    sender = start(sys.executable, "durable_sender.py", w.relay_url, code,
                   str(tmp_path / "durable.bin"), str(len(data) // 3),
                   env={"HILLTOP_TOR_CONTROL": w.sender.control_endpoint})
    got = receiver.finish(150)
    try:
        sent = finish(sender, 30)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{got.describe()}") from None
    assert got.returncode == 0, got.describe() + sent
    # exactly a third: the sender held the rest back until it dropped (mid-transfer)
    assert line(sent, "dropping ") == f"dropping the L2 connection at {len(data) // 3} " \
        "acknowledged", sent
    assert line(sent, "generations ") == "generations 2", sent
    assert "reconnecting..." in got.stderr, got.describe() + sent
    for path in (ln for ln in sent.splitlines() if ln.startswith("dilation: connected: ")):
        assert "tor " in path and "tor-relay" not in path, sent
    assert (out / "durable.bin").read_bytes() == data
