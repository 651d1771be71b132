"""Pipes: a stream of unknown length (``stream-v1``) read from a pipe or FIFO, and stdout as
a writable for a sink.

The sender reads a pipe (``wormhole send -``, ``/dev/stdin``, a FIFO) a record at a time on
the data path's own thread, so nothing is buffered beyond the few batches in flight
(:func:`hilltop.transfer.datapath.send_until_end`); the engine then sends the end marker and
the trailer (:mod:`hilltop.transfer.streamcodec`, :mod:`hilltop.transfer.engine`).
"""

from __future__ import annotations

import contextlib
import io
import os
import select

from hilltop.errors import LocalError, TransitError, UnsendableError
from hilltop.transfer import offers

STDIN_NAME = "stdin"
"""The name a stream from ``-`` is offered under unless the sender picks one (``--name``)."""
PIPE_BUFFER = 1024 * 1024
"""The pipe buffer we ask the kernel for on a pipe we read (Linux ``F_SETPIPE_SZ``; 1 MiB is
what an unprivileged process may ask for by default): with the default 64 KiB, each read,
and so each record, held at most 64 KiB while the producer waited for us."""
_F_SETPIPE_SZ = 1031
POLL_SECONDS = 0.25
"""How often a read waiting for a silent pipe looks whether the transfer was stopped."""
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
