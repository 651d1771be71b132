"""The bytes of a file transfer: the two data paths between a source or sink and the
transit connection.

Which path carries a transfer depends on the winning connection. When it sits on a plain
socket, a thread of its own moves the bytes between file and socket (:mod:`bulkpump`):
between two hilltop peers that cut a third of each side's bulk CPU, the Python around the
bytes. Otherwise (WebRTC, TLS, a plugin's own stream) the reactor moves the frames and a
worker thread seals or opens them (:class:`_SourceProducer`, :class:`_RecordSink`).

Split from the protocol story (:mod:`hilltop.transfer.story`): the story decides what is
sent and acknowledged, this module only how the bytes flow, and both paths take the same
:class:`DataPath` that the peers' features decide.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from twisted.internet import defer

from hilltop._runtime import memory
from hilltop.errors import ProtocolError, TransitError
from hilltop.transfer.streamcodec import StreamReader, Trailer
from hilltop.transit import records

if TYPE_CHECKING:
    import socket

    from hilltop.rendezvous.capabilities import PeerCapabilities
    from hilltop.transfer.filesink import Sink
    from hilltop.transfer.source import Source
    from hilltop.transit.channel import Bulk, Channel

Progress = Callable[[int], None]
"""Called with the number of bytes just moved."""


class Pace(Protocol):
    """Where a data path says how the bulk moves, on the reactor thread, for the idle
    deadline the engine keeps (:meth:`hilltop.transfer.engine.TransferEngine.moved`,
    ``held``). The data path measures no time-out itself: a stall ends it from outside
    (the shell cancels it once the engine failed)."""

    def moved(self) -> None:
        """Bytes moved (progress counts too: the shell reports it as moved)."""

    def held(self) -> None:
        """The peer holds us back: the socket takes nothing more for now."""


class _Unwatched:
    def moved(self) -> None:
        pass

    def held(self) -> None:
        pass


UNWATCHED: Pace = _Unwatched()
"""No idle limit: nobody is told."""


class Readable(Protocol):
    """What the sending paths read: a :class:`Source`, or a stream of unknown length."""

    def readinto(self, buffer: memoryview | bytearray) -> int: ...


class DataPath(NamedTuple):
    """What both sides' features decide for one transfer (the rules live in ``records``)."""

    record_size: int  # records.record_size
    hashed: bool  # records.whole_file_sha256
    cipher: records.Cipher  # records.record_cipher


def plan(ours: Iterable[str], peer: PeerCapabilities) -> DataPath:
    """The data path for our features and what the peer advertised."""
    return DataPath(records.record_size(ours, peer), records.whole_file_sha256(ours, peer),
                    records.record_cipher(ours, peer))


# --- the collector ------------------------------------------------------------------------------
_calming = 0
"""Transfers running inside :func:`calm_gc` (reactor thread only)."""


@contextlib.contextmanager
def calm_gc() -> Iterator[None]:
    """Keep every object alive at the start out of the collector's sight while the bulk moves.

    The loop allocates a few small objects per record, which triggers collections, and each
    full collection walked every Twisted and autobahn object: 0.4 s per GiB in profiles.
    Objects that exist before a transfer are the program itself, not garbage. The last
    transfer to leave gives them back (``gc.unfreeze``), so a host program is not changed
    for good; a host that freezes objects itself is left alone (the ``wormhole`` command's
    own start-up freeze, :func:`hilltop._runtime.memory.freeze_after_startup`, is not a host's).
    """
    global _calming
    if not _calming and gc.get_freeze_count() and not memory.frozen_at_startup():
        yield
        return
    gc.freeze()
    _calming += 1
    try:
        yield
    finally:
        _calming -= 1
        if not _calming:
            gc.unfreeze()


def _bulk(channel: Channel) -> Bulk:
    """The channel's bulk capability; every channel the transit race hands over has it
    today (a channel without one is the reconnecting channel still to come)."""
    bulk = channel.bulk()
    if bulk is None:
        raise NotImplementedError("a channel without the bulk capability cannot carry data yet")
    return bulk


