"""Default installs across NATs: TCP hole punching, the relay where it cannot work, official peers.

One lab for the module (:mod:`natlab`): the official mailbox server 0.8 (it tells each client
its public address) and the official transit relay 0.5 with ``--usage-db`` in pub, no STUN
server. Peers run with no transport flags, only the lab's mailbox and relay. The hints of
``direct-tcp`` carry private addresses nobody can reach, so across two port-keeping NATs only
the punch can go direct; with a symmetric NAT the relay must carry the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from natlab import MAILBOX, MAILBOX6, QUIET_MAILBOX, STUN, TRANSIT_HELPER, NatLab
from nsproc import Proc, hilltop_command

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "nft")),
    reason="the NAT lab needs root, iproute2 and nftables")

BIG = 100_000_000  # the acceptance size, once
SMALL = 2_000_000
HERE = Path(__file__).parent
DIRECT = {"direct-tcp", "inbound", "tcp-punch"}  # "inbound": the peer's dial to our listener
DEFAULT_INSTALL = ["--transports", "direct-tcp,tcp-punch,relay"]
"""What a default install (no extras) races here: the test venv has the webrtc extra, whose
ICE would otherwise join the race with the mailbox's address (test_webrtc_nat.py covers it)."""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, peers_venv: Path) -> Iterator[NatLab]:
    lab = NatLab(tmp_path_factory.mktemp("punchlab"))
    try:
        lab.up()
        lab.add_public_host("hostC", "198.19.0.4")
        lab.add_public_host("hostD", "198.19.0.5")
        lab.add_lan_host("A", "hostA2", "198.18.1.11")
        lab.servers(peers_venv / "bin" / "twist", coturn=True, relay=True)
        lab.quiet_mailbox(peers_venv / "bin" / "python")
        lab.ipv6_segment(peers_venv / "bin" / "twist",
                         {"hostE": "2001:db8::10", "hostF": "2001:db8::11"})
        yield lab
    finally:
        lab.down()


