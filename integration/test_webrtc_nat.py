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
from nsproc import NamespaceLab, Proc, hilltop_command

pytest.importorskip("aiortc")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "nft", "turnserver")),
    reason="the NAT lab needs root, iproute2, nftables and coturn (apt-get install coturn "
           "nftables)")

SIZE = 5_000_000
MAILBOX = "ws://198.19.0.1:4000/v1"
STUN = "stun:198.19.0.1:3478"
TURN = "turn:198.19.0.1:3478?transport=udp"


def _router_rules(symmetric: bool) -> str:
    masq = "masquerade fully-random" if symmetric else "masquerade"
    return f"""
table ip nat {{
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    oifname "wan" {masq}
  }}
}}
table inet fw {{
  chain input {{
    type filter hook input priority filter; policy accept;
    ct state established,related accept
    iifname "wan" drop
  }}
  chain forward {{
    type filter hook forward priority filter; policy accept;
    ct state established,related accept
    iifname "wan" drop
  }}
}}
"""


class NatLab(NamespaceLab):
    """A "public" namespace, two NAT routers and a host behind each; ``down()`` removes all."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, "wr")

    def _add(self, name: str) -> None:
        self.add_namespace(name)
        self.exec(name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")

    def up(self, symmetric_a: bool) -> None:
        for name in ("pub", "natA", "natB", "hostA", "hostB"):
            self._add(name)
        self.exec("pub", "ip", "link", "add", "br0", "type", "bridge")
        self.exec("pub", "ip", "addr", "add", "198.19.0.1/24", "dev", "br0")
        self.exec("pub", "ip", "link", "set", "br0", "up")
        for side, wan, net in (("A", "198.19.0.2", 1), ("B", "198.19.0.3", 2)):
            nat, host = f"nat{side}", f"host{side}"
            self.ip("link", "add", "wan", "netns", self.ns(nat), "type", "veth",
                    "peer", "name", f"p{nat}", "netns", self.ns("pub"))
            self.exec("pub", "ip", "link", "set", f"p{nat}", "master", "br0", "up")
            self.exec(nat, "ip", "addr", "add", f"{wan}/24", "dev", "wan")
            self.exec(nat, "ip", "link", "set", "wan", "up")
            self.ip("link", "add", "eth0", "netns", self.ns(host), "type", "veth",
                    "peer", "name", "lan", "netns", self.ns(nat))
            self.exec(nat, "ip", "addr", "add", f"198.18.{net}.1/24", "dev", "lan")
            self.exec(nat, "ip", "link", "set", "lan", "up")
            self.exec(nat, "ip", "route", "add", "default", "via", "198.19.0.1")
            self.exec(nat, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            self.exec(nat, "nft", "-f", "-", stdin=_router_rules(symmetric_a and side == "A"))
            self.exec(host, "ip", "addr", "add", f"198.18.{net}.10/24", "dev", "eth0")
            self.exec(host, "ip", "link", "set", "eth0", "up")
            self.exec(host, "ip", "route", "add", "default", "via", f"198.18.{net}.1")

    def servers(self, mailbox_twist: Path) -> None:
        self.run("pub", "mailbox", [str(mailbox_twist), "wormhole-mailbox",
                                    "--port", "tcp:4000:interface=198.19.0.1",
                                    "--channel-db", str(self.workdir / "mailbox.sqlite")])
        self.run("pub", "coturn", [
            "turnserver", "-n", "--listening-ip=198.19.0.1", "--relay-ip=198.19.0.1",
            "--listening-port=3478", "--min-port=49152", "--max-port=49999",
            "--realm=natlab", "--lt-cred-mech", "--user=natlab:natlabpass", "--fingerprint",
            "--no-tls", "--no-dtls", "--no-cli", "--no-multicast-peers",
            "--allowed-peer-ip=198.19.0.0-198.19.0.255",
            "--denied-peer-ip=0.0.0.0-255.255.255.255",
            f"--log-file={self.workdir / 'turn.log'}", "--simple-log",
            f"--pidfile={self.workdir / 'turn.pid'}"])
        self.wait_listening("pub", 4000)
        self.wait_listening("pub", 3478, "-lunH")



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