# --- sending --------------------------------------------------------------------------------------
async def send(reactor: Any, channel: Channel, source: Source, progress: Progress,
               record_size: int, hashed: bool = True, *, hasher: Any = None,
               pace: Pace = UNWATCHED) -> str | None:
    """Stream ``source`` as records; returns its SHA-256 (hex), or None when not ``hashed``.
    ``hasher`` goes on hashing from bytes sent before (a resumed file's kept prefix).
    ``pace`` hears when the receiver holds us back (:class:`Pace`)."""
    if source.size == 0:
        # Nothing to send, and a receiver expecting nothing acks and hangs up at once, maybe
        # before we would have started: streaming "nothing" then failed on the hang-up.
        return hashlib.sha256().hexdigest() if hashed else None
    return await send_until_end(reactor, channel, source, progress, record_size, hashed,
                                hasher=hasher, pace=pace)


async def send_until_end(reactor: Any, channel: Channel, source: Readable,
                         progress: Progress, record_size: int, hashed: bool = True, *,
                         hasher: Any = None, pace: Pace = UNWATCHED) -> str | None:
    """Stream whatever ``source`` yields until its ``readinto`` returns 0, whatever its
    ``size`` says: a stream of unknown length (``stream-v1``) goes this way, and may end
    at once. ``hasher``, ``pace``: as for :func:`send`."""
    if hasher is None and hashed:
        hasher = hashlib.sha256()
    bulk = _bulk(channel)
    with calm_gc():
        sock = await bulk.borrow_socket_for_sending()
        if sock is not None:
            return await _pump_out(reactor, channel, sock, source, progress, record_size, hasher,
                                   pace)
        producer = _SourceProducer(reactor, bulk, source, progress, record_size, hasher, pace)
        lost = channel.when_closed()
        bulk.registerProducer(producer, True)
        lost.addCallback(lambda _: producer.stopProducing())
        try:
            producer.start()
            return await producer.done
        finally:
            await producer.stop()


async def _pump_out(reactor: Any, channel: Channel, sock: socket.socket,
                    source: Readable, progress: Progress, record_size: int,
                    hasher: Any, pace: Pace) -> str | None:
    """Send on a thread of its own, straight from the file to the socket (:mod:`bulkpump`)."""
    from hilltop.transit import bulkpump

    work = bulkpump.send_source(source, _bulk(channel).sealer, record_size, hasher)
    pump = bulkpump.Pump(reactor, sock, work, progress, "hilltop-send", pace=pace)

    def peer_gone(_: object) -> None:  # seen by the reactor, which keeps reading
        pump.stop(TransitError("the transit connection closed while sending"))

    channel.when_closed().addCallback(peer_gone)
    try:
        return await pump.done
    finally:
        await pump.close()


_SEND_AHEAD = 4
"""Batches sealed or being sealed ahead of the socket."""
_BATCH_BYTES = records.BIG_RECORD_SIZE
"""Plaintext per batch: one big record, or as many small (v1) records as fit in a big one,
so a v1 peer costs no more thread hops per byte."""


class _SourceProducer:
    """Streams ``source`` as records: a worker thread reads, hashes and seals, the reactor
    writes (a push producer, paused while the socket buffer is full).

    At most :data:`_SEND_AHEAD` batches exist between the file and the socket buffer, so
    memory stays flat whatever the file size.
    """

    def __init__(self, reactor: Any, conn: Bulk, source: Readable,
                 progress: Progress, record_size: int, hasher: Any,
                 pace: Pace = UNWATCHED) -> None:
        from hilltop.transit.bulkpump import BatchSealer
        from hilltop.transit.pipeline import OrderedWorker

        self._reactor = reactor
        # held only while the connection holds us back: a source with nothing to give for a
        # while (a silent pipe, a slow disk) is not the receiver's stall
        self._pace = pace
        self._conn = conn
        self._progress = progress
        self._batches = BatchSealer(source, conn.sealer, record_size, _BATCH_BYTES, hasher)
        self._ready: deque[tuple[bytes, int]] = deque()
        self._paused = False
        self._eof = False
        self.done: defer.Deferred[str | None] = defer.Deferred()
        self._worker = OrderedWorker(reactor, self._next_batch, self._sealed, self._finish,
                                     name="hilltop-send")

    # worker thread: one batch of records per call, strictly in order
    def _next_batch(self, _: object) -> tuple[bytes, int] | None:
        frames, plain = self._batches.next_batch()
        if not plain:
            return None
        # Twisted wants bytes: one copy out of the reused buffer, no zero-filled allocation
        return bytes(frames), plain

    # reactor thread
    def start(self) -> None:
        self._fill()

    def stop(self) -> defer.Deferred[None]:
        """Stop the worker; fires once it no longer touches the source."""
        return self._worker.stop()

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's interface
        self._paused = True
        self._worker.set_hungry(False)  # the socket is full: collect on resume
        if not self.done.called:
            self._pace.held()

    def resumeProducing(self) -> None:  # noqa: N802
        self._paused = False
        self._pace.moved()
        self._worker.poll()
        self._worker.set_hungry(True)
        self._flush()

    def stopProducing(self) -> None:  # noqa: N802
        self._finish(TransitError("the transit connection closed while sending"))

    def _sealed(self, result: tuple[bytes, int] | None) -> None:
        if result is None:
            self._eof = True
        else:
            self._ready.append(result)
        self._flush()

    def _flush(self) -> None:
        while self._ready and not self._paused and not self.done.called:
            frame, n = self._ready.popleft()
            try:
                self._conn.write_sealed(frame)
            except TransitError as err:
                self._finish(err)
                return
            self._progress(n)
        self._fill()

    def _fill(self) -> None:
        if self.done.called:
            return
        if self._eof:
            if not self._ready and not self._worker.pending:
                self._finish(None)
            return
        while self._worker.pending + len(self._ready) < _SEND_AHEAD:
            self._worker.submit(None)

    def _finish(self, error: BaseException | None) -> None:
        if self.done.called:
            return
        self._conn.unregisterProducer()
        if error is None:
            self.done.callback(self._batches.hexdigest())
        else:
            self.done.errback(error)


