"""The bulk of a file transfer on a thread of its own, straight between the file and a TCP socket.

Why: between two hilltop peers the data path is CPU-bound on two cores, and profiles of the
reactor-driven pipeline (:mod:`hilltop.transit.pipeline`) showed a third of each side's bulk CPU in
Python around the bytes: a reactor turn per read or write, Twisted's buffer concatenation,
a frame splitter, thread hand-offs and their wake-ups. When the winning connection is a
plain TCP (or Unix) socket, one thread per side now does the whole loop with the GIL
released in every call that matters (``readinto``, libsodium, ``send``, ``recv_into``,
``write``):

* sender: read into a reused buffer, hash if needed, seal a batch of records into a reused
  frame buffer, ``send`` it;
* receiver: ``recv_into`` a reused buffer, open each frame where it lies, hand the plaintext
  to the sink (which writes and hashes it).

The thread works on a duplicate of the socket's file descriptor, so Twisted may close its
own at any moment without the thread ever touching a reused descriptor number. The reactor
keeps the connection: it flushes everything written before the thread starts, keeps reading
on the sender's side (the peer's ack, or its hang-up, which stops the thread), and carries on
with ordinary records afterwards, with the nonce counters where the thread left them.
Progress goes to the reactor thread every :data:`REPORT_EVERY` bytes or
:data:`REPORT_SECONDS`, whichever comes first. The thread keeps no idle clock: a ``send`` or
``recv`` that waited :data:`WAIT_SECONDS` in vain tells the reactor the peer holds it back
(``pace.held``), the first byte after that that it moves again (``pace.moved``), and the
transfer engine decides when that is a stall; then the shell stops the pump (:meth:`Pump.stop`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from twisted.internet import defer

from hilltop._runtime.awaitable import once_fired
from hilltop.errors import TransitError
from hilltop.transit import records

T = TypeVar("T")

REPORT_EVERY = 4 * 1024 * 1024
"""Plaintext bytes that make the thread report progress to the reactor thread..."""
REPORT_SECONDS = 0.25
"""...or seconds since the last report, whichever comes first (a slow link, Tor say, still
moves the progress bar)."""
SEND_BATCH = 1024 * 1024
"""Plaintext bytes sealed before one ``send``: fewer, bigger syscalls."""
RECEIVE_BUFFER = 1024 * 1024
"""Bytes of the receive buffer; frames bigger than it (never ours) get a bigger one."""
WAKE_AFTER = 1024 * 1024
"""Bytes the kernel gathers before it wakes the receiving thread (``SO_RCVLOWAT``), when the
sender runs on this machine (:func:`same_host`); otherwise the thread wakes on every arrival.

Why a threshold: every wake-up of a receiver that is faster than its sender is work (and an
interprocessor interrupt) in the sender's own ``send`` over loopback; an official sender, one
``send`` per 16 KiB record, woke us ~30,000 times per GiB without it and ~1,100 with it.
Why only on the same machine: over a real round trip a sender can stop short of the
threshold, and nothing moved until the wait timed out (200 MB at 40 ms from an official
sender: 15.0 s, and 4.0 s reading every arrival; bench/README.md); a sender elsewhere does
not pay for our wake-ups anyway."""
FINAL_STRETCH = WAKE_AFTER + 256 * 1024
"""Once no more than this is left to come, the receiving thread wakes on every byte again.

