"""The browser lab: namespaces, the official mailbox, and the page driven in Chromium.

Shared by ``integration/test_browser_peer.py`` and ``bench/browser.py``. Three network
namespaces: ``net`` (a bridge, and the official mailbox server on 198.18.0.1:4000), ``a``
(command-line peers, 198.18.0.11) and ``b`` (Chromium, 198.18.0.12). The page is driven by
``web/driver/drive.mjs`` (puppeteer-core, which never downloads a browser) and gets its ICE
servers from its URL only; none are given, so ICE uses host candidates on these addresses.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path

from nsproc import NamespaceLab, Proc

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "web" / "driver" / "drive.mjs"
PAGE = ROOT / "cli" / "browser_page"
CHROMIUM = os.environ.get("HILLTOP_CHROMIUM", "/usr/bin/chromium")
MAILBOX = "ws://198.18.0.1:4000/v1"
RELAY_WS = "ws://198.18.0.1:4002/"  # the lab relay's WebSocket side (start_relay)
DEFAULT_MAILBOX = "ws://relay.magic-wormhole.io:4000/v1"  # resolves to 198.18.0.1 in the lab
HOSTS = {"a": 11, "b": 12}
BIG = 50_000_000

def missing_tools() -> list[str]:
    """What the lab needs and this machine lacks (.ci/run installs all of it)."""
    return [what for what, ok in (
        ("node", shutil.which("node") is not None),
        (CHROMIUM, Path(CHROMIUM).exists()),
        ("web/node_modules (cd web && npm ci)",
         (ROOT / "web/node_modules/puppeteer-core").exists()),
    ) if not ok]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class BrowserLab(NamespaceLab):
    def __init__(self, workdir: Path, twist: Path) -> None:
        super().__init__(workdir, "hb")
        self.twist = twist

    def _host(self, name: str) -> str:
        ns = self.add_namespace(name)
        etc = Path("/etc/netns") / ns
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "resolv.conf").write_text("")
        # the public mailbox's name leads to the lab's: the default mailbox works unchanged
        (etc / "hosts").write_text("127.0.0.1 localhost\n"
                                   "198.18.0.1 relay.magic-wormhole.io transit.magic-wormhole.io\n")
        self.exec(name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        return ns

    def up(self) -> None:
        net = self._host("net")
        self.ip("-n", net, "link", "add", "br0", "type", "bridge")
        self.ip("-n", net, "addr", "add", "198.18.0.1/24", "dev", "br0")
        self.ip("-n", net, "link", "set", "br0", "up")
        for host, n in HOSTS.items():
            ns = self._host(host)
            self.ip("link", "add", "eth0", "netns", ns, "type", "veth",
                    "peer", "name", f"v{host}", "netns", net)
            self.ip("-n", net, "link", "set", f"v{host}", "master", "br0", "up")
            self.ip("-n", ns, "addr", "add", f"198.18.0.{n}/24", "dev", "eth0")
            self.ip("-n", ns, "link", "set", "eth0", "up")
        self.start_mailbox()

    def start_mailbox(self, name: str = "mailbox") -> Proc:
        """The official mailbox on 198.18.0.1:4000, its channels in a file (they survive a
        restart, as on a real server)."""
        mailbox = self.run("net", name, [str(self.twist), "wormhole-mailbox",
                                         "--port", "tcp:4000:interface=198.18.0.1",
                                         "--channel-db", str(self.workdir / "channel.sqlite")])
        self.wait_listening("net", 4000)
        return mailbox

    def start_relay(self) -> Path:
        """The official transit relay in ``net``: TCP on 198.18.0.1:4001 (the port
        ``transit.magic-wormhole.io`` names, which resolves here, so official peers use it
        unchanged) and its WebSocket side on :4002 (:data:`RELAY_WS`); one pairing table for
        both. Returns its usage database (a row per relayed pair, with the bytes)."""
        usage = self.workdir / "relay-usage.sqlite"
        self.run("net", "relay", [str(self.twist), "transitrelay",
                                  "--port", "tcp:4001:interface=198.18.0.1",
                                  "--websocket", "tcp:4002:interface=198.18.0.1",
                                  "--websocket-url", RELAY_WS, "--usage-db", str(usage)])
        self.wait_listening("net", 4002)
        self.wait_listening("net", 4001)
        return usage

    def start_turn(self) -> tuple[str, str, str]:
        """Debian's coturn in ``net`` (STUN and TURN on 198.18.0.1:3478, relaying only within
        the lab); returns (TURN URL, user, password)."""
        self.run("net", "turn", [
            "turnserver", "-n", "--listening-ip=198.18.0.1", "--relay-ip=198.18.0.1",
            "--listening-port=3478", "--min-port=49152", "--max-port=49999",
            "--realm=browserlab", "--lt-cred-mech", "--user=lab:labpass", "--fingerprint",
            "--no-tls", "--no-dtls", "--no-cli", "--no-multicast-peers",
            "--allowed-peer-ip=198.18.0.0-198.18.0.255",
            "--denied-peer-ip=0.0.0.0-255.255.255.255",
            f"--log-file={self.workdir / 'turn.log'}", "--simple-log",
            f"--pidfile={self.workdir / 'turn.pid'}"])
        self.wait_listening("net", 3478, "-lunH")
        return "turn:198.18.0.1:3478?transport=udp", "lab", "labpass"

    def browser(self, name: str, *args: str, timeout: float = 240) -> Proc:
        """The driver (and Chromium) in ``b``."""
        shots = os.environ.get("HILLTOP_SHOTS")
        extra = ["--shots", shots, "--shot-prefix", name] if shots else []
        return self.run("b", name, ["node", str(DRIVER), "--chromium", CHROMIUM,
                                    "--timeout", str(int(timeout)), *extra, *args])

    def static_host(self) -> str:
        """The built page on a plain static web server in ``b`` (no hilltop involved)."""
        self.run("b", "static", [sys.executable, "-m", "http.server", "8000",
                                 "--bind", "198.18.0.12", "--directory", str(PAGE)])
        self.wait_listening("b", 8000)
        return "http://198.18.0.12:8000/"


def page_events(proc: Proc) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def page_end(proc: Proc, timeout: float = 240) -> dict:
    proc.finish(timeout)
    ends = [e for e in page_events(proc) if e.get("event") == "end"]
    if not ends:
        raise AssertionError(f"the driver said nothing: {proc.describe()}")
    return ends[-1]


def relayed_bytes(usage_db: Path, at_least: int, timeout: float = 15) -> int:
    """The bytes the relay's usage database says it carried, once a pair carried at least
    ``at_least`` (the relay writes the row when the pair closes)."""
    deadline = time.monotonic() + timeout
    most = 0
    while time.monotonic() < deadline:
        with contextlib.suppress(sqlite3.Error), contextlib.closing(
                sqlite3.connect(usage_db)) as db:
            most = max([most, *(r[0] or 0 for r in db.execute("SELECT total_bytes FROM usage"))])
        if most >= at_least:
            break
        time.sleep(0.2)
    return most


def page_code(proc: Proc) -> str:
    return proc.wait_for(r'"event":"code","code":"([^"]+)"', timeout=60).group(1)