# --- receiving ------------------------------------------------------------------------------------
async def receive(reactor: Any, channel: Channel, sink: Sink, size: int,
                  progress: Progress, *, inline: bool, pace: Pace = UNWATCHED) -> None:
    """``size`` bytes into ``sink``: on a thread reading the socket itself when the
    connection has a plain one (:mod:`bulkpump`), else through :class:`_RecordSink`.
    ``pace`` hears every arrival (:class:`Pace`)."""
    if size == 0:
        return
    bulk = _bulk(channel)
    with calm_gc():
        borrowed = await bulk.borrow_socket_for_receiving()
        if borrowed is None:
            await _RecordSink(reactor, channel, sink, size, progress, inline=inline,
                              pace=pace).run()
            return
        from hilltop.transit import bulkpump

        sock, leftover = borrowed
        work = bulkpump.receive_into_sink(leftover, bulk.opener, sink, size)
        pump = bulkpump.Pump(reactor, sock, work, progress, "hilltop-receive", pace=pace)
        try:
            await pump.done
        finally:
            await pump.close()  # before the sink closes its file under the thread
            bulk.end_borrowing()


# Sealed bytes handed to the worker but not yet written; past this, stop reading the socket.
_RECEIVE_AHEAD = 4 * records.BIG_RECORD_SIZE
_FRAME_BUFFER = records.BIG_RECORD_SIZE + records.OVERHEAD
_POOLED = 4


