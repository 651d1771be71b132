"""The record connection: encrypted transit records over the stream that won the race.

The race driver (:mod:`hilltop.transit.runner`) hands back a
:class:`~hilltop.transit.runner.WinningStream` and knows nothing of records; the caller builds
a :class:`TransitConnection` from it with the keys and the record cipher both sides agreed on::

    won = await runner.connect(peer_hints)
    conn = TransitConnection(won, "sender", transit_key, records.AES256GCM)

Phases are objects handed on, as in wsproto: the handshake ends where this begins, so the
cipher is chosen by the file-transfer layer (which read the peer's features), not the race.
"""

from __future__ import annotations

import socket
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from hilltop._runtime.awaitable import DualDeferred
from hilltop.errors import BadRecordError, TransitError
from hilltop.transit.records import (
    SECRETBOX,
    Cipher,
    RecordDecoder,
    RecordOpener,
    RecordSealer,
    record_keys,
)

if TYPE_CHECKING:
    from hilltop.hookspecs import Role
    from hilltop.transit.runner import WinningStream

# In pull mode (receive_record), stop reading the socket once this many records wait unread.
_PULL_HIGH_WATER = 16
# Undecoded bytes kept before the first consumer arrives; then reading pauses.
_STASH_LIMIT = 1 << 20