Why: a sender with Nagle's algorithm on (official magic-wormhole and the transit relay do
not set ``TCP_NODELAY``) holds its last partial segment until the one before is acknowledged,
and a receiver that is not reading acknowledges it only when the 40 ms delayed-ACK timer
fires: every transfer from an official sender ended with a ~42 ms stall. The held tail is
under one segment (64 KiB even on loopback), so :data:`WAKE_AFTER` and 256 KiB more leaves
room."""
WAIT_SECONDS = REPORT_SECONDS
"""How long one blocked ``send``/``recv`` waits before looking at the stop flag again, and a
receiver waits for :data:`WAKE_AFTER` bytes before it takes what there is (a slow link)."""


class _Stopped(Exception):
    """The reactor stopped the thread; :attr:`Pump.stop_reason` says why."""


class Pump(Generic[T]):
    """Runs ``work(pump)`` on a new thread; :attr:`done` fires with its result on the reactor.

    The work function uses :meth:`send_all`, :meth:`recv_into` and :meth:`report`;
    :meth:`stop` from the reactor thread shuts the socket down, which wakes any blocked call.
    ``pace`` (``held()``, ``moved()``, called on the reactor thread) hears when a blocked
    ``send``/``recv`` starts and stops waiting on the peer: once per wait, not per call.
    """

    def __init__(self, reactor: Any, sock: socket.socket, work: Callable[[Pump[T]], T],
                 progress: Callable[[int], None], name: str, *, pace: Any = None) -> None:
        self._reactor = reactor
        self.sock = sock
        self._pace = pace
        self._held = False  # pump thread only: pace.held() went, pace.moved() not yet
        self._work = work
        self._progress = progress
        self._unreported = 0
        self._reported_at = time.monotonic()
        self._closing = threading.Lock()
        self._stopping = False
        self._succeeded = False
        self.stop_reason: BaseException | None = None
        self.done: defer.Deferred[T] = defer.Deferred()
        self._exited: defer.Deferred[None] = defer.Deferred()
        sock.settimeout(WAIT_SECONDS)  # O_NONBLOCK stays set: Twisted shares the description
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # reactor thread
    def stop(self, reason: BaseException) -> defer.Deferred[None]:
        """Make the thread give up with ``reason``; fires once it no longer runs."""
        if not self._stopping:
            self._stopping = True
            self.stop_reason = reason
            with self._closing, contextlib.suppress(OSError):  # closed already: the flag will do
                self.sock.shutdown(socket.SHUT_RDWR)
        return self.exited()

    def close(self) -> defer.Deferred[None]:
        """Stop the thread unless its work succeeded; fires once it no longer runs (so the
        caller may close the file or sink it used, and go on using the connection)."""
        if not self._succeeded:
            return self.stop(defer.CancelledError("the transfer was stopped"))
        return self.exited()

    def exited(self) -> defer.Deferred[None]:
        return once_fired(self._exited)

    def _finished(self, ok: bool, value: Any) -> None:
        self._succeeded = ok
        if ok:
            self.done.callback(value)
        else:
            self.done.errback(value)

    # pump thread
    def send_all(self, data: memoryview) -> None:
        while data:
            self._check()
            try:
                sent = self.sock.send(data)
            except TimeoutError:
                self._waiting_on_peer()
                continue
            except OSError as err:
                self._check()
                raise TransitError(  # the same words as when the reactor sees it first
                    f"the transit connection closed while sending ({err.strerror})") from None
            data = data[sent:]
            if self._held:
                self._moving_again()

    def recv_into(self, buffer: memoryview,
                  on_timeout: Callable[[], None] | None = None) -> int:
        """Some bytes into ``buffer``; 0 when the peer closed the connection.
        ``on_timeout`` runs each time :data:`WAIT_SECONDS` pass without any."""
        while True:
            self._check()
            try:
                got = self.sock.recv_into(buffer)
            except TimeoutError:
                self._waiting_on_peer()
                if on_timeout is not None:
                    on_timeout()
                continue
            except OSError:
                self._check()
                return 0  # reset by the peer: the caller reports how far it got
            if self._held:
                self._moving_again()
            return got

    def report(self, nbytes: int, final: bool = False) -> None:
        self._unreported += nbytes
        if not self._unreported:
            return
        now = time.monotonic()
        if final or self._unreported >= REPORT_EVERY or now - self._reported_at >= REPORT_SECONDS:
            n, self._unreported, self._reported_at = self._unreported, 0, now
            self._reactor.callFromThread(self._progress, n)

    def _check(self) -> None:
        if self._stopping:
            raise _Stopped

    def _waiting_on_peer(self) -> None:
        if not self._held and self._pace is not None:
            self._held = True
            self._reactor.callFromThread(self._pace.held)

    def _moving_again(self) -> None:
        self._held = False
        if self._pace is not None:
            self._reactor.callFromThread(self._pace.moved)

    def _run(self) -> None:
        try:
            try:
                result = self._work(self)
            except _Stopped:
                self._reactor.callFromThread(self._finished, False, self.stop_reason)
            except BaseException as err:  # noqa: BLE001 - handed to the reactor thread
                if self._stopping:  # e.g. the sink closed under us: the reason is the stop
                    err = self.stop_reason or err
                self._reactor.callFromThread(self._finished, False, err)
            else:
                self._reactor.callFromThread(self._finished, True, result)
        finally:
            with self._closing:  # never while stop() shuts it down: the number could be reused
                self.sock.close()
            self._reactor.callFromThread(self._exited.callback, None)


class BatchSealer:
    """Reads ``source`` and seals what it yields into one reused buffer, a batch at a time.

    The one seal loop of both sending paths: this module's thread (:func:`send_source`) and
    the reactor pipeline's worker (:mod:`hilltop.transfer.datapath`). A batch holds as many
    records as fit in ``batch_bytes`` of plaintext (at least one), so a v1 peer's small records
    cost no more calls per byte than big ones. ``hasher`` (a hashlib object or None) sees
    every plaintext byte in order.
    """

    def __init__(self, source: Any, sealer: records.RecordSealer, record_size: int,
                 batch_bytes: int, hasher: Any | None) -> None:
        self._source = source
        self._sealer = sealer
        self._record_size = record_size
        self._plain = memoryview(bytearray(record_size))
        per_batch = max(1, batch_bytes // record_size)
        self._frames = memoryview(bytearray(per_batch * (records.OVERHEAD + record_size)))
        self._hasher = hasher
        self._ended = False
        self._more_ready = getattr(source, "more_ready", None)
        """A stream's "would a read return at once?": without it a slow pipe's bytes waited
        for a whole batch to fill."""

    def next_batch(self) -> tuple[memoryview, int]:
        """The next sealed records, as a view of the reused buffer (valid until the next
        call), and the plaintext bytes in them; an empty view once the source is done."""
        used = plain = 0
        frames, buffer = self._frames, self._plain
        while not self._ended and len(frames) - used >= records.OVERHEAD + self._record_size:
            if used and self._more_ready is not None and not self._more_ready():
                break  # a pipe with nothing more for now: send what we have (tail -f | send -)
            n = self._source.readinto(buffer)
            if not n:
                self._ended = True
                break
            chunk = buffer[:n]
            if self._hasher is not None:
                self._hasher.update(chunk)
            used += len(self._sealer.seal_into(chunk, frames[used:]))
            plain += n
        return frames[:used], plain

    def hexdigest(self) -> str | None:
        """The SHA-256 (hex) of everything sealed, or None without a hasher."""
        return None if self._hasher is None else self._hasher.hexdigest()


def send_source(source: Any, sealer: records.RecordSealer, record_size: int,
                hasher: Any | None) -> Callable[[Pump[str | None]], str | None]:
    """Work for a sender's :class:`Pump`: everything ``source`` yields, as sealed records.
    Returns the SHA-256 (hex) when ``hasher`` is given, else None."""

    def work(pump: Pump[str | None]) -> str | None:
        batches = BatchSealer(source, sealer, record_size, SEND_BATCH, hasher)
        while True:
            frames, plain = batches.next_batch()
            if not plain:
                break
            pump.send_all(frames)
            pump.report(plain)
        pump.report(0, final=True)
        return batches.hexdigest()

    return work


class FrameScanner:
    """Finds whole frames in a buffer that socket reads fill from the end (sans-I/O).

    A frame that is complete in the buffer is handed out as a view of it, so it is opened
    where it lies; only the partial frame at the end is ever moved (to the front, when the
    space after it runs short). Raises :class:`BadRecordError` for an impossible length.
    """

    def __init__(self, size: int = RECEIVE_BUFFER, leftover: bytes = b"") -> None:
        self.buffer = memoryview(bytearray(max(size, len(leftover))))
        self._start = 0
        self._end = len(leftover)
        self.buffer[: self._end] = leftover

    def space(self) -> memoryview:
        """Where the next read goes: never empty (the buffer grows for a huge frame)."""
        need = self._needed()
        pending = self._end - self._start
        if len(self.buffer) < need:  # a frame bigger than the buffer: never ours
            bigger = memoryview(bytearray(need))
            bigger[:pending] = self.buffer[self._start : self._end]
            self.buffer, self._start, self._end = bigger, 0, pending
        elif len(self.buffer) - self._start < need:  # it would not fit where it starts
            self.buffer[:pending] = self.buffer[self._start : self._end]
            self._start, self._end = 0, pending
        return self.buffer[self._end :]

    def filled(self, n: int) -> None:
        self._end += n

    @property
    def pending(self) -> int:
        """Bytes of the partial frame waiting in the buffer."""
        return self._end - self._start

    def frames(self) -> list[memoryview]:
        """Every complete frame (``nonce || tag || ciphertext``), in order; views that stay
        valid until the next :meth:`space`."""
        out = []
        buf, pos, end = self.buffer, self._start, self._end
        while end - pos >= records.LENGTH_SIZE:
            size = _frame_size(buf[pos : pos + records.LENGTH_SIZE])
            if end - pos - records.LENGTH_SIZE < size:
                break
            pos += records.LENGTH_SIZE
            out.append(buf[pos : pos + size])
            pos += size
        self._start = pos
        if pos == end:
            self._start = self._end = 0
        return out

    def _needed(self) -> int:
        """Bytes the frame at the front needs in all (its length prefix included)."""
        pending = self._end - self._start
        if pending < records.LENGTH_SIZE:
            return records.LENGTH_SIZE
        head = self.buffer[self._start : self._start + records.LENGTH_SIZE]
        return records.LENGTH_SIZE + _frame_size(head)


def _frame_size(head: memoryview) -> int:
    return records.checked_frame_size(int.from_bytes(head, "big"))


def receive_into_sink(leftover: bytes, opener: records.RecordOpener, sink: Any,
                      size: int) -> Callable[[Pump[None]], None]:
    """Work for a receiver's :class:`Pump`: ``size`` plaintext bytes into ``sink.write``.

    ``leftover`` is what the reactor had read already. Plaintexts are gathered into one
    buffer of :data:`records.BIG_RECORD_SIZE` before each ``sink.write``
    (:func:`records.open_into`).
    """

    def work(pump: Pump[None]) -> None:
        scanner = FrameScanner(RECEIVE_BUFFER, leftover)
        out = memoryview(bytearray(records.BIG_RECORD_SIZE))
        written = reported = 0
        wake = _WakeThreshold(pump.sock)
        try:
            while True:
                written += records.open_into(opener, scanner.frames(), out, sink.write)
                pump.report(written - reported)
                reported = written
                if written >= size:
                    pump.report(0, final=True)
                    return
                wake.set(wake_threshold(unread_at_least(size - written, scanner)))
                got = pump.recv_into(scanner.space(), on_timeout=wake.reset)
                if not got:
                    raise TransitError(f"the connection to the sender broke after {written} "
                                       f"of {size} bytes; the file was not saved")
                scanner.filled(got)
        finally:
            wake.reset()

    return work


def unread_at_least(plaintext_to_come: int, scanner: FrameScanner) -> int:
    """Wire bytes the socket still has to deliver, at the least, for ``plaintext_to_come``
    bytes of plaintext: each is at least one byte on the wire, less what the partial frame
    in the scanner's buffer may hold (complete frames have been taken out)."""
    return plaintext_to_come - scanner.pending


