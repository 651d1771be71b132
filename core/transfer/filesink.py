"""Receiver side: write what the peer sends so that nothing half-done ever looks finished.

Both sinks write under a hidden temporary name in the target's own directory
(``.NAME.hilltop-part`` for a file, ``.NAME.hilltop-dir`` for a directory), so the final step
is a rename on one filesystem and a crash leaves only dot-files that are plainly not the
transfer (the next receive of that name clears them: :mod:`hilltop.transfer.partials`). The final
name appears only after exactly the offered number of bytes arrived, and an existing path
is never replaced, even one that appeared while we were receiving.

A received folder (a zip, hostile input) is unpacked by :mod:`hilltop.transfer.foldersink`, on the
same :class:`Sink` lifecycle.

No Twisted: the transit layer calls :meth:`write` for each record and :meth:`finish` at the end.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import mmap
import os
import time
from enum import Enum, auto
from typing import Any, TypeVar

from hilltop.errors import (
    DiskFullError,
    HilltopError,
    LocalError,
    ProtocolError,
    RejectedError,
)
from hilltop.transfer import partials, resume

T = TypeVar("T")

DIRECT_MIN_SIZE = 16 * 1024 * 1024
"""Files at least this big are written with O_DIRECT where the filesystem allows it."""
DIRECT_CHUNK = 1024 * 1024
"""Bytes gathered in a page-aligned staging buffer per O_DIRECT write."""
DIRECT_BUFFERS = 2
WRITEBACK_EVERY = 8 * 1024 * 1024
"""Bytes written through the page cache between two requests to start writing them out
(:class:`_WriteBack`).

Why: a received file is fsync'ed before we acknowledge it; asking for write-back as the file
arrives overlaps that work with the transfer, so the final fsync waits for the last stretch
only (1 GiB from an official sender: ~0.5 s of fsync before, 1-2 ms now; bench/README.md).
"""
WRITEBACK_LAST = 1024 * 1024
"""Bytes between two write-back requests once no more than :data:`WRITEBACK_EVERY` are left.