class TransitConnection:
    """The winning transit connection: encrypted records over one byte stream; a
    :class:`hilltop.transit.channel.Channel` with the :class:`~hilltop.transit.channel.Bulk`
    capability.

    Receiving, push style: :meth:`set_record_receiver` with callbacks; pause with
    :meth:`pauseProducing` (this stops reading the socket, so TCP pushes back on the peer) and
    :meth:`resumeProducing`. Pull style: ``await receive_record()``; reading pauses by itself
    while unread records pile up. Sending: :meth:`send_record`; a big sender registers itself
    with :meth:`registerProducer` and gets paused while the socket buffer is full.

    Bulk data path: a sender may seal records itself (on a worker thread) with :attr:`sealer`
    and hand the frames to :meth:`write_sealed`; a receiver may take sealed frames with
    :meth:`set_frame_receiver` and open them with :attr:`opener`. The nonce counters live in
    those two objects, so ordinary records before and after continue the same sequence.
    Over a plain TCP socket a bulk thread may instead borrow the socket itself
    (:meth:`borrow_socket_for_sending`, :meth:`borrow_socket_for_receiving`).
    """

    def __init__(self, won: WinningStream, role: Role, transit_key: bytes,
                 cipher: Cipher = SECRETBOX) -> None:
        self.stream = won.stream
        self.description = won.description
        send_key, receive_key = record_keys(transit_key, role, cipher)
        self._sealer = RecordSealer(send_key, cipher)
        self._decoder = RecordDecoder(receive_key, cipher=cipher)
        self._queue: deque[bytes] = deque()
        self._waiters: deque[defer.Deferred[bytes]] = deque()
        self._on_record: Callable[[bytes], None] | None = None
        self._on_lost: Callable[[Exception], None] | None = None
        self._on_frames: Callable[[list[Any]], None] | None = None
        # Bytes that arrive before anyone asked for records or frames wait here undecoded, so
        # a bulk receiver can still choose frame mode (reading pauses once this grows).
        self._stash: list[bytes] | None = []
        self._stashed = 0
        self._paused = False
        self._lost: Exception | None = None
        self._closed_notified = False
        won.hand_over(self._data, self._connection_lost)
        if self._stashed < _STASH_LIMIT:
            self.stream.resume_reading()  # the race hands the winner over paused

    # sending
    def send_record(self, plaintext: bytes) -> None:
        if self._lost is not None:
            raise TransitError(f"cannot send: {self._lost}")
        self.stream.write(self._sealer.seal(plaintext))

    @property
    def sealer(self) -> RecordSealer:
        """Seals our outgoing records; use it from one thread at a time, in record order."""
        return self._sealer

    @property
    def opener(self) -> RecordOpener:
        """Opens the peer's frames in order (see :meth:`set_frame_receiver`)."""
        return self._decoder.opener

    def write_sealed(self, frame: bytes) -> None:
        """Send a record sealed with :attr:`sealer` (frames must go out in sealing order)."""
        if self._lost is not None:
            raise TransitError(f"cannot send: {self._lost}")
        self.stream.write(frame)

    async def borrow_socket_for_sending(self) -> socket.socket | None:
        """A duplicate of the TCP socket under this connection for a bulk-data thread
        (:mod:`hilltop.transit.bulkpump`), once every record sent so far has left; seal with
        :attr:`sealer`. None when the stream has no plain socket (then use :meth:`write_sealed`).
        The reactor keeps reading: the peer's next record (its ack) arrives as usual."""
        lend = getattr(self.stream, "lend_socket", None)
        if lend is None or self._lost is not None:
            return None
        sock: socket.socket | None = await lend()
        return sock

    async def borrow_socket_for_receiving(self) -> tuple[socket.socket, bytes] | None:
        """Like :meth:`borrow_socket_for_sending`, for a thread that reads the socket itself:
        reading stops here, and the bytes that arrived but were not decoded yet come along
        (the thread opens frames with :attr:`opener`). Call :meth:`end_borrowing` after.
        None when the stream has no plain socket or records were decoded already."""
        lend = getattr(self.stream, "lend_socket", None)
        if lend is None or self._lost is not None or self._stash is None:
            return None
        self.pauseProducing()
        sock: socket.socket | None = await lend()
        if sock is None or self._stash is None or self._lost is not None:
            if sock is not None:
                sock.close()
            self.resumeProducing()
            return None
        leftover = b"".join(self._stash)
        self._stash, self._stashed = None, 0
        return sock, leftover

    def end_borrowing(self) -> None:
        """The receiving thread is gone: the reactor reads again (the sender's hang-up)."""
        self.resumeProducing()

    def registerProducer(self, producer: Any, streaming: bool) -> None:  # noqa: N802
        self.stream.register_producer(producer, streaming)

    def unregisterProducer(self) -> None:  # noqa: N802
        self.stream.unregister_producer()

    # receiving
    def set_record_receiver(
        self, on_record: Callable[[bytes], None], on_lost: Callable[[Exception], None]
    ) -> None:
        """Push mode: every record goes to ``on_record``; the end (an error) to ``on_lost``."""
        self._on_record, self._on_lost = on_record, on_lost
        self._start_consuming()
        self._deliver()

    def set_frame_receiver(
        self, on_frames: Callable[[list[Any]], None] | None,
        on_lost: Callable[[Exception], None] | None,
    ) -> None:
        """Frame mode: hand each batch of *sealed* frames (``nonce || tag || ciphertext``) to
        ``on_frames`` unopened, in order; the caller opens them with :attr:`opener`. Pass
        ``None`` to go back to records. Flow control is the caller's, with pause/resume."""
        if self._queue:
            raise RuntimeError("records already opened; switch to frames before data arrives")
        self._on_frames, self._on_lost = on_frames, on_lost
        self._closed_notified = False
        self._start_consuming()
        if self._lost is not None:
            self._deliver()

    def set_frame_buffers(self, alloc: Callable[[int], bytearray]) -> None:
        """Where frame mode gathers frames that span reads: ``alloc(size)`` returns a buffer
        of at least ``size`` bytes (a pool avoids a fresh zero-filled buffer per record)."""
        self._decoder.framer.alloc = alloc

    def receive_record(self) -> DualDeferred[bytes]:
        """Pull mode: the next record, or a TransitError once the connection is gone.
        Cancelling gives up the place in line: the next record goes to the next caller."""

        def give_up(waiting: defer.Deferred[bytes]) -> None:
            if waiting in self._waiters:
                self._waiters.remove(waiting)

        d: DualDeferred[bytes] = DualDeferred(give_up)
        self._start_consuming()
        if self._queue:
            d.callback(self._queue.popleft())
            self._update_pull_pressure()
        elif self._lost is not None:
            d.errback(self._lost)
        else:
            self._waiters.append(d)
        return d

    def pauseProducing(self) -> None:  # noqa: N802
        self._paused = True
        self.stream.pause_reading()

    def resumeProducing(self) -> None:  # noqa: N802
        self._paused = False
        self._deliver()
        if not self._paused:
            self.stream.resume_reading()

    def stopProducing(self) -> None:  # noqa: N802
        self.close()

    def close(self) -> defer.Deferred[None]:
        """Close the connection; the Deferred fires once the socket is really gone."""
        self.stream.close()
        return self.stream.when_closed()

    def abort(self) -> defer.Deferred[None]:
        """Drop the connection now, without flushing what waits to be sent; fires once it
        is gone. For a transfer that failed: a stalled peer never takes our buffered bytes,
        so :meth:`close`, which flushes them first, waited as long as the peer did. Streams
        without ``abort`` (an optional method of a plugin's stream) are closed."""
        abort = getattr(self.stream, "abort", None)
        if abort is None:
            self.stream.close()
        else:
            abort()
        return self.stream.when_closed()

    def when_closed(self) -> defer.Deferred[None]:
        return self.stream.when_closed()

    def bulk(self) -> TransitConnection:
        """The bulk capability (:class:`hilltop.transit.channel.Bulk`): this connection
        offers all of it, the socket lending where its stream has a plain socket."""
        return self

    # internals
    def _start_consuming(self) -> None:
        if self._stash is None:
            return
        stash, self._stash = self._stash, None
        if self._stashed >= _STASH_LIMIT and not self._paused and self._lost is None:
            self.stream.resume_reading()
        for data in stash:  # also after the connection closed: these bytes did arrive
            self._decode(data)

    def _data(self, data: bytes) -> None:
        if self._lost is not None:
            return
        if self._stash is not None:
            self._stash.append(data)
            self._stashed += len(data)
            if self._stashed >= _STASH_LIMIT:
                self.stream.pause_reading()
            return
        self._decode(data)

    def _decode(self, data: bytes) -> None:
        if isinstance(self._lost, BadRecordError):
            return
        try:
            if self._on_frames is not None:
                frames = self._decoder.framer.feed(data)
                if frames:
                    self._on_frames(frames)
                return
            records = self._decoder.feed(data)
        except BadRecordError as err:
            self._lost = err  # also replaces "connection closed": this is the real reason
            self.stream.close()
            self._deliver()
            return
        self._queue.extend(records)
        self._deliver()

    def _connection_lost(self, why: str) -> None:
        if self._lost is None:
            self._lost = TransitError(f"transit {why}")
        self._deliver()

    def _deliver(self) -> None:
        while self._queue and not self._paused:
            if self._on_record is not None:
                self._on_record(self._queue.popleft())
            elif self._waiters:
                self._waiters.popleft().callback(self._queue.popleft())
            else:
                break
        self._update_pull_pressure()
        if self._lost is not None and not self._queue:
            while self._waiters:
                self._waiters.popleft().errback(self._lost)
            if self._on_lost is not None and not self._closed_notified:
                self._closed_notified = True
                self._on_lost(self._lost)

    def _update_pull_pressure(self) -> None:
        if (self._on_record is not None or self._on_frames is not None or self._paused
                or self._lost is not None):
            return
        if len(self._queue) >= _PULL_HIGH_WATER:
            self.stream.pause_reading()
        else:
            self.stream.resume_reading()