def wake_threshold(still_to_come: int) -> int:
    """The ``SO_RCVLOWAT`` for a wait with at least ``still_to_come`` wire bytes left:
    :data:`WAKE_AFTER`, or 1 (every byte) in the :data:`FINAL_STRETCH`. Never more than
    what is left, or the last bytes would never wake the thread."""
    return WAKE_AFTER if still_to_come > FINAL_STRETCH else 1


def same_host(sock: socket.socket) -> bool:
    """Whether the other end of ``sock`` runs on this machine: a Unix socket, a loopback
    address, or our own address (which the kernel routes over loopback as well)."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return True
    try:
        peer = _unmapped(sock.getpeername()[0])
        local = _unmapped(sock.getsockname()[0])
    except (OSError, ValueError):
        return False
    return peer.is_loopback or peer == local


def _unmapped(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address in ``text``, an IPv4 one shown as ``::ffff:a.b.c.d`` (a dual-stack socket)
    as itself. Raises ValueError."""
    address = ipaddress.ip_address(text)
    return getattr(address, "ipv4_mapped", None) or address


class _WakeThreshold:
    """The socket's ``SO_RCVLOWAT`` (:func:`wake_threshold`), raised only when the sender is
    on this machine (:data:`WAKE_AFTER`). A wait that timed out takes whatever has come
    (:meth:`reset`: progress on a slow link). The option belongs to the socket that Twisted
    shares, so the work puts the default (1) back when it ends."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._value = 1
        self._may_raise = same_host(sock)

    def set(self, value: int) -> None:
        if not self._may_raise:
            return
        if value != self._value:
            self._apply(value)

    def reset(self) -> None:
        """Wake on the next byte (the next :meth:`set` raises the threshold again)."""
        if self._value != 1:
            self._apply(1)

    def _apply(self, value: int) -> None:
        with contextlib.suppress(OSError):  # closed under us (stop): nothing left to wake
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, value)
        self._value = value
