"""The WebSocket shell around :class:`hilltop.mailbox.Mailbox` (on Twisted).

Like aioquic's asyncio protocol: every input is fed to the engine, then one ``_pump`` drains
its frames, acts on its connect/disconnect requests, passes the other events on, and re-arms
the single reconnect timer from ``next_deadline()``. No protocol decision is made here.
The WebSocket itself is :mod:`hilltop.wsframes` (handshake and frames) driven by
:class:`_MailboxProtocol`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from twisted.internet import endpoints
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.protocol import Factory, Protocol

from hilltop import mailbox, messages, wsframes
from hilltop.errors import LocalError

log = logging.getLogger(__name__)

EndpointFactory = Callable[[Any, str, int, bool], IStreamClientEndpoint]

OPEN_TIMEOUT = 30.0
"""Seconds from TCP connect to the server's WebSocket upgrade reply."""
PING_INTERVAL = 30.0
"""Silence after which we ping the server (keeps NATs and proxies from dropping us)."""
PING_TIMEOUT = 60.0
"""Silence after which the server counts as gone (the engine then reconnects)."""
CLOSE_TIMEOUT = 3.0
"""How long we wait for the server to end TCP after our close frame."""


def default_endpoint(reactor: Any, host: str, port: int, tls: bool) -> IStreamClientEndpoint:
    endpoint = endpoints.HostnameEndpoint(reactor, host, port, timeout=30)
    if tls:
        from twisted.internet import ssl  # needs pyOpenSSL; only wss:// pays for importing it

        return endpoints.wrapClientTLS(ssl.optionsForClientTLS(host), endpoint)
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