Why: the fsync before the ack waits for whatever was never asked for, and the peer waits for
the ack; asking every 1 MiB near the end only (not all along, which would wake the thread
eight times as often) cut an official sender's wait for our ack from 21 ms to 3.8 ms."""
_O_DIRECT = getattr(os, "O_DIRECT", 0)
UNKNOWN_SIZE = 1 << 62
"""The size a sink for a stream of unknown length is opened with: no limit in practice;
:meth:`Sink.end_at` sets the real one when the stream's trailer says it."""


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte (os.write may write fewer); a seam tests use to simulate a full disk."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def sync_filesystem(path: str) -> None:
    """Make everything written on the filesystem holding ``path`` durable (Linux
    ``syncfs``; ``sync`` where it is missing). Raises OSError.

    Why for a received folder, before the ack: an acknowledged transfer may be deleted at
    the sender, so its files must survive a power cut here. One ``syncfs`` flushes them all
    at once, where an ``fsync`` per file would wait for the disk 10,000 times.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    syncfs = getattr(libc, "syncfs", None)
    if syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
    finally:
        os.close(fd)


def io_error(err: OSError, doing: str) -> HilltopError:
    if err.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return DiskFullError(f"disk full while {doing}; the partial data was removed")
    return LocalError(f"error while {doing}: {err.strerror or err}")


def _unlink_quietly(path: str | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)


class _DirectWriter:
    """Writes a big file with O_DIRECT from page-aligned staging buffers, on its own thread.

    Why: a received file is written once and rarely read back at once, and filling the page
    cache costs more CPU than the copy itself where fresh memory is expensive to fault in
    (VMs whose freed pages go back to the host): writing 1 GiB through the page cache cost up
    to 2.8 s of system time on the bench machine, with O_DIRECT 0.1 s. O_DIRECT writes wait
    for the disk, so a thread of their own overlaps them with decrypting and hashing;
    :data:`DIRECT_BUFFERS` staging buffers bound the memory. Everything degrades to ordinary
    writes if the filesystem refuses O_DIRECT or an aligned write.
    """

    def __init__(self, fd: int) -> None:
        import queue
        import threading

        self._fd = fd
        self._free: queue.SimpleQueue[memoryview] = queue.SimpleQueue()
        self._full: queue.SimpleQueue[tuple[memoryview, int] | None] = queue.SimpleQueue()
        self._maps = [mmap.mmap(-1, DIRECT_CHUNK) for _ in range(DIRECT_BUFFERS)]
        for m in self._maps:  # anonymous maps are page-aligned
            self._free.put(memoryview(m))
        self._current: memoryview | None = None
        self._used = 0
        self._offset = os.lseek(fd, 0, os.SEEK_CUR)  # where the writer thread has reached
        # (not 0 when a resumed file continues after its kept bytes)
        self._error: BaseException | None = None
        self.active = True
        self._thread = threading.Thread(target=self._run, name="hilltop-disk", daemon=True)
        self._thread.start()

    @classmethod
    def open(cls, fd: int) -> _DirectWriter | None:
        if not _O_DIRECT:
            return None
        try:
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | _O_DIRECT)
        except (OSError, ImportError):
            return None
        return cls(fd)

    def write(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        while view:
            self._check()
            if self._current is None:
                self._current = self._free.get()
            take = min(len(view), DIRECT_CHUNK - self._used)
            self._current[self._used : self._used + take] = view[:take]
            self._used += take
            view = view[take:]
            if self._used == DIRECT_CHUNK:
                self._full.put((self._current, self._used))
                self._current, self._used = None, 0

    def finish(self) -> None:
        """Wait for the queued writes, then write the unaligned tail with O_DIRECT off."""
        self._stop()
        self._check()
        self._buffered()
        if self._current is not None and self._used:
            write_all(self._fd, self._current[: self._used])
        self.close()

    def close(self) -> None:
        self._stop()
        self._current = None
        for m in self._maps:
            with contextlib.suppress(BufferError):  # a slice may live on in a traceback
                m.close()
        self._maps = []

    def _stop(self) -> None:
        if self._thread.is_alive():
            self._full.put(None)
            self._thread.join()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    # disk thread
    def _run(self) -> None:
        while (item := self._full.get()) is not None:
            if self._error is not None:
                continue
            buffer, used = item
            try:
                self._write(buffer[:used])
            except BaseException as err:  # noqa: BLE001 - raised on the next write()
                self._error = err
            self._free.put(buffer)

    def _write(self, chunk: memoryview) -> None:
        try:
            write_all(self._fd, chunk)
        except OSError as err:
            if err.errno != errno.EINVAL or not self.active:
                raise
            # The filesystem took the flag but not this write: go on without O_DIRECT.
            done = os.lseek(self._fd, 0, os.SEEK_CUR) - self._offset
            self._buffered()
            write_all(self._fd, chunk[done:])
        self._offset += len(chunk)

    def _buffered(self) -> None:
        if self.active:
            import fcntl

            self.active = False
            fcntl.fcntl(self._fd, fcntl.F_SETFL,
                        fcntl.fcntl(self._fd, fcntl.F_GETFL) & ~_O_DIRECT)


class _WriteBack:
    """Asks the kernel, on a thread of its own, to start writing out a file's dirty pages.

    Why a thread: ``posix_fadvise(DONTNEED)`` does the start of write-back in the calling
    thread (allocating the blocks, building and queueing the I/O) and sleeps whenever the
    disk's queue is full. Called from the receiving thread it took 2-230 ms per 32 MiB on the
    bench machine, ~0.8 s per GiB in all, during which nothing read the socket: the receive
    window closed and an official sender stalled. Here those waits overlap with receiving.
    Requests that pile up while one runs are merged into the latest (the range starts at 0,
    so nothing is skipped: pages written out since the last call are dropped too).
    """

    def __init__(self, fd: int) -> None:
        import threading

        self._fd = fd
        self._asked = self._done = 0
        self._stopping = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="hilltop-writeback", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, fd: int) -> _WriteBack | None:
        """None where the platform has no ``posix_fadvise`` (the final fsync does it all)."""
        return cls(fd) if hasattr(os, "posix_fadvise") else None

    def ask(self, end: int) -> None:
        """Start writing out bytes ``[0, end)``; returns at once."""
        with self._changed:
            self._asked = end
            self._changed.notify()

    def stop(self) -> None:
        """Drop what was not started and wait for the call in progress, so the caller may
        fsync or close the descriptor."""
        with self._changed:
            self._stopping = True
            self._changed.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                while self._asked == self._done and not self._stopping:
                    self._changed.wait()
                if self._stopping:
                    return
                end = self._asked
            with contextlib.suppress(OSError):  # advice only: errors show in write or fsync
                os.posix_fadvise(self._fd, 0, end, os.POSIX_FADV_DONTNEED)
            self._done = end


def writeback_step(left: int) -> int:
    """Bytes written between two write-back requests while ``left`` bytes are still to
    come: :data:`WRITEBACK_EVERY`, then :data:`WRITEBACK_LAST` at the end."""
    return WRITEBACK_EVERY if left > WRITEBACK_EVERY else WRITEBACK_LAST


class Offered:
    """What a file spool and a folder unpacker share: exactly ``size`` bytes of ``what``,
    counted against the offer and hashed as they arrive (unless told not to, before the
    first byte: see :meth:`Sink.skip_hash`)."""

    path: str
    """The hidden temporary file or folder being filled."""
    direct_io: bool
    """Whether the first write should switch to O_DIRECT (only a big file ever does)."""

    def __init__(self, size: int, what: str) -> None:
        self.size = size
        self.what = what
        self.received = 0
        self.hash: Any = hashlib.sha256()
        self._closed = False
        self.spoiled = False  # a write or the final check failed: keep nothing

    def write(self, data: bytes | memoryview) -> None:
        raise NotImplementedError

    def complete(self, expected_sha256: str | None) -> str | None:
        """Check the count (and the hash, if known) and make the result durable; return the
        hex digest (None when not hashing)."""
        raise NotImplementedError

    def discard(self) -> None:
        """Close and remove everything written so far."""
        raise NotImplementedError

    def _admit(self, data: Any) -> None:
        """Refuse ``data`` after close or past the offered size (before writing any of it)."""
        if self._closed:
            raise LocalError(f"internal error: data for {self.what} after it was closed")
        if self.received + len(data) > self.size:
            raise ProtocolError(
                f"peer sent more than the {self.size} bytes it offered for {self.what}")

    def _count(self, data: Any) -> None:
        if self.hash is not None:
            self.hash.update(data)
        self.received += len(data)

    def _checked_digest(self, expected_sha256: str | None) -> str | None:
        """At the end: every offered byte arrived and, if both hashes are known, they agree.
        Returns our hex digest (None when not hashing)."""
        if self.received != self.size:
            raise ProtocolError(
                f"transfer of {self.what} ended early: got {self.received} of {self.size} bytes")
        digest = None if self.hash is None else self.hash.hexdigest()
        if expected_sha256 is not None and digest is not None \
                and digest != expected_sha256.lower():
            raise ProtocolError(f"{self.what} arrived damaged: its SHA-256 does not match")
        return digest


class _Spool(Offered):
    """Exactly ``size`` bytes into a fresh hidden file (see :class:`Offered`).

    ``write`` may be called from a worker thread (one at a time); ``data`` may be any buffer.
    """

    def __init__(self, directory: str, name: str, size: int, what: str, *,
                 drop_kept: bool = False) -> None:
        super().__init__(size, what)
        try:
            self.path, self._fd = self._claim(directory, name, drop_kept)
        except OSError as err:
            raise io_error(err, f"creating a temporary file in {directory!r}") from None
        self.direct_io = size >= DIRECT_MIN_SIZE  # see _DirectWriter
        self._direct: _DirectWriter | None = None
        self._writeback_from = 0  # page-cache writes: where the last write-back request ended
        self._writeback: _WriteBack | None = None

    def _claim(self, directory: str, name: str, drop_kept: bool) -> tuple[str, int]:
        return partials.claim_file(directory, name, drop_kept=drop_kept)

    def write(self, data: bytes | memoryview) -> None:
        self._admit(data)
        if self.direct_io:  # decided now, so the caller may still say no before the first byte
            self.direct_io = False
            self._direct = _DirectWriter.open(self._fd)
        try:
            if self._direct is not None:
                self._direct.write(data)
            else:
                write_all(self._fd, data)
                end = self.received + len(data)
                if end >= self._writeback_from + writeback_step(self.size - end):
                    self._start_writeback(end)
        except OSError as err:
            raise io_error(err, f"writing {self.what}") from None
        self._count(data)

    def _start_writeback(self, end: int) -> None:
        self._writeback_from = end
        if self._writeback is None:
            self._writeback = _WriteBack.start(self._fd)
        if self._writeback is not None:
            self._writeback.ask(end)

    def complete(self, expected_sha256: str | None) -> str | None:
        """Check the count (and hash, if known), flush to disk and close; return the hex digest
        (None when not hashing)."""
        digest = self._checked_digest(expected_sha256)
        try:
            if self._direct is not None:
                direct, self._direct = self._direct, None
                direct.finish()
            self._stop_writeback()
            os.fsync(self._fd)
        except OSError as err:
            raise io_error(err, f"writing {self.what}") from None
        finally:
            self.close()
        return digest

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._direct is not None:
                self._direct.close()
                self._direct = None
            self._stop_writeback()  # before the descriptor number can be reused
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def _stop_writeback(self) -> None:
        if self._writeback is not None:
            self._writeback.stop()
            self._writeback = None

    def discard(self) -> None:
        self.close()
        _unlink_quietly(self.path)


class SinkState(Enum):
    """Where a sink is in its life; every input goes through :data:`SINK_MOVES`."""

    OPEN = auto()
    FINISHED = auto()  # published under the final name: nothing left to clean up
    ABORTED = auto()  # everything temporary removed


SINK_MOVES: dict[tuple[SinkState, str], SinkState] = {
    (SinkState.OPEN, "write"): SinkState.OPEN,
    (SinkState.OPEN, "finish"): SinkState.FINISHED,
    (SinkState.OPEN, "abort"): SinkState.ABORTED,
    # Cleanup paths may abort again, or after a finish (leaving a ``with`` block): no-ops.
    **{(ended, "abort"): ended for ended in (SinkState.ABORTED, SinkState.FINISHED)},
}
"""The sink's transitions: data and the end only while open, abort always (idempotent).

