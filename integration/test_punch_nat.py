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
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from natlab import MAILBOX, TRANSIT_HELPER, NatLab
from nsproc import Proc, hilltop_command

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "nft")),
    reason="the NAT lab needs root, iproute2 and nftables")

BIG = 100_000_000  # the acceptance size, once
SMALL = 2_000_000


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, peers_venv: Path) -> Iterator[NatLab]:
    lab = NatLab(tmp_path_factory.mktemp("punchlab"))
    try:
        lab.up()
        lab.add_public_host("hostC", "198.19.0.4")
        lab.servers(peers_venv / "bin" / "twist", coturn=False, relay=True)
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


def _hilltop(lab: NatLab, host: str, name: str, args: list[str], cwd: Path) -> Proc:
    head = [*hilltop_command(), "--relay-url", MAILBOX, "--transit-helper", TRANSIT_HELPER]
    return lab.run(host, name, [*head, "--json", *args], cwd=cwd)


def transfer(lab: NatLab, tmp: Path, code: str, size: int, receiver_first: bool
             ) -> tuple[Proc, Proc, float]:
    """hostA sends to hostB with default transports; returns both and the seconds taken."""
    src = _file(tmp / "src", size)
    dest = tmp / "dest"
    dest.mkdir()
    send = ["send", "--hide-progress", "--code", code, str(src)]
    recv = ["receive", "--hide-progress", "--accept-file", code]
    began = time.monotonic()
    if receiver_first:
        receiver = _hilltop(lab, "hostB", f"recv-{code}", recv, dest)
        time.sleep(1.0)
        sender = _hilltop(lab, "hostA", f"send-{code}", send, tmp)
    else:
        sender = _hilltop(lab, "hostA", f"send-{code}", send, tmp)
        sender.wait_for(r'"event": "code"', 30)
        receiver = _hilltop(lab, "hostB", f"recv-{code}", recv, dest)
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
                                      size, receiver_first)
    print(f"\n{size} bytes across two cone NATs in {took:.1f} s: {_winner(receiver)}")
    assert _winner(sender)["transport"] == "tcp-punch", sender.describe()
    assert _winner(receiver)["transport"] == "tcp-punch", receiver.describe()
    assert lab.relayed_bytes() - before < 10_000  # the relay carried none of the file


def test_a_symmetric_nat_falls_back_to_the_relay_in_bounded_time(
        lab: NatLab, tmp_path: Path) -> None:
    lab.set_symmetric("A", True)
    try:
        before = lab.relayed_bytes()
        sender, receiver, took = transfer(lab, tmp_path, "8-symmetric", SMALL, False)
    finally:
        lab.set_symmetric("A", False)
    print(f"\nsymmetric NAT: {took:.1f} s through {_winner(receiver)}")
    assert _winner(sender)["transport"] == "relay", sender.describe()
    deadline = time.monotonic() + 10  # the relay writes its usage row as the session ends
    while lab.relayed_bytes() - before < SMALL and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lab.relayed_bytes() - before >= SMALL


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
