"""Pipes: a stream of unknown length between hilltop peers (``stream-v1``), and stdout as a sink.

The sender reads a pipe (``wormhole send -``, ``/dev/stdin``, a FIFO) a record at a time on
the data path's own thread, so nothing is buffered beyond the few batches in flight
(:func:`hilltop.transfer.datapath.send_until_end`); after the last byte it sends the end
marker and the trailer (:mod:`hilltop.transfer.streamcodec`). The receiver opens the records,
feeds the stream reader and writes the data (to a hidden file or to stdout) on a thread: the
bulk thread reading a plain socket itself, as for a sized file, or else a worker fed by the
reactor, which stops reading the socket while :data:`RECEIVE_AHEAD` bytes wait. Either way a
slow consumer of stdout holds the sender back through TCP instead of filling our memory. Only
once the trailer came and agreed with what arrived is the stream complete: a sender that dies
mid-stream leaves a receiver that says so and fails.

The message order is the v1 story's (:mod:`hilltop.transfer.story`, whose helpers this
reuses); only the offer and the records' end differ.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from hilltop.errors import (
    LocalError,
    ProtocolError,
    StalledError,
    TransferError,
    TransitError,
    UnsendableError,
)
from hilltop.rendezvous import capabilities
from hilltop.transfer import datapath, offers, story
from hilltop.transfer.datapath import Progress
from hilltop.transfer.streamcodec import END_MARKER, StreamReader, Trailer
from hilltop.transit import records
from hilltop.transit.options import TransitOptions

if TYPE_CHECKING:
    from hilltop.api import Wormhole
    from hilltop.transfer.filesink import Sink
    from hilltop.transit.connection import TransitConnection

STDIN_NAME = "stdin"
"""The name a stream from ``-`` is offered under unless the sender picks one (``--name``)."""
PIPE_BUFFER = 1024 * 1024
"""The pipe buffer we ask the kernel for on a pipe we read (Linux ``F_SETPIPE_SZ``; 1 MiB is
what an unprivileged process may ask for by default): with the default 64 KiB, each read,
and so each record, held at most 64 KiB while the producer waited for us."""
_F_SETPIPE_SZ = 1031
POLL_SECONDS = 0.25
"""How often a read waiting for a silent pipe looks whether the transfer was stopped."""
RECEIVE_AHEAD = 4 * records.BIG_RECORD_SIZE
"""Sealed bytes handed to the worker but not yet written; past this, stop reading the socket."""
STREAM_STALLED = ("the sender sent nothing more but kept the connection open; what arrived "
                  "is incomplete (a pipe that is silent longer than that needs a larger "
                  "--idle-timeout)")
"""Why a stream receive stalled. The receiver cannot tell a frozen sender from a producer
with nothing to say, so a stream's silence has the file's limit (``--idle-timeout``)."""
NOT_A_STREAM_PEER = ("the sender is streaming data of unknown length (a pipe), which only "
                     "hilltop receivers can take")
"""The ``error`` text a receiver without ``stream-v1`` gets."""


class StreamSource:
    """Reads a pipe or FIFO for :func:`send_stream`; :attr:`position` counts the bytes read.

    ``-`` reads our stdin (descriptor 0). A path is opened on the first read, on the data
    path's thread: opening a FIFO waits for its writer, which must not stop the reactor.
    """

    def __init__(self, path: str, name: str | None = None) -> None:
        self.path = path
        if name is None:
            name = STDIN_NAME if path == "-" else os.path.basename(os.path.normpath(path))
        name = name or STDIN_NAME
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise UnsendableError(f"cannot offer the stream as {name!r}: not valid text") from None
        if len(name) > offers.MAX_STREAM_NAME:
            raise UnsendableError(f"a stream's name may have at most {offers.MAX_STREAM_NAME} "
                                  "characters")
        self.offer = offers.StreamOffer(name)
        self.position = 0
        self._file: io.FileIO | None = None
        self._cancelled = False
        if reads_our_stdin(path):
            self._file = io.FileIO(0, "rb", closefd=False)
            self._prepare(0)
        elif not os.access(path, os.R_OK):
            raise UnsendableError(f"cannot send {path!r}: permission denied")

    @staticmethod
    def _prepare(fd: int) -> None:
        os.set_blocking(fd, True)  # a shared description may have been left non-blocking
        with contextlib.suppress(OSError):  # not a pipe, or not Linux: reads are smaller
            import fcntl

            fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BUFFER)

    def readinto(self, buffer: memoryview | bytearray) -> int:
        """The next bytes into ``buffer``; 0 at the end of the stream."""
        if self._file is None:
            try:
                self._file = io.FileIO(self.path, "rb")
            except OSError as err:
                raise UnsendableError(f"cannot read {self.path!r}: {err.strerror}") from None
            self._prepare(self._file.fileno())
        self._wait_readable(self._file.fileno())
        try:
            got = self._file.readinto(buffer)
        except OSError as err:
            raise UnsendableError(f"cannot read {self.path!r}: {err.strerror}") from None
        got = got or 0  # None only from a non-blocking descriptor, which _prepare ruled out
        self.position += got
        return got

    def _wait_readable(self, fd: int) -> None:
        """Wait until a read would not block, looking at :meth:`cancel` every
        :data:`POLL_SECONDS`: a pipe that stays silent must not keep the sending thread (and
        so the command) alive once the receiver is gone."""
        while True:
            if self._cancelled:
                raise TransitError("the transit connection closed while sending")
            try:
                ready, _, _ = select.select([fd], [], [], POLL_SECONDS)
            except (OSError, ValueError):
                return  # not pollable (or closed): let the read itself say what is wrong
            if ready:
                return

    def more_ready(self) -> bool:
        """Whether a read would return at once; the batching sender sends what it has
        when not (:class:`hilltop.transit.bulkpump.BatchSealer`)."""
        if self._file is None:
            return False
        try:
            ready, _, _ = select.select([self._file.fileno()], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(ready)

    def cancel(self) -> None:
        """Stop waiting for input (any thread): the next or current read gives up."""
        self._cancelled = True

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> StreamSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def reads_our_stdin(path: str) -> bool:
    """Whether streaming ``path`` reads our own stdin (``-``, or ``/dev/stdin`` on a pipe)."""
    if path == "-":
        return True
    try:
        return os.path.samestat(os.stat(path), os.fstat(0))
    except OSError:
        return False


class FdWriter:
    """A sink's writable object for a descriptor we do not own (stdout): every byte is written,
    and a consumer that went away becomes one clear error."""

    def __init__(self, fd: int = 1, name: str = "<stdout>") -> None:
        self._fd = fd
        self.name = name
        with contextlib.suppress(OSError):
            os.set_blocking(fd, True)

    def write(self, data: bytes | memoryview) -> None:
        from hilltop.transfer.filesink import write_all

        try:
            write_all(self._fd, data)
        except BrokenPipeError:
            raise LocalError("the program reading our output went away (broken pipe); "
                             "what it got is incomplete") from None
        except OSError as err:
            raise LocalError(f"cannot write to {self.name}: {err.strerror}") from None


# --- sender -----------------------------------------------------------------------------------
async def send_stream(
    reactor: Any,
    w: Wormhole,
    source: StreamSource,
    options: TransitOptions,
    *,
    on_connected: Callable[[str], None] = lambda _: None,
    progress: Progress = lambda _: None,
) -> Trailer:
    """Offer ``source`` as a stream and send it to its end; returns the trailer sent.

    A peer without ``stream-v1`` (official, wormhole-william, an older hilltop) needs the size
    in the offer: it is told why in an ``error`` message and :class:`UnsendableError` is
    raised, before a byte of the stream is read.
    """
    ours = capabilities.from_app_versions(w.app_versions).features
    peer = capabilities.from_app_versions(await w.get_peer_versions())
    if capabilities.STREAM not in peer.shared_features(ours):
        w.send_message(offers.ErrorMsg(NOT_A_STREAM_PEER).to_wire())
        who = "an official or wormhole-william client" if peer.is_v1_only else "an older hilltop"
        raise UnsendableError(
            f"the receiver runs {who}, which needs the size before the first byte; a pipe "
            "has none: save the data to a file and send that file")
    plan = datapath.plan(ours, peer)
    runner = story.make_runner(reactor, w, "sender", options)
    try:
        hints = await runner.our_hints()
        w.send_message(story.transit_message(runner, hints))
        w.send_message(source.offer.to_wire())
        peer_transit = await story._await_answer(w)
        conn = await story.connect_transit(runner, peer_transit, plan.cipher)
        conn.when_closed().addCallback(lambda _: source.cancel())
        try:
            on_connected(conn.description)
            idle = options.idle_timeout
            digest = await datapath.send_until_end(reactor, conn, source, progress,
                                                   plan.record_size, plan.hashed,
                                                   idle_timeout=idle)
            trailer = Trailer(source.position, digest)
            conn.send_record(END_MARKER)
            conn.send_record(trailer.to_record())
            try:
                ack = await story.next_record(reactor, conn, idle, "confirming the stream")
            except StalledError:
                raise
            except TransitError:
                raise TransferError(
                    "the receiver closed the connection without confirming the stream") from None
            story._check_ack(ack, digest)
        except BaseException:
            await conn.abort()  # close() would wait to flush what a stalled receiver never takes
            raise
        await conn.close()
        return trailer
    finally:
        await runner.stop()


# --- receiver ---------------------------------------------------------------------------------
async def receive_stream_into(
    reactor: Any,
    w: Wormhole,
    peer_transit: offers.TransitMsg,
    sink: Sink,
    options: TransitOptions,
    *,
    on_connected: Callable[[str], None] = lambda _: None,
    progress: Progress = lambda _: None,
    on_unacknowledged: Callable[[str], None] = lambda _: None,
) -> Trailer:
    """Accept a stream offer and receive it into ``sink`` (opened with ``UNKNOWN_SIZE``).

    Returns the sender's trailer once it matched what arrived (count, and SHA-256 when both
    hash) and the sink committed; anything short of that raises and the sink is aborted.
    """
    runner = None
    try:
        ours = capabilities.from_app_versions(w.app_versions).features
        peer = capabilities.from_app_versions(await w.get_peer_versions())
        plan = datapath.plan(ours, peer)
        runner = story.make_runner(reactor, w, "receiver", options)
        if not plan.hashed:
            sink.skip_hash()
        hints = await runner.our_hints()
        w.send_message(story.transit_message(runner, hints))
        w.send_message(offers.Answer(offers.FILE_ACK).to_wire())
        heard = story.SenderHeard(progress)
        conn = await story.unless_mailbox_lost(
            w, story.connect_transit(runner, peer_transit, plan.cipher), heard)
        try:
            on_connected(conn.description)
            trailer = await story.unless_mailbox_lost(w, receive_stream_data(
                reactor, conn, sink, heard, idle_timeout=options.idle_timeout), heard)
            sink.end_at(trailer.length)
            digest = sink.finish(trailer.sha256)
            try:
                conn.send_record(story._ack(digest))
            except TransitError as err:
                on_unacknowledged(str(err))
        except BaseException:
            await conn.abort()
            raise
        await conn.close()
        return trailer
    except BaseException:
        sink.abort()
        raise
    finally:
        if runner is not None:
            await runner.stop()


async def receive_stream_data(reactor: Any, conn: TransitConnection, sink: Sink,
                              progress: Progress, *,
                              idle_timeout: float | None = None) -> Trailer:
    """The stream's records into ``sink`` up to its trailer, which is returned once it
    agreed with the count. Like a sized file (:func:`hilltop.transfer.datapath.receive`): on a
    thread reading the socket itself when the connection has a plain one (:mod:`bulkpump`;
    1 GiB through a pipe took 2.4 s of receiver CPU on the reactor path), else through
    :class:`_StreamReceiver`. ``idle_timeout``: seconds without a byte from the sender
    before :class:`StalledError` (:data:`STREAM_STALLED`), as for a file."""
    with datapath.calm_gc():
        borrowed = await conn.borrow_socket_for_receiving()
        if borrowed is None:
            return await _StreamReceiver(reactor, conn, sink, progress, idle_timeout).run()
        from hilltop.transit import bulkpump

        sock, leftover = borrowed
        pump = bulkpump.Pump(reactor, sock, _pump_stream(leftover, conn.opener, sink),
                             progress, "hilltop-receive", idle_timeout=idle_timeout,
                             stalled=STREAM_STALLED)
        try:
            return await pump.done
        finally:
            await pump.close()  # before the sink closes its file under the thread
            conn.end_borrowing()


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


class _StreamReceiver:
    """Frames from the connection; a worker thread opens each, feeds the
    :class:`StreamReader` and writes the data to the sink, strictly in order."""

    def __init__(self, reactor: Any, conn: TransitConnection, sink: Sink,
                 progress: Progress, idle_timeout: float | None = None) -> None:
        from hilltop.transit.pipeline import OrderedWorker

        self._reactor = reactor
        self._idle_timeout = idle_timeout
        self._conn = conn
        self._sink = sink
        self._progress = progress
        self._opener = conn.opener
        self._reader = StreamReader()  # worker thread only, until done fires
        self._out = bytearray(records.BIG_RECORD_SIZE)
        self._waiting = 0  # sealed bytes submitted, not yet handled
        self._received = 0
        self._paused = False
        self._broken = False
        self._done: defer.Deferred[Trailer] = defer.Deferred()
        self._worker = OrderedWorker(reactor, self._open_and_write, self._wrote, self._fail,
                                     name="hilltop-receive")

    async def run(self) -> Trailer:
        self._idle = datapath.IdleTimer(
            self._reactor, self._idle_timeout,
            lambda t: self._fail(datapath.stalled(t, STREAM_STALLED)))
        self._conn.set_frame_receiver(self._frames, self._lost)
        try:
            return await self._done
        finally:
            self._idle.stop()
            self._conn.set_frame_receiver(None, None)
            await self._worker.stop()  # before the sink closes its file under the worker

    # reactor thread
    def _frames(self, frames: list[Any]) -> None:
        if self._done.called:
            return
        self._idle.moved()
        nbytes = sum(len(f) for f in frames)
        self._waiting += nbytes
        self._worker.submit((frames, nbytes))
        if self._waiting >= RECEIVE_AHEAD and not self._paused:
            self._paused = True
            self._conn.pauseProducing()

    def _wrote(self, result: tuple[int, int, bool]) -> None:
        plain, sealed, ended = result
        self._waiting -= sealed
        self._received += plain
        if plain:
            self._progress(plain)
        if self._done.called:
            return
        self._idle.moved()  # our own slow consumer (stdout) is not the sender's silence
        if ended:
            try:
                trailer = self._reader.check()
            except BaseException as err:  # noqa: BLE001 - handed to the waiting caller
                self._done.errback(err)
            else:
                self._done.callback(trailer)
        elif self._broken and not self._worker.pending:
            self._report_lost()
        elif self._paused and self._waiting < RECEIVE_AHEAD // 2:
            self._paused = False
            self._conn.resumeProducing()

    def _fail(self, err: BaseException) -> None:
        self._conn.close()
        if not self._done.called:
            self._done.errback(err)

    def _lost(self, _err: Exception) -> None:
        self._broken = True
        if not self._worker.pending:
            self._report_lost()

    def _report_lost(self) -> None:
        if not self._done.called:
            self._done.errback(TransitError(
                f"the connection to the sender broke after {self._received} bytes, before the "
                "end of its stream: what arrived is incomplete"))

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
