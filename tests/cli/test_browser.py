"""``send --browser``: the URL, the address flag, the page server, and what it refuses."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import click
import pytest
import pytest_twisted
from click.testing import CliRunner
from twisted.web.test.requesthelper import DummyRequest

from hilltop.cli import browser
from hilltop.cli.main import cli
from hilltop.cli.pageserver import HEADERS, PAGE_FILES, PageResource
from hilltop.webrtc.settings import IceServer, WebRTCSettings


def fragment(url: str) -> dict[str, list[str]]:
    return {k: [unquote(x) for x in v]
            for k, v in parse_qs(urlsplit(url).fragment, keep_blank_values=True).items()}


def test_the_code_is_only_in_the_fragment() -> None:
    url = browser.page_url("198.18.0.11", 8080, "7-guitarist-revenge",
                           "ws://relay.magic-wormhole.io:4000/v1", None)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path, parts.query) == (
        "http", "198.18.0.11:8080", "/", "")
    assert fragment(url) == {"code": ["7-guitarist-revenge"],
                             "mailbox": ["ws://relay.magic-wormhole.io:4000/v1"]}


def test_ice_servers_reach_the_page_and_nothing_else() -> None:
    webrtc = WebRTCSettings((IceServer("stun:198.19.0.1:3478"),
                             IceServer("turn:198.19.0.1:3478?transport=udp", "u", "p&q")))
    got = fragment(browser.page_url("::1", 1, "1-a-b", "ws://x:4000/v1", webrtc))
    assert "relay-only" not in got
    relay_only = WebRTCSettings(webrtc.ice_servers, relay_only=True)
    assert fragment(browser.page_url("h", 1, "1-a-b", "ws://x/v1", relay_only))["relay-only"] \
        == ["1"]
    assert got["stun"] == ["stun:198.19.0.1:3478"]
    assert got["turn"] == ["turn:198.19.0.1:3478?transport=udp"]
    assert got["turn-user"] == ["u"] and got["turn-password"] == ["p&q"]
    assert browser.page_url("::1", 1, "1-a-b", "ws://x/v1", None).startswith("http://[::1]:1/")


def test_lan_mailbox_is_named_by_the_page_address() -> None:
    lan = ("198.18.0.11", "198.18.5.5")
    assert browser.page_mailbox("ws://198.18.5.5:4123/v1", "198.18.0.11", lan) \
        == "ws://198.18.0.11:4123/v1"
    assert browser.page_mailbox("ws://relay.magic-wormhole.io:4000/v1", "198.18.0.11", ()) \
        == "ws://relay.magic-wormhole.io:4000/v1"


@pytest.mark.parametrize(("text", "host", "port"), [
    (None, "", 0), ("10.0.0.2", "10.0.0.2", 0), ("10.0.0.2:8080", "10.0.0.2", 8080),
    (":8080", "", 8080), ("[fe80::1]:9", "fe80::1", 9), ("[2001:db8::1]", "2001:db8::1", 0),
])
def test_browser_address(text: str | None, host: str, port: int) -> None:
    assert browser.parse_address(text) == browser.BrowserAddress(host, port)
    assert browser.parse_address(text).or_host(lambda: "chosen").host == (host or "chosen")


@pytest.mark.parametrize("text", ["host:port", "1.2.3.4:70000", "[::1]x"])
def test_bad_browser_address_is_a_usage_error(text: str) -> None:
    with pytest.raises(click.UsageError):
        browser.parse_address(text)


def get(path: str) -> tuple[DummyRequest, bytes]:
    request = DummyRequest([b""])
    request.path = path.encode()
    body = PageResource().render_GET(request)
    return request, body


@pytest.mark.parametrize("name", sorted(PAGE_FILES))
def test_page_server_serves_the_built_page(name: str) -> None:
    request, body = get("/" + name)
    assert request.responseCode in (None, 200) and len(body) > 100
    assert request.responseHeaders.getRawHeaders("content-type") == [PAGE_FILES[name]]
    for header, value in HEADERS.items():
        assert request.responseHeaders.getRawHeaders(header) == [value]


def test_page_server_serves_nothing_else() -> None:
    assert get("/")[1] == get("/index.html")[1]
    assert b"hilltop.js" in get("/")[1]
    for path in ("/../pyproject.toml", "/browser.py", "/index.html/x", "/%2e%2e/x"):
        request, body = get(path)
        assert request.responseCode == 404 and body == b"not found\n"


@pytest.mark.parametrize(("args", "message"), [
    (["send", "--browser", "-"], "cannot receive a stream"),
    (["send", "--browser-address", "1.2.3.4", "--text", "x"], "goes with --browser"),
    (["send", "--browser", "--browser-address", "h:p", "--text", "x"], "bad port"),
    (["send", "--browser", "--transports", "direct-tcp", "pyproject.toml"], "add it to"),
    (["send", "--browser", "--no-listen", "pyproject.toml"], "needs a TURN server"),
])
@pytest.mark.parametrize("aiortc", [True, False], ids=["with-aiortc", "without-aiortc"])
def test_what_the_page_cannot_do_is_refused_up_front(args: list[str], message: str,
                                                     aiortc: bool,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A usage error is one whatever is installed (without aiortc it exited 1, not 2)."""
    if not aiortc:
        hide_aiortc(monkeypatch)
    result = CliRunner().invoke(cli, args, prog_name="wormhole")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def hide_aiortc(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "aiortc" else find_spec(name, *a))


