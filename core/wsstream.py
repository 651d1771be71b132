"""A :class:`~hilltop.streams.ByteStream` over a WebSocket client connection (autobahn).

What it is for: a transit relay's WebSocket side (``magic-wormhole-transit-relay --websocket``),
reached where only HTTP(S) ports get out. The relay treats every binary message as a run of
bytes and forwards what the peer's TCP socket gave it in whatever pieces it got, so message
boundaries mean nothing: :meth:`WebSocketStream.write` sends one binary message per call and
received messages are delivered as bytes in order, split and joined anywhere. The relay does
read the first message on its own, as the whole relay line; the transit handshake writes that
line alone, before anything else (:mod:`hilltop.transit.handshake`), so it arrives as one.

``wss://`` is checked like any TLS client: against the system's trust roots, or against a CA
file the caller names (:func:`dial_websocket`'s ``ca_pem``); verification is never turned off.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
from typing import Any
from urllib.parse import urlsplit

from twisted.internet import defer

from hilltop._runtime.lazytls import openssl_deferred, skip_autobahn_wamp, wrap_client_tls
from hilltop.streams import Delivery, tcp_endpoint

MAX_MESSAGE = 16 * 1024 * 1024
"""Bytes one received message may hold. The official relay forwards what one read of the
peer's socket gave (64 KiB for Twisted), and our records are far smaller; the limit keeps a
hostile relay from making us buffer without end before any byte reaches the record layer."""

CLOSE_HANDSHAKE_TIMEOUT = 5.0
"""Seconds :meth:`WebSocketStream.close` waits for the relay to answer our close frame before
autobahn drops the connection. autobahn's default is 1 s, but its timers are rounded down to a
whole second (txaio's batched timer truncates ``now + delay``), so 1 s meant anywhere from 0 to
1 s: a loaded sender could drop the connection (a TCP reset) before its last message and close
frame had left, and the receiver then lost that message."""


def ack_now(transport: Any) -> None:
    """Acknowledge what was read at once instead of after the delayed-ACK timer (Linux's
    ``TCP_QUICKACK``, which the kernel clears again, hence once per read).

    Why: the official relay (0.5) writes to us without ``TCP_NODELAY``, so Nagle holds its
    next small write (a sender's last record) until our ACK of the previous one, up to 40 ms;
    and when the sender leaves it drops our connection with a reset 0 to 1 s later (its
    close timer is rounded down to a whole second), discarding what it still held. Freezing
    a test process mid-close lost the last record 2 times in 100 this way, 0 in 100 with
    this; it narrows the window, it cannot close it (a far relay's round trip remains)."""
    quickack = getattr(socket, "TCP_QUICKACK", None)
    if quickack is None:
        return
    with contextlib.suppress(AttributeError, OSError):  # not a TCP socket, or closed
        transport.getHandle().setsockopt(socket.IPPROTO_TCP, quickack, 1)


@functools.cache
def _autobahn() -> tuple[Any, type]:
    """(WebSocketClientFactory, our protocol class), imported at the first dial (as
    :func:`hilltop.rendezvous.client._autobahn` does, for the same start-up reasons)."""
    os.environ.setdefault("AUTOBAHN_USE_NVX", "0")
    skip_autobahn_wamp()
    with openssl_deferred():
        from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol

    class StreamProtocol(WebSocketClientProtocol):
        stream: WebSocketStream

        def dataReceived(self, data: bytes) -> None:  # noqa: N802 (Twisted naming)
            super().dataReceived(data)
            ack_now(self.transport)

        def onOpen(self) -> None:  # noqa: N802 (autobahn naming)
            self.factory.stream._opened(self)

        def onMessage(self, payload: bytes, isBinary: bool) -> None:  # noqa: N802, N803
            stream: WebSocketStream = self.factory.stream
            if not isBinary:
                stream._lost("connection lost: the relay sent a text message")
                self.dropConnection(abort=True)
                return
            stream._data(payload)

        def onClose(self, wasClean: bool, code: int | None,  # noqa: N802, N803
                    reason: str | None) -> None:
            why = "connection closed" if wasClean else f"connection lost: {reason or code}"
            self.factory.stream._lost(why)

    return WebSocketClientFactory, StreamProtocol


class WebSocketStream(Delivery):
    """One WebSocket client connection as a byte stream (made by :func:`dial_websocket`)."""

    def __init__(self, description: str) -> None:
        super().__init__()
        self.description = description
        self._protocol: Any = None
        self._paused = False
        self._opened_d: defer.Deferred[WebSocketStream] | None = None

    # autobahn side
    def _opened(self, protocol: Any) -> None:
        self._protocol = protocol
        if self._opened_d is not None:
            d, self._opened_d = self._opened_d, None
            d.callback(self)

    def _data(self, data: bytes) -> None:
        if self._lost_reason is not None:
            return
        if self._on_data is None:
            self._early.append(data)
        else:
            self._on_data(data)

    def _lost(self, why: str) -> None:
        if self._lost_reason is not None:
            return
        self._lost_reason = why
        if self._opened_d is not None:  # it never opened: the dial fails
            d, self._opened_d = self._opened_d, None
            d.errback(ConnectionError(why.removeprefix("connection lost: ")))
        self._ended(why)

    # ByteStream side
    def write(self, data: bytes) -> None:
        if data and self._protocol is not None and self._lost_reason is None:
            self._protocol.sendMessage(bytes(data), isBinary=True)

    def _transport(self) -> Any:
        return self._protocol.transport if self._protocol is not None else None

    def pause_reading(self) -> None:
        transport = self._transport()
        if not self._paused and transport is not None and self._lost_reason is None:
            self._paused = True
            transport.pauseProducing()

    def resume_reading(self) -> None:
        transport = self._transport()
        if self._paused and transport is not None and self._lost_reason is None:
            self._paused = False
            transport.resumeProducing()

    def register_producer(self, producer: Any, streaming: bool) -> None:
        self._transport().registerProducer(producer, streaming)

    def unregister_producer(self) -> None:
        transport = self._transport()
        if transport is not None:
            transport.unregisterProducer()

    def close(self) -> None:
        """Flush, then close the WebSocket (autobahn drops the TCP connection itself if the
        relay does not answer the close within its close-handshake timeout)."""
        if self._protocol is not None and self._lost_reason is None:
            self.resume_reading()  # a paused transport would never see the relay's answer
            self._protocol.sendClose(1000)

    def abort(self) -> None:
        if self._protocol is not None and self._lost_reason is None:
            self._protocol.dropConnection(abort=True)



def dial_websocket(reactor: Any, url: str, description: str, *, timeout: float = 30.0,
                   ca_pem: bytes | None = None) -> defer.Deferred[WebSocketStream]:
    """Open a WebSocket to ``url`` (``ws://`` or ``wss://``); fires with the stream once the
    opening handshake is done, fails if the TCP, TLS or WebSocket handshake fails or takes
    more than ``timeout`` seconds. Cancelling it aborts the connection.

    ``ca_pem``: PEM CA certificates a ``wss://`` server's certificate is checked against,
    instead of the system's roots.
    """
    factory_class, protocol_class = _autobahn()
    parts = urlsplit(url)
    host = parts.hostname or ""
    tls = parts.scheme == "wss"
    port = parts.port or (443 if tls else 80)
    stream = WebSocketStream(description)
    endpoint = tcp_endpoint(reactor, host, port, timeout)
    if tls:
        endpoint = wrap_client_tls(host, endpoint, ca_pem)
    factory = factory_class(url, reactor=reactor)
    factory.protocol = protocol_class
    factory.stream = stream
    factory.setProtocolOptions(openHandshakeTimeout=timeout, maxMessagePayloadSize=MAX_MESSAGE,
                               maxFramePayloadSize=MAX_MESSAGE,
                               closeHandshakeTimeout=CLOSE_HANDSHAKE_TIMEOUT,
                               serverConnectionDropTimeout=CLOSE_HANDSHAKE_TIMEOUT)
    connecting = endpoint.connect(factory)
    connected: list[Any] = []  # our protocol, once TCP (and TLS) are up

    def cancel(_d: defer.Deferred[WebSocketStream]) -> None:
        stream._opened_d = None
        if not connecting.called:
            connecting.cancel()
        for protocol in connected:
            protocol.dropConnection(abort=True)

    opened: defer.Deferred[WebSocketStream] = defer.Deferred(cancel)
    stream._opened_d = opened

    def failed(failure: Any) -> None:
        if stream._opened_d is not None:
            stream._opened_d = None
            opened.errback(failure)

    connecting.addCallbacks(connected.append, failed)
    return opened
