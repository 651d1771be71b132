"""The byte-stream seam between transports and the transit runner, plus the TCP adapter.

A transport hands the runner a :class:`ByteStream`: write bytes, receive bytes through a
callback, pause and resume reading, close, and learn when the connection is gone. The transit
handshake and records run on top of it the same way for every transport. :class:`TCPStream` is
the thin Twisted ``Protocol`` adapter that the TCP-based transports share.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, Protocol, cast, runtime_checkable

from twisted.internet import defer
from twisted.internet.abstract import isIPAddress, isIPv6Address
from twisted.internet.endpoints import (
    HostnameEndpoint,
    TCP4ClientEndpoint,
    TCP6ClientEndpoint,
)
from twisted.internet.protocol import Factory
from twisted.internet.protocol import Protocol as TwistedProtocol
from twisted.python.failure import Failure

from hilltop.hints._tcp import endpoint_text

READ_SIZE = 256 * 1024
"""Bytes asked of each recv() (Twisted's default is 64 KiB).

Bulk transit moves a gigabyte through one socket; four times fewer reactor turns per byte is
a measurable share of a core, and frames of big records then usually arrive inside a single
read, where the record layer can use them without gathering them first.
"""

OnData = Callable[[bytes], None]
OnLost = Callable[[str], None]


@runtime_checkable
class ByteStream(Protocol):
    """A connected, reliable, ordered byte stream (the httpcore-style network seam)."""

    description: str

    def write(self, data: bytes) -> None:
        """Queue bytes for sending."""

    def start_receiving(self, on_data: OnData, on_lost: OnLost) -> None:
        """Deliver received bytes to ``on_data`` (earlier bytes first) and the end to ``on_lost``.

        Bytes that arrived before this call are buffered and delivered at once. Calling it
        again replaces the callbacks (the runner does this when handing the stream over).
        """

    def pause_reading(self) -> None:
        """Stop reading from the network until :meth:`resume_reading` (flow control)."""

    def resume_reading(self) -> None: ...

    def register_producer(self, producer: Any, streaming: bool) -> None:
        """Let the stream pause ``producer`` while the outgoing buffer is full (IConsumer)."""

    def unregister_producer(self) -> None: ...

    def close(self) -> None:
        """Flush what was written, then close. Idempotent."""

    def when_closed(self) -> defer.Deferred[None]:
        """A Deferred that fires (with None) once the connection is gone."""


class _Connection(Protocol):
    """What :class:`TCPStream` uses of its Twisted connection beyond ``ITransport``."""

    def pauseProducing(self) -> None: ...
    def resumeProducing(self) -> None: ...
    def registerProducer(self, producer: Any, streaming: bool) -> None: ...
    def unregisterProducer(self) -> None: ...


class Delivery:
    """The receiving half every stream of ours shares (:class:`TCPStream` and
    :class:`hilltop.wsstream.WebSocketStream`): bytes that arrive before anyone listens are
    kept for :meth:`start_receiving`, and the end is told once, to the listener and to every
    :meth:`when_closed` waiter. One copy, because the two had drifted into twins."""

    def __init__(self) -> None:
        self._on_data: OnData | None = None
        self._on_lost: OnLost | None = None
        self._early: list[bytes] = []
        self._lost_reason: str | None = None
        self._closed_waiters: list[defer.Deferred[None]] = []

    def _ended(self, why: str) -> None:
        """The connection is gone: tell the listener (if any) and the waiters, once."""
        self._lost_reason = why
        if self._on_lost is not None:
            on_lost, self._on_lost = self._on_lost, None
            on_lost(why)
        waiters, self._closed_waiters = self._closed_waiters, []
        for d in waiters:
            d.callback(None)

    def start_receiving(self, on_data: OnData, on_lost: OnLost) -> None:
        self._on_data, self._on_lost = on_data, on_lost
        early, self._early = self._early, []
        for chunk in early:
            if self._on_data is not on_data:  # replaced while delivering
                break
            on_data(chunk)
        if self._lost_reason is not None and self._on_lost is not None:
            lost, self._on_lost = self._on_lost, None
            lost(self._lost_reason)

    def when_closed(self) -> defer.Deferred[None]:
        d: defer.Deferred[None] = defer.Deferred()
        if self._lost_reason is not None:
            d.callback(None)
        else:
            self._closed_waiters.append(d)
        return d


class TCPStream(Delivery, TwistedProtocol):
    """Twisted Protocol implementing :class:`ByteStream` over any stream transport."""

    def __init__(self, description: str = "tcp") -> None:
        super().__init__()
        self.description = description
        self._paused = False

    # Twisted side
    def makeConnection(self, transport: Any) -> None:  # noqa: N802
        # Twisted's TCP transports read bufferSize bytes per recv() (and also use it as the
        # write-buffer size that pauses a producer).
        if getattr(transport, "bufferSize", READ_SIZE) < READ_SIZE:
            transport.bufferSize = READ_SIZE
        super().makeConnection(transport)

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 (Twisted naming)
        if self._on_data is None:
            self._early.append(data)
        else:
            self._on_data(data)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]  # noqa: N802
        why = "connection closed"
        if reason is not None and reason.value is not None and reason.getErrorMessage():
            why = f"connection lost: {reason.getErrorMessage()}"
        self._ended(why)

    # ByteStream side
    def write(self, data: bytes) -> None:
        if data and self.transport is not None and self._lost_reason is None:
            self.transport.write(data)

    def _connection(self) -> _Connection:
        """Our transport, as what it is: a Twisted connection is also a producer and consumer
        (its interfaces are declared apart, so the type checker sees only ``ITransport``)."""
        return cast(_Connection, self.transport)

    def pause_reading(self) -> None:
        if not self._paused and self.transport is not None and self._lost_reason is None:
            self._paused = True
            self._connection().pauseProducing()

    def resume_reading(self) -> None:
        if self._paused and self.transport is not None and self._lost_reason is None:
            self._paused = False
            self._connection().resumeProducing()

    def register_producer(self, producer: Any, streaming: bool) -> None:
        self._connection().registerProducer(producer, streaming)

    def unregister_producer(self) -> None:
        if self.transport is not None:
            self._connection().unregisterProducer()

    def close(self) -> None:
        if self.transport is not None and self._lost_reason is None:
            if self._paused:  # a paused transport would never flush and close
                self._paused = False
                self._connection().resumeProducing()
            self.transport.loseConnection()

    def abort(self) -> None:
        """Drop the connection at once, without flushing (see ``TransitConnection.abort``)."""
        if self.transport is not None and self._lost_reason is None:
            abort = getattr(self.transport, "abortConnection", None)
            if abort is None:
                self.transport.loseConnection()
            else:
                abort()

    def lend_socket(self) -> defer.Deferred[socket.socket | None]:
        """A duplicate of the connected socket for a bulk-data thread
        (:mod:`hilltop.transit.bulkpump`),
        once every byte written through Twisted has gone out, so the thread's bytes follow them.

        Fires with None unless this stream sits directly on a Twisted TCP or Unix-socket
        connection without TLS (a plugin's own transport keeps the reactor path), or once the
        connection is gone. Reading is the caller's to pause (:meth:`pause_reading`).
        """
        transport: Any = self.transport  # a TCP or Unix connection, once _plain_socket says so
        if self._lost_reason is not None or not _plain_socket(transport):
            return defer.succeed(None)
        lent: defer.Deferred[socket.socket | None] = defer.Deferred()

        def when_flushed() -> None:
            if self._lost_reason is not None:
                lent.callback(None)
            elif _nothing_to_send(transport):
                lent.callback(transport.getHandle().dup())
            else:  # a few bytes (the handshake's "go") still queued: the next reactor turn
                transport.reactor.callLater(_FLUSH_POLL, when_flushed)

        when_flushed()
        return lent


_FLUSH_POLL = 0.002
"""Seconds between two looks at Twisted's send buffer while waiting to lend the socket."""


def _plain_socket(transport: Any) -> bool:
    """A Twisted TCP connection (Unix-socket ones are subclasses) with no TLS layer."""
    from twisted.internet import (
        tcp,  # loaded with the reactor; not before (hilltop._runtime.lazytls)
    )

    return (isinstance(transport, tcp.Connection) and not getattr(transport, "TLS", False)
            and hasattr(transport, "dataBuffer") and hasattr(transport, "_tempDataLen"))


def _nothing_to_send(transport: Any) -> bool:
    """Twisted's send buffer is empty (its ``FileDescriptor`` keeps no public count)."""
    return len(transport.dataBuffer) - transport.offset + transport._tempDataLen == 0


def _peer_text(transport: Any) -> str:
    peer = transport.getPeer()
    host = getattr(peer, "host", "?")
    if host.startswith("::ffff:") and isIPAddress(host[7:]):
        host = host[7:]  # an IPv4 peer on a dual-stack socket
    return endpoint_text(host, getattr(peer, "port", 0))


class InboundFactory(Factory):
    """Wraps every accepted connection in a TCPStream and passes it on."""

    def __init__(self, label: str, on_stream: Callable[[TCPStream], None]) -> None:
        self.label = label
        self.on_stream = on_stream

    def buildProtocol(self, addr: Any) -> TCPStream:  # noqa: N802
        proto = _InboundStream(self, f"{self.label} (inbound)")
        return proto


class _InboundStream(TCPStream):
    def __init__(self, factory: InboundFactory, description: str) -> None:
        super().__init__(description)
        self._factory = factory

    def connectionMade(self) -> None:  # noqa: N802
        self.description = f"{self._factory.label} {_peer_text(self.transport)} (inbound)"
        self._factory.on_stream(self)


def dial_tcp(
    reactor: Any, host: str, port: int, description: str, timeout: float = 30.0
) -> defer.Deferred[TCPStream]:
    """Connect to ``host:port``; the Deferred fires with a :class:`TCPStream`.

    IP literals use a plain TCP endpoint (no resolver threads, no staggered timers); names go
    through HostnameEndpoint. Cancelling the Deferred aborts the connection attempt.
    """
    factory = Factory.forProtocol(lambda: TCPStream(description))
    return tcp_endpoint(reactor, host, port, timeout).connect(factory)


def tcp_endpoint(reactor: Any, host: str, port: int, timeout: float = 30.0) -> Any:
    """A Twisted client endpoint for ``host:port`` (see :func:`dial_tcp` for the choice)."""
    if isIPv6Address(host):
        return TCP6ClientEndpoint(reactor, host, port, timeout=timeout)
    if isIPAddress(host):
        return TCP4ClientEndpoint(reactor, host, port, timeout=timeout)
    return HostnameEndpoint(reactor, host, port, timeout=timeout)