def test_without_aiortc_the_way_to_add_it_to_this_install_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """hilltop is not on the package index: ``pip install 'hilltop[webrtc]'`` finds nothing."""
    hide_aiortc(monkeypatch)
    result = CliRunner().invoke(cli, ["send", "--browser", "pyproject.toml"],
                                prog_name="wormhole")
    assert result.exit_code == 1, result.output
    assert "pip install 'hilltop[webrtc]'" not in result.output
    from hilltop.cli.extras import how_to_add

    assert how_to_add("webrtc") in result.output and "-m pip install" in result.output
    assert "Traceback" not in result.output


def test_browser_and_tor_exclude_each_other() -> None:
    result = CliRunner().invoke(cli, ["send", "--tor", "--browser", "--text", "x"],
                                prog_name="wormhole")
    assert result.exit_code == 2 and "--tor" in result.output


def test_pip_install_ships_the_built_page(tmp_path: Path) -> None:
    """The wheel carries the page, so users never need node (it builds only in web/)."""
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", "-w", str(tmp_path), str(root)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("hilltop-*.whl")
    with zipfile.ZipFile(wheel) as z:
        shipped = {n.removeprefix("hilltop/cli/browser_page/") for n in z.namelist()
                   if n.startswith("hilltop/cli/browser_page/")}
        assert shipped == set(PAGE_FILES)
        built = root / "cli" / "browser_page"
        for name in PAGE_FILES:
            assert z.read(f"hilltop/cli/browser_page/{name}") == (built / name).read_bytes()


def test_a_busy_port_is_a_clear_error() -> None:
    from twisted.internet import reactor

    from hilltop.cli.pageserver import PageServer
    from hilltop.errors import LocalError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(LocalError, match=f"cannot serve the browser page on 127.0.0.1:{port}"):
            PageServer(reactor, "127.0.0.1", port).start()


async def _settle(condition: Any, deadline: float = 10.0) -> None:
    """Let the reactor run until ``condition()`` holds, failing after ``deadline`` seconds."""
    import time

    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "the page server did not act in time"
        await deferLater(reactor, 0.05, lambda: None)


def _closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


@pytest_twisted.ensureDeferred
async def test_the_page_port_holds_few_connections() -> None:
    """300 idle connections under ``ulimit -n 256`` killed the sender: the page server holds
    8 per address and 32 in all, and closes the others as soon as it accepts them."""
    from twisted.internet import reactor

    from hilltop.cli.pageserver import PAGE_LIMITS, PageServer

    server = PageServer(reactor, "127.0.0.1")
    port = server.start()
    socks: list[socket.socket] = []
    try:
        for n in range(5):  # from 127.0.0.1 .. 127.0.0.5: all on loopback, to one server
            for _ in range(PAGE_LIMITS.per_address + 2):
                sock = socket.socket()
                sock.bind((f"127.0.0.{n + 1}", 0))
                sock.connect(("127.0.0.1", port))
                socks.append(sock)
        expected_refused = len(socks) - PAGE_LIMITS.total
        await _settle(lambda: sum(map(_closed_by_server, socks)) >= expected_refused)
        held = [s for s in socks if not _closed_by_server(s)]
        assert len(held) == PAGE_LIMITS.total
        by_address = {s.getsockname()[0] for s in held}
        assert len(by_address) == PAGE_LIMITS.total // PAGE_LIMITS.per_address
    finally:
        for sock in socks:
            sock.close()
        await server.stop()


@pytest_twisted.ensureDeferred
async def test_the_page_port_refuses_a_body_unread() -> None:
    from twisted.internet import reactor

    from hilltop.cli.pageserver import PageServer

    server = PageServer(reactor, "127.0.0.1")
    port = server.start()
    try:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1500000000\r\n\r\n"
                         + b"x" * 65536)
            reply: list[bytes] = []

            def replied() -> bool:
                with contextlib.suppress(BlockingIOError):
                    reply.append(sock.recv(4096, socket.MSG_DONTWAIT))
                return b"\r\n\r\n" in b"".join(reply)

            await _settle(replied)
            assert b"".join(reply).startswith(b"HTTP/1.1 413 ")
    finally:
        await server.stop()