class _Receiver:
    """What the two reactor-driven receivers share: the reactor splits frames, a worker
    thread opens and writes them (:meth:`_open_and_write`, the first of the two things a
    receiver says for itself), strictly in order; reading the socket pauses while
    :data:`_RECEIVE_AHEAD` sealed bytes wait and resumes at half that. A lost connection
    is reported once what already arrived is counted, in the receiver's own words
    (:meth:`_lost_words`, the second). :meth:`_complete` and :meth:`_end` say when and how
    it succeeds."""

    def __init__(self, reactor: Any, channel: Channel, sink: Sink, progress: Progress,
                 pace: Pace, *, inline: bool = False) -> None:
        from hilltop.transit.pipeline import InlineWorker, OrderedWorker

        self._reactor = reactor
        self._pace = pace
        self._channel = channel
        self._conn = _bulk(channel)
        self._sink = sink
        self._progress = progress
        self._opener = self._conn.opener
        self._out = bytearray(records.BIG_RECORD_SIZE)
        self._waiting = 0  # sealed bytes submitted, not yet handled
        self._received = 0  # plaintext bytes written
        self._paused = False
        self._broken = False  # the connection is gone
        self._done: defer.Deferred[Any] = defer.Deferred()
        kind = InlineWorker if inline else OrderedWorker
        self._worker = kind(reactor, self._open_and_write, self._wrote, self._fail,
                            name="hilltop-receive")

    async def _receive(self) -> Any:
        self._conn.set_frame_receiver(self._frames, self._lost)
        try:
            return await self._done
        finally:
            self._conn.set_frame_receiver(None, None)

    # what each receiver says for itself
    def _open_and_write(self, item: tuple[list[Any], int]) -> tuple[int, int, bool]:
        """Worker thread: open ``item``'s frames and write them; (plaintext bytes, sealed
        bytes, whether the data ended)."""
        raise NotImplementedError

    def _lost_words(self) -> str:
        raise NotImplementedError

    def _complete(self, ended: bool) -> bool:
        return ended

    def _end(self) -> None:
        self._done.callback(None)

    def _hungry_while_reading(self) -> bool:
        """Whether the worker hands each result over at once while the socket is read."""
        return True

    # reactor thread
    def _frames(self, frames: list[Any]) -> None:
        if self._done.called:
            return
        self._pace.moved()
        nbytes = sum(len(f) for f in frames)
        self._waiting += nbytes
        self._worker.submit((frames, nbytes))
        self._worker.poll()
        if self._waiting >= _RECEIVE_AHEAD and not self._paused:
            self._paused = True
            self._conn.pauseProducing()
            self._worker.set_hungry(True)  # only results can resume reading now

    def _wrote(self, result: tuple[int, int, bool]) -> None:
        plain, sealed, ended = result
        self._waiting -= sealed
        self._received += plain
        if plain:
            self._progress(plain)
        if self._done.called:
            return
        self._pace.moved()  # our own slow disk (or stdout) is not the sender's silence
        if self._complete(ended):
            self._end()
        elif self._broken and not self._worker.pending:
            self._report_lost()
        elif self._paused and self._waiting < _RECEIVE_AHEAD // 2:
            self._paused = False
            self._worker.set_hungry(self._hungry_while_reading())
            self._conn.resumeProducing()

    def _fail(self, err: BaseException) -> None:
        self._channel.close()
        if not self._done.called:
            self._done.errback(err)

    def _lost(self, _err: Exception) -> None:
        self._broken = True
        self._worker.poll()
        if self._worker.pending:  # count what already arrived before saying how far we got
            self._worker.set_hungry(True)
        else:
            self._report_lost()

    def _report_lost(self) -> None:
        if not self._done.called:
            self._done.errback(TransitError(self._lost_words()))


class _RecordSink(_Receiver):
    """Receives ``size`` bytes into ``sink`` (:class:`_Receiver`), pooling frame buffers.

    ``inline=True`` does the worker's part on the reactor thread instead (:class:`InlineWorker`):
    for a v1 sender, which is single-threaded and keeps one core busy by itself. Against
    official 0.24 it used less CPU than the worker thread in 6 of 6 A/B runs of 1 GiB
    (3.7-4.3 s against 4.2-5.1 s) and finished sooner in 4 of 6.
    """

    def __init__(self, reactor: Any, channel: Channel,
                 sink: Sink, size: int,
                 progress: Progress, *, inline: bool = False,
                 pace: Pace = UNWATCHED) -> None:
        super().__init__(reactor, channel, sink, progress, pace, inline=inline)
        self._size = size
        self._pool: deque[bytearray] = deque()  # frame buffers, back from the worker

    async def run(self) -> None:
        try:
            if self._size == 0:
                return
            self._conn.set_frame_buffers(self._alloc)
            self._worker.set_hungry(False)
            try:
                await self._receive()
            finally:
                self._conn.set_frame_buffers(bytearray)
        finally:
            await self._worker.stop()  # before the sink closes its file under the worker
            # Give the buffers back now, not when the collector finds our reference cycles:
            # a directory's unpacking comes next and needs the memory.
            self._pool.clear()
            self._out = bytearray()

    def _complete(self, ended: bool) -> bool:
        return self._received >= self._size

    def _hungry_while_reading(self) -> bool:
        return self._received + self._waiting >= self._size

    def _lost_words(self) -> str:
        return (f"the connection to the sender broke after {self._received} of {self._size} "
                "bytes; the file was not saved")

    # reactor thread
    def _alloc(self, size: int) -> bytearray:
        if size <= _FRAME_BUFFER and self._pool:
            return self._pool.pop()
        if size < _FRAME_BUFFER // 2:  # a v1-sized frame: not worth a pool buffer
            return bytearray(size)
        return bytearray(max(size, _FRAME_BUFFER))

    # worker thread
    def _open_and_write(self, item: tuple[list[Any], int]) -> tuple[int, int, bool]:
        """Open the frames and write (and hash) them a buffer at a time
        (:func:`records.open_into`), then give pooled frame buffers back."""
        frames, sealed = item
        plain = records.open_into(self._opener, frames, memoryview(self._out), self._sink.write)
        for frame in frames:
            buffer = frame.obj if isinstance(frame, memoryview) else None
            if (isinstance(buffer, bytearray) and len(buffer) == _FRAME_BUFFER
                    and len(self._pool) < _POOLED):
                frame.release()
                self._pool.append(buffer)
        return plain, sealed, False