An input missing here is a bug in the caller (the transit layer writing after the end, say)
and raises one :class:`~hilltop.errors.LocalError` naming the sink, the input and the state."""


class Sink:
    """Shared lifecycle: any failure in write/finish removes every temporary file, then raises."""

    target: str
    _spool: Offered  # a file, the folder a zip unpacks into, or a caller's stream
    _state = SinkState.OPEN

    @property
    def state(self) -> SinkState:
        return self._state

    @property
    def received(self) -> int:
        return self._spool.received

    @property
    def temp_path(self) -> str:
        return self._spool.path

    @property
    def resume_offset(self) -> int:
        """Bytes kept from an earlier receive (0 unless :class:`ResumableFileSink`)."""
        return 0

    def skip_hash(self) -> None:
        """Do not hash what arrives: both peers agreed the records authenticate it already
        (:func:`hilltop.transit.records.whole_file_sha256`). Only before the first byte."""
        if self._spool.received:
            raise LocalError("internal error: skip_hash() after data arrived")
        self._spool.hash = None

    def without_direct_io(self) -> None:
        """Write through the page cache, never O_DIRECT. Only before the first byte.

        For a v1 (official or Go) sender: it paces the transfer with 16 KiB records, and there
        the disk thread and the staging copies cost our receiver more than they save. Between
        official 0.24 and us, 5 of 5 A/B runs of 1 GiB on the loaded bench machine finished
        sooner through the page cache (4.1-6.2 s against 4.6-7.8 s, pair by pair); between
        two hilltop peers the two cost about the same CPU and O_DIRECT is kept. Bytes kept
        from an earlier receive (:attr:`resume_offset`) are no data of this one: a hilltop
        peer listing ``resume-v1`` without ``big-records`` sends v1 records and resumes.
        """
        if self._spool.received > self.resume_offset:
            raise LocalError("internal error: without_direct_io() after data arrived")
        self._spool.direct_io = False

    def end_at(self, size: int) -> None:
        """For a stream of unknown length (opened with :data:`UNKNOWN_SIZE`): the size its
        end marker announced, which :meth:`finish` then holds the count to."""
        if size < self._spool.received:
            raise ProtocolError(f"the sender says its stream had {size} bytes, but "
                                f"{self._spool.received} arrived")
        self._spool.size = size

    def write(self, data: bytes | memoryview) -> None:
        """Append bytes from the peer. Raises ProtocolError past the offered size."""
        self._after("write")
        try:
            self._spool.write(data)
        except BaseException:
            self._spool.spoiled = True
            self.abort()
            raise

    def finish(self, expected_sha256: str | None = None) -> str | None:
        """Publish under the final name and return the SHA-256 (hex) of the bytes received
        (None after :meth:`skip_hash`).

        Raises (after cleaning up) if fewer bytes than offered arrived, if ``expected_sha256``
        is given and differs, or if something now exists at the target.
        """
        finished = self._after("finish")
        try:
            digest = self._spool.complete(expected_sha256)
            self._publish()
        except BaseException:
            self._spool.spoiled = True
            self.abort()
            raise
        self._state = finished
        return digest

    def abort(self) -> None:
        """Remove everything temporary. Safe to call twice, and a no-op after finish()."""
        was_open = self._state is SinkState.OPEN
        self._state = self._after("abort")  # first: a failing cleanup is not retried
        if was_open:
            self._cleanup()

    def _after(self, event: str) -> SinkState:
        """The state ``event`` leads to from here (:data:`SINK_MOVES`), or the internal error."""
        try:
            return SINK_MOVES[(self._state, event)]
        except KeyError:
            raise LocalError(f"internal error: cannot {event} {self.target!r}: receiving it "
                             f"already {self._state.name.lower()}") from None

    def _publish(self) -> None:
        raise NotImplementedError

    def _cleanup(self) -> None:
        self._spool.discard()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        # Leaving the block without finish() (an error, or a cancelled transfer) must not
        # leave anything behind.
        self.abort()


class FileSink(Sink):
    """Receive one file of ``filesize`` bytes to the absolute path ``target``.

    ``target`` normally comes from :func:`hilltop.transfer.targets.target_path`. Bytes go to
    ``.NAME.hilltop-part`` beside it, which becomes ``NAME`` in :meth:`finish`.
    """

    dropped_kept = 0
    """After :meth:`finish`: bytes of partials kept for resuming this name that were removed,
    since the complete file now holds it (:func:`hilltop.transfer.partials.drop_kept_before`);
    the caller says so."""

    def __init__(self, target: str, filesize: int, *, drop_kept: bool = False) -> None:
        self.target = os.path.abspath(target)
        self.filesize = filesize
        name = os.path.basename(self.target)
        self._spool = _Spool(os.path.dirname(self.target), name, filesize, repr(name),
                             drop_kept=drop_kept)

    def _publish(self) -> None:
        publish_file(self._spool.path, self.target)
        directory, name = os.path.split(self.target)
        self.dropped_kept = partials.drop_kept_before(directory, name, self._spool.path)


class _KeptSpool(_Spool):
    """A :class:`_Spool` kept for resuming (``resume-v1``): it may start at an offset, its
    record beside it is written up front and every :data:`resume.RECORD_EVERY` bytes, and
    an interrupted receive keeps both (unless what was written failed a check)."""

    def __init__(self, directory: str, name: str, filename: str, size: int,
                 what: str) -> None:
        self._filename = filename
        super().__init__(directory, name, size, what)
        if self.kept.offset and self.direct_io:
            # O_DIRECT writes need an aligned file offset: give back up to 1 MiB of the kept
            # bytes rather than the page-cache cost _DirectWriter avoids on all the rest
            aligned = self.kept.offset - self.kept.offset % DIRECT_CHUNK
            if aligned:
                try:
                    os.ftruncate(self._fd, aligned)
                    os.lseek(self._fd, aligned, os.SEEK_SET)
                except OSError as err:
                    self.close()
                    raise io_error(err, f"writing {self.what}") from None
                self.kept.offset = aligned
            else:
                self.direct_io = False
        self.received = self.kept.offset
        self._recorded = self.received
        self._record()

    def _claim(self, directory: str, name: str, drop_kept: bool) -> tuple[str, int]:
        self.kept = partials.claim_resumable(directory, name, self._filename, self.size)
        try:
            st = os.fstat(self.kept.fd)
        except OSError:
            os.close(self.kept.fd)
            raise
        self._identity = st.st_dev, st.st_ino  # recorded: see partials.is_ours
        return self.kept.path, self.kept.fd

    def _record(self) -> None:
        try:
            partials.write_record(self.path, resume.PartialRecord(
                self._filename, self.size, self.received, time.time(), *self._identity))
        except OSError as err:
            raise io_error(err, f"writing the resume record of {self.what}") from None

    def write(self, data: bytes | memoryview) -> None:
        super().write(data)
        if self.received - self._recorded >= resume.RECORD_EVERY:
            self._recorded = self.received
            self._record()

    def prove_prefix(self, salt: bytes) -> resume.PrefixProof:
        """Read back the kept bytes once: the proof to compare, and the hash to go on with."""
        proof = resume.PrefixProof(salt)
        done = 0
        while done < self.kept.offset:
            chunk = os.pread(self._fd, min(PROOF_CHUNK, self.kept.offset - done), done)
            if not chunk:
                raise LocalError(f"the partial of {self.what} got shorter while checking it")
            proof.update(chunk)
            done += len(chunk)
        return proof

    def restart(self, hashed: bool) -> None:
        """Forget the kept bytes: start from zero."""
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        self.received = self._recorded = 0
        self.hash = hashlib.sha256() if hashed else None
        self._record()

    def discard(self) -> None:
        if self.spoiled or not self.received:
            self.spoiled = True  # nothing worth keeping
            super().discard()
            partials.remove_record(self.path)
            return
        self.close()  # drops whatever O_DIRECT had staged: the file holds what was written
        with contextlib.suppress(LocalError):
            self._record()

    def published(self) -> None:
        partials.remove_record(self.path)


PROOF_CHUNK = 1024 * 1024
"""Bytes read back per call while proving a kept prefix."""


class ResumableFileSink(FileSink):
    """A :class:`FileSink` whose partial survives an interruption, to be continued by a later
    send of the same file (both peers list ``resume-v1``; :mod:`hilltop.transfer.resume`).

    After :meth:`prove_prefix` and the peer's proof, the caller says :meth:`resume_at`.
    """

    _spool: _KeptSpool

    def __init__(self, target: str, filename: str, filesize: int) -> None:
        self.target = os.path.abspath(target)
        self.filesize = filesize
        name = os.path.basename(self.target)
        self._spool = _KeptSpool(os.path.dirname(self.target), name, filename, filesize,
                                 repr(name))
        self._prefix: resume.PrefixProof | None = None

    @property
    def resume_offset(self) -> int:
        return self._spool.kept.offset

    @property
    def kept_bytes(self) -> int:
        """After an interrupted receive: the bytes kept for a later one to continue."""
        spool = self._spool
        return spool.received if self.state is SinkState.ABORTED and not spool.spoiled else 0

    @property
    def restart_reason(self) -> str:
        """Why a partial that was there is not continued ("" if none was, or it is)."""
        return self._spool.kept.why

    def prove_prefix(self, salt: bytes) -> str:
        """``SHA-256(salt || kept bytes)`` (reads them back: run it off the reactor)."""
        self._prefix = self._spool.prove_prefix(salt)
        return self._prefix.proof()

    def resume_at(self, offset: int, hashed: bool) -> None:
        """Continue after ``offset`` kept bytes (the proofs matched: the salted hash goes on
        over the rest, ``SHA-256(salt || file)``) or, with 0, start over (hashing only if
        ``hashed``)."""
        if offset:
            assert self._prefix is not None and offset == self._spool.received
            self._spool.hash = self._prefix.whole
        else:
            self._spool.restart(hashed)
        self._prefix = None

    def _publish(self) -> None:
        super()._publish()
        self._spool.published()


def publish_file(temp: str, target: str) -> None:
    """Give the complete file ``temp`` its final name ``target``, never overwriting one that
    exists (also one that appeared while we received)."""
    try:
        # A hard link fails if the name exists, so no race can make us overwrite anything.
        os.link(temp, target, follow_symlinks=False)
    except FileExistsError:
        raise appeared(target) from None
    except OSError:
        # Filesystems without hard links (FAT, some network mounts): check, then rename.
        if os.path.lexists(target):
            raise appeared(target) from None
        try:
            os.replace(temp, target)
        except OSError as err:
            raise io_error(err, f"saving {target!r}") from None
        return
    _unlink_quietly(temp)


def appeared(target: str) -> RejectedError:
    return RejectedError(f"{target!r} appeared while receiving; refusing to overwrite it")


class _Passthrough(Offered):
    """Exactly ``size`` bytes into a caller's writable object (see :class:`Offered`)."""

    def __init__(self, fileobj: Any, size: int, what: str) -> None:
        super().__init__(size, what)
        self.path = ""  # nothing of ours on disk
        self.direct_io = False  # the caller's object does its own writing
        self._file = fileobj

    def write(self, data: bytes | memoryview) -> None:
        self._admit(data)
        self._file.write(data)
        self._count(data)

    def complete(self, expected_sha256: str | None) -> str | None:
        digest = self._checked_digest(expected_sha256)
        self.close()
        return digest

    def close(self) -> None:
        self._closed = True

    def discard(self) -> None:
        self.close()  # the object belongs to the caller: nothing to remove


class StreamSink(Sink):
    """Received bytes go straight to a caller's writable object (library use, no renaming).

    The caller owns the object, so on failure there is nothing to delete; ``finish`` still
    refuses a short stream, so a truncated transfer is never reported as complete.
    """

    def __init__(self, fileobj: Any, size: int) -> None:
        self.target = str(getattr(fileobj, "name", "<stream>"))
        self.size = size
        self._spool = _Passthrough(fileobj, size, repr(self.target))

    def _publish(self) -> None:
        """Nothing to rename: the bytes are already where the caller wanted them."""