def _file(folder: Path, size: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "f.bin"
    with open(path, "wb") as out:
        for _ in range(size // 1_000_000):
            out.write(os.urandom(1_000_000))
        out.write(os.urandom(size % 1_000_000))
    return path


def _digest(path: Path) -> bytes:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.digest()


def _winner(proc: Proc) -> dict:
    won = [e for e in map(json.loads, filter(None, proc.stdout.splitlines()))
           if e.get("event") == "transit_attempt" and e.get("state") == "won"]
    assert len(won) == 1, proc.describe()
    return won[0]


def _hilltop(lab: NatLab, host: str, name: str, args: list[str], cwd: Path,
             mailbox: str = MAILBOX, command: list[str] | None = None) -> Proc:
    head = [*(command or hilltop_command()), "--relay-url", mailbox,
            "--transit-helper", TRANSIT_HELPER]
    return lab.run(host, name, [*head, "--json", *args], cwd=cwd)


def _attempts(proc: Proc, transport: str) -> list[str]:
    """The states (dialling, failed, cancelled, won) of ``transport``'s attempts, in order."""
    return [e["state"] for e in map(json.loads, filter(None, proc.stdout.splitlines()))
            if e.get("event") == "transit_attempt" and e.get("transport") == transport]


def transfer(lab: NatLab, tmp: Path, code: str, size: int, receiver_first: bool,
             hosts: tuple[str, str] = ("hostA", "hostB"), mailbox: str = MAILBOX,
             flags: tuple[list[str], list[str]] = ([], []),
             sender_command: list[str] | None = None) -> tuple[Proc, Proc, float]:
    """hosts[0] sends to hosts[1] with default transports (plus ``flags`` of each); returns
    both and the seconds taken."""
    src = _file(tmp / "src", size)
    dest = tmp / "dest"
    dest.mkdir()
    send = ["send", "--hide-progress", *flags[0], "--code", code, str(src)]
    recv = ["receive", "--hide-progress", *flags[1], "--accept-file", code]
    began = time.monotonic()

    def start_sender() -> Proc:
        return _hilltop(lab, hosts[0], f"send-{code}", send, tmp, mailbox, sender_command)

    if receiver_first:
        receiver = _hilltop(lab, hosts[1], f"recv-{code}", recv, dest, mailbox)
        time.sleep(1.0)
        sender = start_sender()
    else:
        sender = start_sender()
        sender.wait_for(r'"event": "code"', 30)
        receiver = _hilltop(lab, hosts[1], f"recv-{code}", recv, dest, mailbox)
    assert receiver.finish(90) == 0, receiver.describe() + sender.describe()
    assert sender.finish(30) == 0, sender.describe()
    took = time.monotonic() - began
    assert _digest(dest / "f.bin") == _digest(src)
    return sender, receiver, took


@pytest.mark.parametrize("receiver_first", [False, True], ids=["sender-first", "receiver-first"])
def test_two_cone_nats_go_direct_through_a_punched_hole(
        lab: NatLab, tmp_path: Path, receiver_first: bool) -> None:
    size = BIG if receiver_first else SMALL
    before = lab.relayed_bytes()
    sender, receiver, took = transfer(lab, tmp_path, "7-punch" + str(int(receiver_first)),
                                      size, receiver_first,
                                      flags=(DEFAULT_INSTALL, DEFAULT_INSTALL))
    print(f"\n{size} bytes across two cone NATs in {took:.1f} s: {_winner(receiver)}")
    assert _winner(sender)["transport"] == "tcp-punch", sender.describe()
    assert _winner(receiver)["transport"] == "tcp-punch", receiver.describe()
    assert lab.relayed_bytes() - before < 10_000  # the relay carried none of the file


def test_a_symmetric_nat_falls_back_to_the_relay_in_bounded_time(
        lab: NatLab, tmp_path: Path) -> None:
    """The acceptance case: the 100 MB a default install sends arrives through the relay."""
    lab.set_symmetric("A", True)
    try:
        before = lab.relayed_bytes()
        sender, receiver, took = transfer(lab, tmp_path, "8-symmetric", BIG, False,
                                          flags=(DEFAULT_INSTALL, DEFAULT_INSTALL))
    finally:
        lab.set_symmetric("A", False)
    print(f"\nsymmetric NAT: {BIG} bytes in {took:.1f} s through {_winner(receiver)}")
    assert _winner(sender)["transport"] == "relay", sender.describe()
    deadline = time.monotonic() + 10  # the relay writes its usage row as the session ends
    while lab.relayed_bytes() - before < BIG and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lab.relayed_bytes() - before >= BIG


def test_an_official_receiver_without_nat_still_gets_the_file(
        lab: NatLab, tmp_path: Path, peers_venv: Path) -> None:
    """Official 0.24 skips the tcp-punch-v1 hint and is met directly as before."""
    src = _file(tmp_path / "src", SMALL)
    dest = tmp_path / "dest"
    dest.mkdir()
    sender = _hilltop(lab, "hostA", "send-official", [
        "send", "--hide-progress", "--code", "9-official", str(src)], tmp_path)
    sender.wait_for(r'"event": "code"', 30)
    receiver = lab.run("hostC", "official-recv", [
        str(peers_venv / "bin" / "wormhole"), "--relay-url", MAILBOX, "--transit-helper",
        TRANSIT_HELPER, "receive", "--accept-file", "9-official"], cwd=dest)
    assert receiver.finish(60) == 0, receiver.describe() + sender.describe()
    assert sender.finish(30) == 0, sender.describe()
    assert _digest(dest / "f.bin") == _digest(src)
    assert _winner(sender)["transport"] == "direct-tcp", sender.describe()
    assert "unknown hint type" not in receiver.output


def test_two_symmetric_nats_fall_back_to_the_relay_in_bounded_time(
        lab: NatLab, tmp_path: Path) -> None:
    """Neither punch can land; the relay wins long before the punch's 20 s window ends."""
    for side in "AB":
        lab.set_symmetric(side, True)
    try:
        sender, receiver, took = transfer(lab, tmp_path, "10-symmetric", SMALL, False)
    finally:
        for side in "AB":
            lab.set_symmetric(side, False)
    print(f"\ntwo symmetric NATs: {took:.1f} s through {_winner(receiver)}")
    assert _winner(sender)["transport"] == "relay", sender.describe()
    assert took < 15, f"{took:.1f} s: the relay waited for the punch to give up"


def test_two_hosts_behind_one_nat_go_direct(lab: NatLab, tmp_path: Path) -> None:
    """Each side's direct-tcp hints carry its LAN address, which the other reaches; the punch
    would need the router to hairpin (the lab's does not: nothing on it listens there)."""
    before = lab.relayed_bytes()
    sender, receiver, _ = transfer(lab, tmp_path, "11-one-nat", SMALL, False,
                                   hosts=("hostA", "hostA2"))
    print(f"\nbehind one NAT: sender {_winner(sender)}, receiver {_winner(receiver)}")
    assert _winner(sender)["transport"] in DIRECT, sender.describe()
    assert _winner(receiver)["transport"] in DIRECT, receiver.describe()
    assert lab.relayed_bytes() - before < 10_000


def test_a_punch_refused_by_a_host_without_nat_does_not_hold_up_direct_tcp(
        lab: NatLab, tmp_path: Path) -> None:
    """Two public hosts: each punch dial goes to a port where nothing listens (no NAT: the
    peer's host answers with a reset, and the punch redials), while direct TCP to the listener
    wins as it did before, inside the relay's 2 s stagger."""
    sender, receiver, took = transfer(lab, tmp_path, "12-refused", SMALL, False,
                                      hosts=("hostC", "hostD"))
    print(f"\nno NAT: {took:.1f} s, sender {_winner(sender)}",
          f"punch {_attempts(sender, 'tcp-punch')}")
    assert _winner(sender)["transport"] in ("direct-tcp", "inbound"), sender.describe()
    assert _winner(receiver)["transport"] in ("direct-tcp", "inbound"), receiver.describe()
    for proc in (sender, receiver):  # the punch was tried, and lost
        assert _attempts(proc, "tcp-punch")[:1] == ["dialling"], proc.describe()
        assert "won" not in _attempts(proc, "tcp-punch")
    assert _attempts(sender, "relay") == [], sender.describe()  # won inside the 2 s stagger


def test_ipv6_without_nat_goes_direct(lab: NatLab, tmp_path: Path) -> None:
    """Global IPv6 addresses (documentation space) on pub's segment, a mailbox there."""
    sender, receiver, _ = transfer(lab, tmp_path, "13-ipv6", SMALL, False,
                                   hosts=("hostE", "hostF"), mailbox=MAILBOX6)
    print(f"\nIPv6: sender {_winner(sender)}, receiver {_winner(receiver)}")
    assert _winner(sender)["transport"] in DIRECT, sender.describe()
    assert "2001:db8::" in _winner(sender)["target"], sender.describe()


def test_stun_over_tcp_when_the_mailbox_says_no_address(lab: NatLab, tmp_path: Path) -> None:
    """A mailbox without ``your-address`` (as before 0.8) and coturn configured with --stun:
    each side learns its mapping over TCP from the punch port, and the punch goes direct.
    The transports of a default install: with the webrtc extra, ICE would use --stun too."""
    before = lab.relayed_bytes()
    stun = ["--stun", STUN, "--transports", "direct-tcp,tcp-punch,relay"]
    sender, receiver, _ = transfer(lab, tmp_path, "14-stun", SMALL, False,
                                   mailbox=QUIET_MAILBOX, flags=(stun, stun))
    assert _winner(sender)["transport"] == "tcp-punch", sender.describe()
    assert _winner(receiver)["transport"] == "tcp-punch", receiver.describe()
    assert lab.relayed_bytes() - before < 10_000


def test_no_listen_punches_nothing_and_asks_no_stun(lab: NatLab, tmp_path: Path) -> None:
    """``--no-listen`` with a STUN server configured and a mailbox that says no address (so a
    punch would ask it): the sender's audit log shows no connection to the STUN server or to
    the peer's public address, and the transfer meets at the relay."""
    audit = tmp_path / "sockets.jsonl"
    stun = ["--stun", STUN]
    sender, receiver, _ = transfer(
        lab, tmp_path, "15-no-listen", SMALL, False, mailbox=QUIET_MAILBOX,
        flags=(["--no-listen", *stun], stun),
        sender_command=[sys.executable, str(HERE / "socket_audit.py"), str(audit)])
    assert _winner(sender)["transport"] == "relay", sender.describe()
    assert _attempts(receiver, "tcp-punch") == [], receiver.describe()  # we sent no punch hint
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    connects = [tuple(e["address"][:2]) for e in events if e["event"] == "socket.connect"]
    assert ("198.19.0.1", 4002) in connects, connects  # the hook was live
    assert ("198.19.0.1", 3478) not in connects, connects  # no STUN
    assert not [c for c in connects if c[0] == "198.19.0.3"], connects  # no punch at natB
    assert not [e for e in events if e["event"] in ("socket.sendto", "socket.sendmsg")
                and e.get("address")], events  # no STUN over UDP either


def test_wormhole_william_across_a_cone_nat(lab: NatLab, tmp_path: Path) -> None:
    """wormhole-william behind natA sends to hilltop behind natB: it skips our tcp-punch-v1
    hint, neither reaches the other's private address, and both meet at the relay (its
    hard-wired transit.magic-wormhole.io is pub's relay in hostA's hosts file)."""
    william = shutil.which("wormhole-william")
    if william is None:
        pytest.fail("wormhole-william is not installed (apt-get install wormhole-william)")
    lab.hosts_file("hostA", "127.0.0.1 localhost\n198.19.0.1 transit.magic-wormhole.io\n")
    src = _file(tmp_path / "src", SMALL)
    dest = tmp_path / "dest"
    dest.mkdir()
    sender = lab.run("hostA", "william-send", [
        william, "--relay-url", MAILBOX, "send", "--hide-progress", "--code", "16-william",
        str(src)], cwd=tmp_path)
    receiver = _hilltop(lab, "hostB", "recv-william", [
        "receive", "--hide-progress", "--accept-file", "16-william"], dest)
    assert receiver.finish(60) == 0, receiver.describe() + sender.describe()
    assert sender.finish(30) == 0, sender.describe()
    assert _digest(dest / "f.bin") == _digest(src)
    print(f"\nwormhole-william behind natA: {_winner(receiver)}")
    assert _winner(receiver)["transport"] == "relay", receiver.describe()