# --- receiving a stream of unknown length (stream-v1) ----------------------------------------


async def receive_until_end(reactor: Any, channel: Channel, sink: Sink,
                              progress: Progress, *,
                              pace: Pace = UNWATCHED) -> Trailer:
    """The stream's records into ``sink`` up to its trailer, which is returned once it
    agreed with the count. Like a sized file (:func:`receive`): on a
    thread reading the socket itself when the connection has a plain one (:mod:`bulkpump`;
    1 GiB through a pipe took 2.4 s of receiver CPU on the reactor path), else through
    :class:`_StreamReceiver`. ``pace``: as for :func:`receive`."""
    bulk = _bulk(channel)
    with calm_gc():
        borrowed = await bulk.borrow_socket_for_receiving()
        if borrowed is None:
            return await _StreamReceiver(reactor, channel, sink, progress, pace).run()
        from hilltop.transit import bulkpump

        sock, leftover = borrowed
        pump = bulkpump.Pump(reactor, sock, _pump_stream(leftover, bulk.opener, sink),
                             progress, "hilltop-receive", pace=pace)
        try:
            return await pump.done
        finally:
            await pump.close()  # before the sink closes its file under the thread
            bulk.end_borrowing()


def _pump_stream(leftover: bytes, opener: records.RecordOpener,
                 sink: Sink) -> Callable[[Any], Trailer]:
    """Work for a receiver's :class:`~hilltop.transit.bulkpump.Pump`: records up to the
    trailer. The socket's wake-up threshold stays at one byte: the end of a stream cannot be
    told in advance, and a slow pipe's bytes must come out as they arrive."""
    from hilltop.transit import bulkpump

    def work(pump: Any) -> Trailer:
        scanner = bulkpump.FrameScanner(bulkpump.RECEIVE_BUFFER, leftover)
        out = memoryview(bytearray(records.BIG_RECORD_SIZE))
        reader = StreamReader()
        while True:
            for frame in scanner.frames():
                data = reader.feed(opener.open(frame, out))
                if data:
                    sink.write(data)
                    pump.report(len(data))
            if reader.ended:
                if scanner.pending:
                    raise ProtocolError("peer sent data after the end of its stream")
                pump.report(0, final=True)
                return reader.check()
            got = pump.recv_into(scanner.space())
            if not got:
                raise TransitError(
                    f"the connection to the sender broke after {reader.received} bytes, "
                    "before the end of its stream: what arrived is incomplete")
            scanner.filled(got)

    return work


class _StreamReceiver(_Receiver):
    """A stream's records into ``sink`` up to its trailer (:class:`_Receiver`): the worker
    feeds each opened frame to the :class:`StreamReader` and writes its data."""

    def __init__(self, reactor: Any, channel: Channel, sink: Sink,
                 progress: Progress, pace: Pace = UNWATCHED) -> None:
        super().__init__(reactor, channel, sink, progress, pace)
        self._reader = StreamReader()  # worker thread only, until done fires

    async def run(self) -> Trailer:
        try:
            trailer: Trailer = await self._receive()
            return trailer
        finally:
            await self._worker.stop()  # before the sink closes its file under the worker

    def _end(self) -> None:
        try:
            trailer = self._reader.check()
        except BaseException as err:  # noqa: BLE001 - handed to the waiting caller
            self._done.errback(err)
        else:
            self._done.callback(trailer)

    def _lost_words(self) -> str:
        return (f"the connection to the sender broke after {self._received} bytes, before the "
                "end of its stream: what arrived is incomplete")

    # worker thread
    def _open_and_write(self, item: tuple[list[Any], int]) -> tuple[int, int, bool]:
        frames, sealed = item
        plain = 0
        out = memoryview(self._out)
        for frame in frames:
            data = self._reader.feed(self._opener.open(frame, out))
            if data:
                self._sink.write(data)
                plain += len(data)
        return plain, sealed, self._reader.ended
