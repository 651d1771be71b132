"""The WebSocket shell around :class:`hilltop.rendezvous.mailbox.Mailbox` (autobahn on Twisted).

Like aioquic's asyncio protocol: every input is fed to the engine, then one ``_pump`` drains
its frames, acts on its connect/disconnect requests, passes the other events on, and re-arms
the single reconnect timer from ``next_deadline()``. No protocol decision is made here.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from twisted.internet.interfaces import IReactorTime, IStreamClientEndpoint

from hilltop._runtime.lazytls import openssl_deferred, skip_autobahn_wamp, wrap_client_tls
from hilltop._runtime.memory import importing
from hilltop.errors import HilltopError, LocalError, ProtocolError
from hilltop.rendezvous import mailbox, messages
from hilltop.units import readable_size

log = logging.getLogger(__name__)

EndpointFactory = Callable[[IReactorTime, str, int, bool], IStreamClientEndpoint]


def default_endpoint(reactor: IReactorTime, host: str, port: int, tls: bool
                     ) -> IStreamClientEndpoint:
    """Every address of ``host``, IPv6 and IPv4 (happy eyeballs), within 30 s.

    Its socket lets a later socket share its local port: the hole punch dials from the port
    the mailbox server saw (:mod:`hilltop._runtime.sharedport`).
    """
    from hilltop._runtime.sharedport import SharedPortEndpoint

    endpoint = SharedPortEndpoint(reactor, host, port, timeout=30)
    if tls:  # only wss:// pays for importing pyOpenSSL
        return wrap_client_tls(host, endpoint)
    return endpoint


def parse_relay_url(url: str) -> tuple[str, int, bool]:
    """``ws://host:port/v1`` -> (host, port, tls). A clear error for anything else."""
    parsed = urlparse(url)
    if parsed.scheme not in ("ws", "wss") or not parsed.hostname:
        raise LocalError(f"the relay URL must look like ws://HOST:PORT/v1, not {url!r}")
    try:
        port = parsed.port or (443 if parsed.scheme == "wss" else 80)
    except ValueError:
        raise LocalError(f"the relay URL has a bad port: {url!r}") from None
    return parsed.hostname, port, parsed.scheme == "wss"


@functools.cache
def _autobahn() -> tuple[Any, type]:
    """(WebSocketClientFactory, our protocol class), imported at the first connection.

    Why lazily: the CLI parses its arguments and installs the reactor before anything needs
    a WebSocket, and a run that fails early (bad code, bad path) never pays for autobahn.
    autobahn's optional native helpers (NVX) run pycparser over their C declarations on
    every import: about 0.1 s, to XOR-mask a few hundred bytes of JSON; they stay off unless
    the user asked for them.
    """
    os.environ.setdefault("AUTOBAHN_USE_NVX", "0")
    skip_autobahn_wamp()
    with openssl_deferred(), importing():
        from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol

    class MailboxProtocol(WebSocketClientProtocol):
        client: RendezvousClient

        def onOpen(self) -> None:
            self.client._opened(self)

        def onMessage(self, payload: bytes, isBinary: bool) -> None:
            self.client._frame(payload)

        def onClose(self, wasClean: bool, code: int | None,
                    reason: str | None) -> None:
            self.client._lost(self, _broken_by_server(self, reason), reason)

    return WebSocketClientFactory, MailboxProtocol


_MailboxProtocol = Any
"""An instance of the protocol class :func:`_autobahn` defines (for annotations)."""


def _broken_by_server(protocol: _MailboxProtocol, reason: str | None) -> HilltopError | None:
    """Why autobahn itself failed the connection, if the server's bytes were the cause.

    autobahn sets ``failedByMe`` only when it gave up on what it received (a frame over our
    size limit, bytes that break the WebSocket protocol, text that is not UTF-8); a ping
    timeout or a dropped connection leaves it unset and stays an ordinary, retried drop.
    """
    if not getattr(protocol, "failedByMe", False):
        return None
    if getattr(protocol, "wasMaxFramePayloadSizeExceeded", False) or getattr(
            protocol, "wasMaxMessagePayloadSizeExceeded", False):
        limit = readable_size(2 * messages.MAX_FRAME_CHARS)
        return ProtocolError(f"the mailbox server sent a message over {limit}, more than "
                             "any wormhole message needs (a peer's text that big is refused)")
    why = (reason or "").removeprefix("I dropped the WebSocket TCP connection: ")
    return ProtocolError(f"the mailbox server broke the WebSocket protocol ({why[:200]})")


