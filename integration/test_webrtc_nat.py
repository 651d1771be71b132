"""The webrtc transport across two NATs, in network namespaces made here.

Topology (all in 198.18.0.0/15; nothing touches this machine's own interfaces)::

    hostA 198.18.1.10 - natA [wan .2] -+- pub 198.19.0.1 -+- [wan .3] natB - hostB 198.18.2.10
                               mailbox :4000, coturn :3478 (STUN + TURN)

The routers masquerade out of ``wan`` (nftables) and drop unsolicited input from it, as home
routers do; pub does not forward. Direct TCP cannot connect (the hints carry private
addresses), so the transfer can only go over WebRTC: through a hole punched with
server-reflexive candidates when both NATs keep one mapping per socket, and through the TURN
relay when natA is symmetric (``masquerade fully-random``). Each test prints which path won.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from natlab import MAILBOX, STUN, TURN, NatLab
from nsproc import Proc, hilltop_command

pytest.importorskip("aiortc")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "nft", "turnserver")),
    reason="the NAT lab needs root, iproute2, nftables and coturn (apt-get install coturn "
           "nftables)")

SIZE = 5_000_000


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[NatLab]:
    lab = NatLab(tmp_path)
    try:
        yield lab
    finally:
        lab.down()


def transfer(lab: NatLab, tmp_path: Path, code: str, ice: list[str]) -> tuple[Proc, Proc]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.bin").write_bytes(os.urandom(SIZE))
    dest = tmp_path / "dest"
    dest.mkdir()
    common = ["--transports", "direct-tcp,webrtc", "--hide-progress", *ice]
    head = [*hilltop_command(), "--relay-url", MAILBOX]
    sender = lab.run("hostA", "send", [*head, "send", *common, "--code", code,
                                        str(src / "f.bin")])
    recv = lab.run("hostB", "recv", [*head, "receive", "--accept-file", *common, code],
                   cwd=dest)
    assert recv.finish(90) == 0, recv.describe() + sender.describe()
    assert sender.finish(30) == 0, sender.describe()
    got = hashlib.sha256((dest / "f.bin").read_bytes()).digest()
    assert got == hashlib.sha256((src / "f.bin").read_bytes()).digest()
    return sender, recv


def won(recv: Proc) -> str:
    m = re.search(r"Receiving \(->([^)]*)\)", recv.output)
    assert m, recv.describe()
    print(f"\nwinning path: {m.group(1)}")
    return m.group(1)


def test_hole_punching_through_cone_nats(lab: NatLab, tmp_path: Path, peers_venv: Path) -> None:
    lab.up(symmetric_a=False)
    lab.servers(peers_venv / "bin" / "twist")
    _, recv = transfer(lab, tmp_path, "4-hole-punch", ["--stun", STUN])
    path = won(recv)
    assert path.startswith("webrtc "), recv.describe()
    assert "srflx" in path, recv.describe()  # the peer's reflexive address: a punched hole


def test_turn_relay_through_a_symmetric_nat(lab: NatLab, tmp_path: Path,
                                            peers_venv: Path) -> None:
    lab.up(symmetric_a=True)
    lab.servers(peers_venv / "bin" / "twist")
    ice = ["--stun", STUN, "--turn", TURN, "--turn-user", "natlab",
           "--turn-password", "natlabpass"]
    _, recv = transfer(lab, tmp_path, "5-turn-relay", ice)
    path = won(recv)
    assert path.startswith("webrtc "), recv.describe()
    assert "relay" in path, recv.describe()


def test_no_stun_server_the_mailbox_address_punches_the_hole(lab: NatLab, tmp_path: Path,
                                                             peers_venv: Path) -> None:
    """No ICE server at all: the server-reflexive candidate comes from the mailbox's
    ``your-address`` (hilltop.webrtc.reflexive), and ICE punches through both cone NATs."""
    lab.up(symmetric_a=False)
    lab.servers(peers_venv / "bin" / "twist", coturn=False)
    _, recv = transfer(lab, tmp_path, "6-mailbox-srflx", [])
    path = won(recv)
    assert path.startswith("webrtc "), recv.describe()
    assert "srflx" in path, recv.describe()
