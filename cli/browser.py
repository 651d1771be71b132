"""``wormhole send --browser``: the receiver needs only a browser (a phone with nothing installed).

The sender serves hilltop's page (:mod:`hilltop.cli.pageserver`) on a local HTTP port and
prints its URL, with the code, the mailbox and the ICE servers in the fragment (after ``#``:
browsers never send it to a server, so the code reaches no server log), and the URL as a QR
code. The page then speaks the ordinary protocol through the same mailbox: text with any
peer, files over a WebRTC data channel, which hilltop's ``webrtc`` transport provides, or
through the WebSocket side of one of our transit relays (``--transit-helper ws://...``),
whose URL the fragment carries too: a browser has no TCP, so only such a relay can carry a
file when WebRTC is missing or cannot connect.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from urllib.parse import quote, urlsplit, urlunsplit

import click

from hilltop._values import value
from hilltop.cli import output
from hilltop.errors import LocalError
from hilltop.webrtc.settings import WebRTCSettings

RELAY_HOW = "--transit-helper ws://HOST:PORT/ or wss://..., the WebSocket side of a transit relay"


@value
class BrowserAddress:
    """Where the page is served: ``host`` is also what the printed URL names."""

    host: str
    port: int = 0

    def or_host(self, default_host: Callable[[], str]) -> BrowserAddress:
        return self if self.host else BrowserAddress(default_host(), self.port)


def parse_address(text: str | None) -> BrowserAddress:
    """``HOST``, ``HOST:PORT``, ``[V6]:PORT`` or ``:PORT``; a bad one is a usage error.
    An empty host means "choose one" (:meth:`BrowserAddress.or_host`)."""
    if not text:
        return BrowserAddress("")
    host, port = text, "0"
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                raise click.UsageError(f"--browser-address: cannot read {text!r}")
            port = rest[1:]
    elif text.count(":") == 1:
        host, port = text.split(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.UsageError(f"--browser-address: bad port in {text!r}")
    return BrowserAddress(host, int(port))


def default_host() -> str:
    """The first network address, so a phone on the same network can open the URL."""
    from hilltop.transports.direct_tcp import discover_addresses

    addresses = discover_addresses()
    ipv4 = [a for a in addresses if ":" not in a]
    return (ipv4 or addresses)[0]


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def page_mailbox(mailbox: str, page_host: str, lan_hosts: tuple[str, ...] = ()) -> str:
    """The mailbox URL as the page must use it. The LAN mailbox listens on every LAN
    address: name the one the page was reached on, which the browser can reach too."""
    parts = urlsplit(mailbox)
    if page_host in lan_hosts and parts.port is not None:
        parts = parts._replace(netloc=f"{url_host(page_host)}:{parts.port}")
    return urlunsplit(parts)


def page_relays(helpers: Sequence[str]) -> tuple[str, ...]:
    """The WebSocket endpoints (``ws://``, ``wss://``) of our relays: the only relay doors a
    browser can open. ``helpers`` were checked when the options were read."""
    from hilltop.hints import parse_transit_helper, websocket_v1

    return tuple(e.url for h in helpers for e in parse_transit_helper(h).endpoints
                 if isinstance(e, websocket_v1.Hint))


def page_url(host: str, port: int, code: str, mailbox: str,
             webrtc: WebRTCSettings | None, relays: Sequence[str] = ()) -> str:
    """``http://HOST:PORT/#code=...&mailbox=...``: everything after ``#`` stays in the browser."""
    fragment = [("code", code), ("mailbox", mailbox)]
    fragment += [("relay", url) for url in relays]
    servers = webrtc.ice_servers if webrtc else ()
    for server in servers:
        fragment.append(("stun" if server.urls.startswith("stun:") else "turn", server.urls))
    turn = [s for s in servers if not s.urls.startswith("stun:")]
    if turn:  # hilltop's TURN servers share one long-term credential
        fragment += [("turn-user", turn[0].username or ""),
                     ("turn-password", turn[0].credential or "")]
    if webrtc is not None and webrtc.relay_only:
        fragment.append(("relay-only", "1"))
    text = "&".join(f"{k}={quote(v, safe=':/')}" for k, v in fragment)
    return f"http://{url_host(host)}:{port}/#{text}"


def check_reachable(host: str) -> None:
    """A loopback URL only works on this machine; say so rather than fail on the phone."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        return
    if loopback:
        output.status("Note: the page is served on a loopback address; only a browser on "
                      "this computer can open it (use --browser-address for another one)")


@value
class BrowserPage:
    """What ``announce_code`` needs to print the page's URL once the code is known."""

    address: BrowserAddress
    webrtc: WebRTCSettings | None
    show_qr: bool
    lan_hosts: tuple[str, ...] = ()
    relays: tuple[str, ...] = ()

    def url(self, code: str, mailbox: str) -> str:
        return page_url(self.address.host, self.address.port, code,
                        page_mailbox(mailbox, self.address.host, self.lan_hosts), self.webrtc,
                        self.relays)

    def announce(self, code: str, mailbox: str) -> None:
        url = self.url(code, mailbox)
        output.status("Or open this page on the receiving phone or computer "
                      "(nothing to install):")
        if self.show_qr:
            output.qr_code(url)
        output.status(url)
        output.status()


def refuse_unsupported(*, tor: bool, streamed: bool, file: bool, transports: str | None,
                       webrtc: WebRTCSettings | None = None, no_listen: bool = False,
                       relays: Sequence[str] = ()) -> None:
    """Usage errors for what the page cannot do, before anything starts; then a missing
    webrtc transport, with the command that adds it to this installation. A file needs
    WebRTC only when no WebSocket relay (``relays``) may carry it."""
    if tor:
        raise click.UsageError("--browser cannot be used with --tor (the page connects "
                               "directly, and WebRTC would reveal our addresses)")
    if streamed:
        raise click.UsageError("--browser cannot receive a stream ('-' or a FIFO); "
                               "send a file or --text")
    if not file:
        return
    names = None if transports is None else [t.strip() for t in transports.split(",")]
    if relays and (names is None or "relay" in names):
        return  # the page reaches the file through the relay's WebSocket side
    if names is not None and "webrtc" not in names:
        raise click.UsageError("--browser with a file needs the webrtc transport; "
                               "add it to --transports (or the relay transport, with a "
                               f"WebSocket relay: {RELAY_HOW})")
    if no_listen and (webrtc or WebRTCSettings()).under_no_listen(True) is None:
        raise click.UsageError("--browser with a file and --no-listen needs a TURN server "
                               "(--turn) or a WebSocket relay: without either the page is "
                               "reached only over WebRTC, which would show it our addresses")
    import importlib.util

    if importlib.util.find_spec("aiortc") is None:  # after the usage errors: those come first
        from hilltop.cli.extras import how_to_add

        raise LocalError("--browser with a file needs the webrtc transport, which this "
                         "installation lacks (--text works without it), or a WebSocket "
                         f"relay ({RELAY_HOW}); add the transport with: "
                         f"{how_to_add('webrtc')}")