class _MailboxProtocol(Protocol):
    """One WebSocket connection: upgrade, then text messages both ways, pings, close.

    States: ``upgrading`` (request sent, reading the reply head) -> ``open`` -> ``closing``
    (our close frame sent) -> ``closed`` (TCP gone). The client hears ``_opened`` once and
    ``_lost`` once (also when the upgrade fails).
    """

    def __init__(self, client: RendezvousClient, request_path: str) -> None:
        self.client = client
        self._path = request_path
        self._key = os.urandom(16)
        self._state = "upgrading"
        self._head = bytearray()
        # the engine rejects oversized frames itself; far larger ones end the connection here
        self._parser = wsframes.FrameParser(2 * messages.MAX_FRAME_CHARS)
        self._timer: Any = None
        self._last_heard = 0.0

    # Twisted
    def connectionMade(self) -> None:  # noqa: N802 - Twisted's interface
        c = self.client
        self.transport.write(wsframes.handshake_request(c._host, c._port, self._path,
                                                        self._key, c._tls))
        self._schedule(OPEN_TIMEOUT)

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self._last_heard = self.client._reactor.seconds()
        try:
            if self._state == "upgrading":
                data = self._upgrade(data)
                if self._state != "open":
                    return
            for event in self._parser.feed(data):
                self._event(event)
                if self._state == "closed":
                    return
        except wsframes.WebSocketError as err:
            log.debug("mailbox WebSocket failed: %s", err)
            self._abort()

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self._state = "closed"
        self._cancel_timer()
        self.client._lost(self)

    # the client's side
    def sendMessage(self, payload: bytes) -> None:  # noqa: N802 - the name callers know
        if self._state == "open":
            self._send(wsframes.TEXT, payload)

    def sendClose(self) -> None:  # noqa: N802
        if self._state == "open":
            self._send(wsframes.CLOSE, wsframes.close_payload())
            self._state = "closing"
            self._schedule(CLOSE_TIMEOUT)
        elif self._state == "upgrading":
            self._abort()

    # inside
    def _upgrade(self, data: bytes) -> bytes:
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        if end < 0:
            if len(self._head) > wsframes.MAX_HANDSHAKE_BYTES:
                raise wsframes.WebSocketError("the mailbox server's reply head is too long")
            return b""
        wsframes.check_handshake_response(bytes(self._head[:end]), self._key)
        rest = bytes(self._head[end + 4 :])
        self._head = bytearray()
        self._state = "open"
        self._schedule(PING_INTERVAL)
        self.client._opened(self)
        return rest

    def _event(self, event: wsframes.Message | wsframes.Control) -> None:
        if isinstance(event, wsframes.Message):
            if self._state == "open":
                self.client._frame(event.payload)
        elif event.opcode == wsframes.PING:
            if self._state == "open":
                self._send(wsframes.PONG, event.payload)
        elif event.opcode == wsframes.CLOSE:
            if self._state == "open":  # echo it, then the server ends TCP
                self._send(wsframes.CLOSE, event.payload[:2])
                self._state = "closing"
                self._schedule(CLOSE_TIMEOUT)
            else:
                self.transport.loseConnection()

    def _send(self, opcode: int, payload: bytes) -> None:
        self.transport.write(wsframes.encode_frame(opcode, payload, os.urandom(4)))

    def _schedule(self, delay: float) -> None:
        self._cancel_timer()
        self._timer = self.client._reactor.callLater(delay, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _on_timer(self) -> None:
        self._timer = None
        if self._state != "open":  # the upgrade or our close took too long
            self._abort()
            return
        silent = self.client._reactor.seconds() - self._last_heard
        if silent >= PING_TIMEOUT:
            log.debug("mailbox server silent for %.0f s; dropping the connection", silent)
            self._abort()
            return
        if silent >= PING_INTERVAL:
            self._send(wsframes.PING, b"")
        self._schedule(PING_INTERVAL if silent >= PING_INTERVAL else PING_INTERVAL - silent)

    def _abort(self) -> None:
        self._cancel_timer()
        if self._state != "closed":
            self.transport.abortConnection()


class _MailboxFactory(Factory):
    def __init__(self, client: RendezvousClient, request_path: str) -> None:
        self._client = client
        self._path = request_path

    def buildProtocol(self, addr: Any) -> _MailboxProtocol:  # noqa: N802
        return _MailboxProtocol(self._client, self._path)


class RendezvousClient:
    """Connects ``engine`` to the mailbox server at ``url`` and keeps it connected."""

    def __init__(
        self,
        reactor: Any,
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

    def start(self) -> None:
        self._connect()

    def poke(self) -> None:
        """Call after feeding the engine an application input."""
        self._pump()

    # --- I/O callbacks ---------------------------------------------------------------------
    def _connect(self) -> None:
        parsed = urlparse(self._url)
        path = (parsed.path or "/") + (f"?{parsed.query}" if parsed.query else "")
        factory = _MailboxFactory(self, path)
        endpoint = self._endpoint_factory(self._reactor, self._host, self._port, self._tls)
        d = endpoint.connect(factory)
        self._connecting = d

        def failed(f: Any) -> None:
            self._connecting = None
            log.debug("mailbox connection failed: %s", f.getErrorMessage())
            self._engine.connection_lost(self._reactor.seconds())
            self._pump()

        def done(_: Any) -> None:
            self._connecting = None

        d.addCallbacks(done, failed)

    def _opened(self, protocol: _MailboxProtocol) -> None:
        self._protocol = protocol
        self._engine.connected(self._reactor.seconds())
        self._pump()

    def _frame(self, payload: bytes) -> None:
        self._engine.frame_received(payload, self._reactor.seconds())
        self._pump()

    def _lost(self, protocol: _MailboxProtocol) -> None:
        if protocol is not self._protocol:
            if self._protocol is None and self._connecting is None:
                # the WebSocket handshake itself failed after TCP connected
                self._engine.connection_lost(self._reactor.seconds())
                self._pump()
            return
        self._protocol = None
        self._engine.connection_lost(self._reactor.seconds())
        self._pump()

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
                        self._protocol.sendMessage(frame.encode("utf-8"))
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
            protocol.sendClose()  # it drops TCP itself if the close handshake stalls
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
