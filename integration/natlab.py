"""The NAT lab: a "public" namespace, two NAT routers and a host behind each.

Topology (all in 198.18.0.0/15; nothing touches this machine's own interfaces)::

    hostA 198.18.1.10 - natA [wan .2] -+- pub 198.19.0.1 -+- [wan .3] natB - hostB 198.18.2.10
                 mailbox :4000, transit relay :4001, coturn :3478 (STUN + TURN), as asked

The routers masquerade out of ``wan`` (nftables) and drop unsolicited input from it, as home
routers do; pub does not forward. ``masquerade`` keeps source ports where it can (a cone NAT);
``masquerade fully-random`` maps every connection to a new port (a symmetric NAT). Recipe and
pitfalls: the netns README of the project's shared notes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nsproc import NamespaceLab

MAILBOX = "ws://198.19.0.1:4000/v1"
TRANSIT_HELPER = "tcp:198.19.0.1:4001"
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

    def up(self, symmetric_a: bool = False) -> None:
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

    def servers(self, twist: Path, coturn: bool = True, relay: bool = False) -> None:
        """The official mailbox server (0.8 says ``your-address``), and as asked coturn and
        the official transit relay (its ``--usage-db`` shows what it carried)."""
        self.run("pub", "mailbox", [str(twist), "wormhole-mailbox",
                                    "--port", "tcp:4000:interface=198.19.0.1",
                                    "--channel-db", str(self.workdir / "mailbox.sqlite")])
        if relay:
            self.run("pub", "transitrelay", [str(twist), "transitrelay",
                                             "--port", "tcp:4001:interface=198.19.0.1",
                                             "--usage-db", str(self.usage_db)])
            self.wait_listening("pub", 4001)
        if coturn:
            self.coturn()
        self.wait_listening("pub", 4000)

    @property
    def usage_db(self) -> Path:
        return self.workdir / "relay-usage.sqlite"

    def relayed_bytes(self) -> int:
        """Bytes the transit relay carried in finished sessions (its usage table)."""
        with sqlite3.connect(self.usage_db) as db:
            return int(db.execute("SELECT COALESCE(SUM(total_bytes), 0) FROM usage").fetchone()[0])

    def set_symmetric(self, side: str, symmetric: bool) -> None:
        """Swap a router's rules (keeps the lab: building one costs about a second)."""
        nat = f"nat{side}"
        self.exec(nat, "nft", "flush", "ruleset")
        self.exec(nat, "nft", "-f", "-", stdin=_router_rules(symmetric))

    def add_public_host(self, name: str, address: str) -> None:
        """A host on pub's segment with no NAT in front of it (e.g. 198.19.0.4)."""
        self._add(name)
        self.ip("link", "add", "eth0", "netns", self.ns(name), "type", "veth",
                "peer", "name", f"p{name}", "netns", self.ns("pub"))
        self.exec("pub", "ip", "link", "set", f"p{name}", "master", "br0", "up")
        self.exec(name, "ip", "addr", "add", f"{address}/24", "dev", "eth0")
        self.exec(name, "ip", "link", "set", "eth0", "up")

    def coturn(self) -> None:
        self.run("pub", "coturn", [
            "turnserver", "-n", "--listening-ip=198.19.0.1", "--relay-ip=198.19.0.1",
            "--listening-port=3478", "--min-port=49152", "--max-port=49999",
            "--realm=natlab", "--lt-cred-mech", "--user=natlab:natlabpass", "--fingerprint",
            "--no-tls", "--no-dtls", "--no-cli", "--no-multicast-peers",
            "--allowed-peer-ip=198.19.0.0-198.19.0.255",
            "--denied-peer-ip=0.0.0.0-255.255.255.255",
            f"--log-file={self.workdir / 'turn.log'}", "--simple-log",
            f"--pidfile={self.workdir / 'turn.pid'}"])
        self.wait_listening("pub", 3478, "-lunH")




