"""The browser peer: hilltop's page in Debian's headless Chromium, against real CLI peers.

Three network namespaces: ``net`` (a bridge, and the official mailbox server on 198.18.0.1),
``a`` (the command-line peers, 198.18.0.11) and ``b`` (Chromium, 198.18.0.12). The page is
driven by ``web/driver/drive.mjs`` (puppeteer-core, no browser download). It gets its ICE
servers from its URL only, and none are given: host candidates on the namespace addresses.
Every namespace and process is removed (by PID) at the end of each test.

Screenshots go to ``$HILLTOP_SHOTS`` when that is set (the closing note's pictures).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from nsproc import NamespaceLab, Proc, hilltop_command

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "web" / "driver" / "drive.mjs"
PAGE = ROOT / "cli" / "browser_page"
CHROMIUM = os.environ.get("HILLTOP_CHROMIUM", "/usr/bin/chromium")
MAILBOX = "ws://198.18.0.1:4000/v1"
HOSTS = {"a": 11, "b": 12}
BIG = 50_000_000

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None,
    reason="the browser tests build network namespaces: they need root and iproute2")


def _require_tools() -> None:
    missing = [what for what, ok in (
        ("node", shutil.which("node") is not None),
        (CHROMIUM, Path(CHROMIUM).exists()),
        ("web/node_modules (cd web && npm ci)",
         (ROOT / "web/node_modules/puppeteer-core").exists()),
    ) if not ok]
    if missing:
        pytest.fail(f"missing for the browser tests: {', '.join(missing)} (.ci/run installs "
                    "them)", pytrace=False)


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
        (etc / "hosts").write_text("127.0.0.1 localhost\n")
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
        self.run("net", "mailbox", [str(self.twist), "wormhole-mailbox",
                                    "--port", "tcp:4000:interface=198.18.0.1"])
        self.wait_listening("net", 4000)

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
    assert ends, proc.describe()
    return ends[-1]


def page_code(proc: Proc) -> str:
    return proc.wait_for(r'"event":"code","code":"([^"]+)"', timeout=60).group(1)


@pytest.fixture
def lab(tmp_path: Path, peers_venv: Path) -> Iterator[BrowserLab]:
    _require_tools()
    lab = BrowserLab(tmp_path, peers_venv / "bin" / "twist")
    try:
        lab.up()
        yield lab
    finally:
        lab.down()


def send_browser(lab: BrowserLab, *args: str, cwd: Path | None = None) -> tuple[Proc, str]:
    sender = lab.run("a", "send", [*hilltop_command(), "--relay-url", MAILBOX, "send",
                                   "--browser", "--hide-progress", *args], cwd=cwd)
    url = sender.wait_for(r"(http://198\.18\.0\.11:\d+/#\S+)").group(1)
    return sender, url


def test_page_receives_50mb_from_send_browser(lab: BrowserLab, tmp_path: Path) -> None:
    data = tmp_path / "big.bin"
    data.write_bytes(os.urandom(BIG))
    sender, url = send_browser(lab, str(data))
    assert "code=" in url.split("#", 1)[1] and "code" not in url.split("#", 1)[0]
    downloads = tmp_path / "downloads"
    # a secure context (as https or localhost would be) lets the page stream to disk
    origin = url.split("/#")[0]
    page = lab.browser("file-in", "--url", url, "--downloads", str(downloads),
                       "--secure-origin", origin)
    end = page_end(page)
    assert end["state"] == "done", page.describe()
    assert "streamed to disk" in end["result"]
    assert end["heap_peak_mb"] < 30, end  # the file never sits in the page's memory
    assert sender.finish(60) == 0, sender.describe()
    assert end["download"] == "big.bin"
    assert end["sha256"] == sha256(data) == sha256(downloads / "big.bin")
    assert "webrtc" in sender.stderr
    print(f"page received {BIG / 1e6:.0f} MB: {end['result']}; "
          f"page heap peak {end['heap_peak_mb']} MB")
    print(sender.stderr)


def test_page_sends_50mb_to_receive(lab: BrowserLab, tmp_path: Path) -> None:
    data = tmp_path / "upload.bin"
    data.write_bytes(os.urandom(BIG))
    page = lab.browser("file-out", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--send-file", str(data))
    code = page_code(page)
    out = tmp_path / "got"
    out.mkdir()
    receiver = lab.run("a", "recv", [*hilltop_command(), "--relay-url", MAILBOX, "receive",
                                     "--accept-file", "--hide-progress", code], cwd=out)
    end = page_end(page)
    assert receiver.finish(60) == 0, receiver.describe()
    assert end["state"] == "done", page.describe()
    assert sha256(out / "upload.bin") == sha256(data) == end["sha256"]
    assert "webrtc" in receiver.stderr
    print(f"page sent {BIG / 1e6:.0f} MB: {end['result']}")


def test_text_from_official_to_the_page(lab: BrowserLab, peers_venv: Path) -> None:
    text = "from official 0.24: ünïcode ✓"
    official = lab.run("a", "official", [str(peers_venv / "bin" / "wormhole"), "--relay-url",
                                         MAILBOX, "send", "--text", text])
    code = official.wait_for(r"Wormhole code is: (\S+)").group(1)
    page = lab.browser("text-in", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--code", code)
    end = page_end(page)
    assert end["state"] == "done" and end["text"] == text, page.describe()
    assert official.finish(30) == 0, official.describe()


def test_text_from_the_page_to_official(lab: BrowserLab, peers_venv: Path) -> None:
    text = "from the browser: ünïcode ✓"
    page = lab.browser("text-out", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--send-text", text)
    code = page_code(page)
    official = lab.run("a", "official", [str(peers_venv / "bin" / "wormhole"), "--relay-url",
                                         MAILBOX, "receive", code])
    assert official.finish(30) == 0, official.describe()
    assert text in official.stdout
    assert page_end(page)["state"] == "done", page.describe()


def test_official_file_sender_is_told_the_page_needs_webrtc(lab: BrowserLab, tmp_path: Path,
                                                            peers_venv: Path) -> None:
    data = tmp_path / "f.txt"
    data.write_text("official cannot reach a browser\n")
    official = lab.run("a", "official", [str(peers_venv / "bin" / "wormhole"), "--relay-url",
                                         MAILBOX, "send", str(data)])
    code = official.wait_for(r"Wormhole code is: (\S+)").group(1)
    page = lab.browser("needs-webrtc", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--code", code)
    end = page_end(page)
    assert end["state"] == "error"
    assert "no WebRTC transport" in end["error"] and "hilltop[webrtc]" in end["error"]
    assert official.finish(30) != 0
    assert "a browser can receive files only over WebRTC" in official.output


def test_wrong_code_fails_on_both_sides(lab: BrowserLab, tmp_path: Path) -> None:
    # the page receives with a wrong code: both sides say so
    sender, url = send_browser(lab, "--text", "never delivered")
    code = sender.wait_for(r"Wormhole code is: (\S+)").group(1)
    wrong = code.split("-")[0] + "-wrong-words"
    page = lab.browser("wrong-in", "--url", url.replace(f"code={code}", f"code={wrong}"))
    end = page_end(page)
    assert end["state"] == "error" and "code is wrong" in end["error"], page.describe()
    assert sender.finish(30) != 0
    assert "wrong code" in sender.stderr
    # the page sends, the receiver types a wrong code
    page = lab.browser("wrong-out", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--send-text", "never delivered either")
    code = page_code(page)
    receiver = lab.run("a", "recv-wrong", [*hilltop_command(), "--relay-url", MAILBOX,
                                           "receive", code.split("-")[0] + "-wrong-words"])
    assert receiver.finish(30) != 0
    assert "wrong code" in receiver.stderr
    end = page_end(page)
    assert end["state"] == "error" and "code is wrong" in end["error"], page.describe()


def test_lan_mode_serves_page_and_mailbox(lab: BrowserLab, tmp_path: Path) -> None:
    data = tmp_path / "lan.bin"
    data.write_bytes(os.urandom(3_000_000))
    sender = lab.run("a", "send-lan", [*hilltop_command(), "send", "--lan", "--browser",
                                       "--hide-progress", str(data)])
    url = sender.wait_for(r"(http://198\.18\.0\.11:\d+/#\S+)").group(1)
    assert "mailbox=ws://198.18.0.11:" in url  # the in-process mailbox, on the page's address
    downloads = tmp_path / "downloads"
    page = lab.browser("lan-in", "--url", url, "--downloads", str(downloads))
    end = page_end(page)
    assert end["state"] == "done", page.describe()
    assert "blob" in end["result"]  # plain http on a LAN address: not a secure context
    assert sender.finish(60) == 0, sender.describe()
    assert sha256(downloads / "lan.bin") == sha256(data)