class RendezvousClient:
    """Connects ``engine`` to the mailbox server at ``url`` and keeps it connected."""

    def __init__(
        self,
        reactor: IReactorTime,
        url: str,
        engine: mailbox.Mailbox,
        on_event: Callable[[mailbox.Event], None],
        endpoint_factory: EndpointFactory = default_endpoint,
    ) -> None:
        self._reactor = reactor
        self._url = url
        self._host, self._port, self._tls = parse_relay_url(url)
        self._engine = engine
        self._on_event = on_event
        self._endpoint_factory = endpoint_factory
        self._protocol: _MailboxProtocol | None = None
        self._connecting: Any = None
        self._timer: Any = None
        self._pumping = False
        self.local_address: tuple[str, int] | None = None
        """The local (host, port) of the open mailbox connection when its socket shares its
        port (the default endpoint), else None: where a hole punch must dial from."""

    def start(self) -> None:
        self._connect()

    def poke(self) -> None:
        """Call after feeding the engine an application input (they carry no time: this
        gives the engine the time, which starts the clock of any reply they asked for)."""
        self._engine.handle_timer(self._reactor.seconds())
        self._pump()

    # --- I/O callbacks ---------------------------------------------------------------------
    def _connect(self) -> None:
        factory_class, protocol_class = _autobahn()
        factory = factory_class(self._url)
        # Let oversized frames reach the engine, which rejects them with a clear error;
        # far larger ones are cut off by autobahn itself.
        factory.setProtocolOptions(
            maxMessagePayloadSize=2 * messages.MAX_FRAME_CHARS,
            maxFramePayloadSize=2 * messages.MAX_FRAME_CHARS,
            autoPingInterval=30,
            autoPingTimeout=60,
            # a server that accepts TCP but never completes the WebSocket handshake
            openHandshakeTimeout=self._engine.timeouts.welcome,
        )
        client = self

        class Bound(protocol_class):  # type: ignore[misc,valid-type]
            pass

        Bound.client = client
        factory.protocol = Bound
        endpoint = self._endpoint_factory(self._reactor, self._host, self._port, self._tls)
        d = endpoint.connect(factory)
        self._connecting = d

        def failed(f: Any) -> None:
            self._connecting = None
            log.debug("mailbox connection failed: %s", f.getErrorMessage())
            self._engine.connection_lost(self._reactor.seconds(),
                                         attempt=self._attempt(f.getErrorMessage()))
            self._pump()

        def done(_: Any) -> None:
            self._connecting = None

        d.addCallbacks(done, failed)

    def _opened(self, protocol: _MailboxProtocol) -> None:
        self._protocol = protocol
        self.local_address = None
        if self._endpoint_factory is default_endpoint:
            host = protocol.transport.getHost()
            if hasattr(host, "port"):
                self.local_address = (host.host, host.port)
        self._engine.connected(self._reactor.seconds())
        self._pump()

    def _frame(self, payload: bytes) -> None:
        self._engine.frame_received(payload, self._reactor.seconds())
        self._pump()

    def _lost(self, protocol: _MailboxProtocol, broken: HilltopError | None = None,
              reason: str | None = None) -> None:
        if protocol is not self._protocol:
            if self._protocol is None and self._connecting is None:
                # the WebSocket handshake itself failed after TCP connected
                why = reason or "no WebSocket handshake"
                self._engine.connection_lost(self._reactor.seconds(),
                                             attempt=self._attempt(why))
                self._pump()
            return
        self._protocol = None
        self.local_address = None
        self._engine.connection_lost(self._reactor.seconds(), broken)
        self._pump()

    def _attempt(self, why: str) -> str:
        """``ws://host:port/v1: why``, for the error when the server was never reached
        (Twisted's reasons end in a full stop; the error line goes on after them)."""
        return f"{self._url}: {why.strip().rstrip('.')[:200]}"

    def _on_timer(self) -> None:
        self._timer = None
        self._engine.handle_timer(self._reactor.seconds())
        self._pump()

    # --- the pump --------------------------------------------------------------------------
    def _pump(self) -> None:
        if self._pumping:
            return  # the outer pump loop will drain whatever this call added
        self._pumping = True
        try:
            while True:
                frames = self._engine.frames_to_send()
                if self._protocol is not None:
                    for frame in frames:
                        self._protocol.sendMessage(frame.encode("utf-8"), isBinary=False)
                event = self._engine.next_event()
                if event is None:
                    break
                if isinstance(event, mailbox.ConnectNow):
                    self._connect()
                elif isinstance(event, mailbox.DisconnectNow):
                    self._disconnect()
                else:
                    self._on_event(event)
            self._arm_timer()
        finally:
            self._pumping = False

    def _disconnect(self) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            protocol.sendClose()  # autobahn drops TCP itself if the close handshake stalls
        if self._connecting is not None:
            self._connecting.cancel()
            self._connecting = None

    def _arm_timer(self) -> None:
        deadline = self._engine.next_deadline()
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if deadline is not None:
            delay = max(0.0, deadline - self._reactor.seconds())
            self._timer = self._reactor.callLater(delay, self._on_timer)
