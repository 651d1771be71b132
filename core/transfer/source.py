"""Sender side: turn a path into a v1 offer plus a byte stream of exactly the offered size.

A file is read as it is. A directory is streamed as a zip built on the fly
(:mod:`hilltop.transfer.zipwriter`): entries are STORED, as official 0.24's are, so the final
``zipsize`` is known before the first byte is read and no temporary copy of the tree is ever
made. Small files are read whole before their header goes out (so it can carry their CRC-32);
big ones go straight from the file into the caller's buffer.

Choices that differ from, or pin down, official 0.24:

* **Symlinks are followed**, as official does: a link to a file is sent as a regular file with
  the target's contents, a link to a directory is walked. A directory reached twice (a link
  loop, or two links to one place) is walked only the first time. Broken links are unsendable.
* Like official, only *empty* directories get their own entry (so they survive the trip);
  other directories are implied by their contents and arrive with default permissions.
  Receivers depend on this shape: wormhole-william's receiver writes every entry as a file and
  compares the entry count with ``numfiles`` (non-directory entries), and official 0.24 chmods
  each directory entry as soon as it has unpacked it, so an entry for a read-only directory
  placed before its contents would make the rest fail.
* FIFOs, sockets and devices inside a directory are unsendable: reading a FIFO would hang.
* Anything unsendable raises :class:`~hilltop.errors.UnsendableError` while the offer is being
  built, before the peer hears of it. With ``skip_unsendable=True`` (the CLI's
  ``--ignore-unsendable-files``) it is left out and listed in :attr:`Source.skipped`.
* If a file changes size after the offer was made, or is written while it is read (same
  size, new bytes), reading fails with ``UnsendableError`` (:class:`Watch`) before
  the transfer's last bytes leave, instead of sending a stream whose length disagrees with
  the offer or a mix of old and new bytes. Nothing is re-sent: the user sends it again.

Hashing is the transit layer's job (it hashes what it actually sends); this module only reads.
"""

from __future__ import annotations

import errno
import os
import stat
import time
import zlib
from collections.abc import Callable, Generator, Iterator
from typing import BinaryIO

from hilltop.errors import UnsendableError
from hilltop.transfer.entrynames import MAX_PATH_BYTES, MAX_PATH_DEPTH, clash_key
from hilltop.transfer.manifest import FilesOffer
from hilltop.transfer.offers import DIRECTORY_MODE, DirectoryOffer, FileOffer
from hilltop.transfer.resume import PrefixProof
from hilltop.transfer.zipwriter import Entry, ZipLayout


class Source:
    """What we send: the offer to announce and a reader that yields exactly ``size`` bytes.

    ``read(n)`` returns at most ``n`` bytes and ``b""`` only once all ``size`` bytes were read.
    Use as a context manager, or call :meth:`close`.
    """

    offer: FileOffer | DirectoryOffer | FilesOffer
    path: str
    skipped: tuple[str, ...] = ()

    def __init__(self, offer: FileOffer | DirectoryOffer | FilesOffer, path: str) -> None:
        self.offer = offer
        self.path = path
        self.position = 0

    @property
    def size(self) -> int:
        """Bytes on the wire: ``filesize`` or ``zipsize``."""
        if isinstance(self.offer, FileOffer):
            return self.offer.filesize
        if isinstance(self.offer, FilesOffer):
            return self.offer.numbytes
        return self.offer.zipsize

    def read(self, n: int) -> bytes:
        raise NotImplementedError

    def readinto(self, buffer: memoryview | bytearray) -> int:
        """Fill the start of ``buffer`` with the next bytes; returns how many (0 only at the end).

        The bulk data path reads this way into one reused buffer (no allocation per record).
        """
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        """Release open files; safe to call twice."""

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileSource(Source):
    """A regular file (or a block device, sent as a file as official does)."""

    def __init__(self, offer: FileOffer, path: str, fileobj: BinaryIO,
                 watch: Watch | None = None) -> None:
        super().__init__(offer, path)
        self._file = fileobj
        self._watch = watch  # None: not a regular file we opened (a device, a caller's object)

    def _watch_read(self, got: int) -> None:
        """Fail if the file was written meanwhile (:class:`Watch`): now and then, and always
        before the last bytes go out."""
        if self._watch is not None:
            self._watch.read(got)
            if self.position + got >= self.size:
                self._watch.check()

    def read(self, n: int) -> bytes:
        want = min(n, self.size - self.position)
        if want <= 0:
            return b""
        try:
            data = self._file.read(want)
        except OSError as err:
            raise UnsendableError(f"cannot read {self.path!r}: {err.strerror}") from None
        if not data:
            # A file that grew is sent only up to the offered size (the receiver gets exactly
            # what it accepted); one that shrank cannot be honoured.
            raise UnsendableError(f"{self.path!r} got shorter while it was being sent")
        self._watch_read(len(data))
        self.position += len(data)
        return data

    def readinto(self, buffer: memoryview | bytearray) -> int:
        want = min(len(buffer), self.size - self.position)
        if want <= 0:
            return 0
        into = getattr(self._file, "readinto", None)
        if into is None:  # a caller's object without readinto (library send_stream)
            return super().readinto(memoryview(buffer)[:want])
        try:
            got = into(memoryview(buffer)[:want])
        except OSError as err:
            raise UnsendableError(f"cannot read {self.path!r}: {err.strerror}") from None
        if not got:
            raise UnsendableError(f"{self.path!r} got shorter while it was being sent")
        self._watch_read(got)
        self.position += got
        return got

    def prove_prefix(self, offset: int, salt: bytes) -> PrefixProof:
        """``SHA-256(salt || first offset bytes)`` for a receiver that wants to resume
        (:mod:`hilltop.transfer.resume`), a hash state to go on with over the rest.
        Reads with ``pread``: the stream position is untouched. Runs on a thread."""
        proof = PrefixProof(salt)
        fd = self._file.fileno()
        done = 0
        while done < offset:
            try:
                chunk = os.pread(fd, min(PROOF_CHUNK, offset - done), done)
            except OSError as err:
                raise UnsendableError(f"cannot read {self.path!r}: {err.strerror}") from None
            if not chunk:
                raise UnsendableError(f"{self.path!r} got shorter while it was being sent")
            proof.update(chunk)
            done += len(chunk)
        return proof

    def skip_to(self, offset: int) -> None:
        """Send from ``offset`` on: the receiver kept (and we proved) what comes before."""
        try:
            self._file.seek(offset)
        except OSError as err:
            raise UnsendableError(f"cannot read {self.path!r}: {err.strerror}") from None
        self.position = offset

    def close(self) -> None:
        self._file.close()


PROOF_CHUNK = 1024 * 1024
"""Bytes read per call while proving a prefix."""


class DirectorySource(Source):
    """A directory streamed as a sized zip; see the module docstring for what goes in.

    Bytes come from :meth:`_pieces` (headers, small files read whole, the central
    directory); a big file's data is read straight into the caller's buffer.
    """

    def __init__(self, offer: DirectoryOffer, path: str, layout: ZipLayout,
                 paths: list[str], skipped: tuple[str, ...]) -> None:
        super().__init__(offer, path)
        self.skipped = skipped
        self._layout = layout
        self._paths = paths  # of each entry, to open it
        self._pieces_left: Generator[bytes | memoryview | _Streamed, None, None] | None = None
        self._rest: bytes | memoryview = b""  # the unread tail of the current piece
        self._streaming: _Streamed | None = None  # the big file being read, if any

    def read(self, n: int) -> bytes:
        if n <= 0:
            return b""
        buffer = bytearray(min(n, max(self.size - self.position, 0)))
        got = self.readinto(buffer)
        return bytes(buffer) if got == len(buffer) else bytes(buffer[:got])

    def readinto(self, buffer: memoryview | bytearray) -> int:
        view = memoryview(buffer)
        want = min(len(view), self.size - self.position)
        filled = 0
        while filled < want:
            if self._rest:
                take = min(len(self._rest), want - filled)
                view[filled : filled + take] = self._rest[:take]
                self._rest = self._rest[take:]
                filled += take
            elif self._streaming is not None and self._streaming.left:
                filled += self._streaming.read_into(view[filled:want])
            else:
                self._rest = self._next_piece()
        self.position += filled
        return filled

    def _next_piece(self) -> bytes | memoryview:
        self._streaming = None  # the last big file is done: the generator checks and closes it
        if self._pieces_left is None:
            self._pieces_left = self._pieces()
        piece = next(self._pieces_left, None)
        if piece is None:  # every size is fixed in advance: cannot happen
            raise UnsendableError(f"{self.path!r}: the zip ended before its offered size")
        if isinstance(piece, _Streamed):
            self._streaming = piece
            return b""
        return piece

    def _pieces(self) -> Generator[bytes | memoryview | _Streamed, None, None]:
        layout = self._layout
        whole = bytearray()  # one buffer for every small file, grown to the largest
        for index, (entry, path) in enumerate(zip(layout.entries, self._paths, strict=True)):
            if entry.is_dir:
                yield layout.local_header(index)
            elif layout.streamed(entry):
                yield layout.local_header(index)
                streamed = _Streamed(path, entry.size)
                try:
                    yield streamed
                    streamed.check_ended()
                finally:
                    streamed.close()
                yield layout.descriptor(index, streamed.crc)
            else:
                if len(whole) < entry.size + 1:
                    whole = bytearray(entry.size + 1)
                data = _read_whole(path, memoryview(whole)[: entry.size + 1], entry.size)
                yield layout.local_header(index, zlib.crc32(data))
                yield data
        yield from layout.central_directory()

    def close(self) -> None:
        if self._pieces_left is not None:
            self._pieces_left.close()  # closes the big file being read, if any


def changed(path: str) -> UnsendableError:
    """The one error for a file whose size or contents changed while it was being sent."""
    return UnsendableError(f"{path!r} changed while it was being sent; send it again once "
                           "nothing is writing to it")


WATCH_EVERY = 64 * 1024 * 1024
"""Bytes read between two looks at a file being sent: a big file written meanwhile fails
within this much, not only at its end; one fstat per 64 MiB costs nothing."""


class Watch:
    """Whether a file being sent is written meanwhile.

    Why: a file overwritten in place at the same size while it is read would arrive as a
    mix of old and new bytes that both sides call a success (official 0.24 does). As
    ``tar`` ("file changed as we read it"), the file's stat when opened (size, mtime and
    ctime in ns, inode, device) is compared with a fresh one every :data:`WATCH_EVERY`
    bytes and before the file's last bytes leave, so the receiver never has all of a
    mix. Any write moves mtime and ctime, to the filesystem's timestamp resolution.
    """

    def __init__(self, fd: int, path: str, opened: os.stat_result | None = None) -> None:
        self._fd = fd
        self._path = path
        self._before = _noted(opened or self._fstat())
        self._unchecked = 0

    def read(self, n: int) -> None:
        """``n`` more bytes were read: look again if it is time to."""
        self._unchecked += n
        if self._unchecked >= WATCH_EVERY:
            self.check()

    def check(self) -> None:
        """Raise :func:`changed` if the file was written since it was opened."""
        self._unchecked = 0
        if _noted(self._fstat()) != self._before:
            raise changed(self._path)

    def _fstat(self) -> os.stat_result:
        try:
            return os.fstat(self._fd)
        except OSError as err:
            raise UnsendableError(f"cannot read {self._path!r}: {err.strerror}") from None


def _noted(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def stat_argument(real: str, typed: str) -> os.stat_result:
    """``os.stat`` of a path the user named on the command line, failing as a clear
    :class:`UnsendableError` that quotes it as typed."""
    try:
        return os.stat(real)
    except FileNotFoundError:
        raise UnsendableError(f"cannot send: no file or directory named {typed!r}") from None
    except OSError as err:
        raise UnsendableError(f"cannot send {typed!r}: {err.strerror}") from None


def _open_without_blocking(path: str) -> int:
    """``os.open`` for reading that returns at once: a FIFO put in a file's place after we
    looked must not hang the sender waiting for a writer; for regular files the flag does
    nothing. Raises OSError."""
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)


def _open_for_reading(path: str) -> int:
    # a FIFO opened here (inside a folder) reads as empty: "changed while it was being sent"
    try:
        return _open_without_blocking(path)
    except OSError as err:
        raise UnsendableError(f"cannot read {path!r}: {err.strerror}") from None


def _read_into(fd: int, path: str, view: memoryview) -> int:
    try:
        return os.readv(fd, [view])
    except OSError as err:
        raise UnsendableError(f"cannot read {path!r}: {err.strerror}") from None


def _read_whole(path: str, room: memoryview, size: int) -> memoryview:
    """The ``size`` bytes of the file at ``path``, read into ``room`` (one byte bigger, so a
    file that grew is noticed)."""
    fd = _open_for_reading(path)
    try:
        watch = Watch(fd, path)
        got = 0
        while got < len(room):
            n = _read_into(fd, path, room[got:])
            if not n:
                break
            got += n
        if got != size:
            raise changed(path)
        watch.check()
    finally:
        os.close(fd)
    return room[:size]


class _Streamed:
    """A big member's file, read straight into the sender's buffer."""

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self.left = size
        self.crc = 0
        self._fd: int | None = _open_for_reading(path)
        try:
            self._watch = Watch(self._fd, path)
        except UnsendableError:
            self.close()
            raise

    def read_into(self, view: memoryview) -> int:
        assert self._fd is not None
        into = view[: self.left]
        n = _read_into(self._fd, self.path, into)
        if not n:
            raise changed(self.path)
        self.crc = zlib.crc32(into[:n], self.crc)
        self.left -= n
        self._watch.read(n)
        return n

    def check_ended(self) -> None:
        assert self._fd is not None
        if _read_into(self._fd, self.path, memoryview(bytearray(1))):
            raise changed(self.path)
        self._watch.check()  # the zip's end is still to come: a mix never arrives whole

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def open_source(path: str, *, cwd: str | None = None,
                skip_unsendable: bool = False) -> Source:
    """Open ``path`` (relative to ``cwd``) for sending.

    The offered name is the last component of the path as typed, not of its symlink target:
    sending a link ``X -> Y`` offers ``X``. Raises :class:`UnsendableError` for a missing,
    unreadable or special path, and for unsendable entries inside a directory unless
    ``skip_unsendable`` is set.
    """
    typed = os.path.join(cwd or os.getcwd(), path)
    name = os.path.basename(os.path.normpath(typed))
    real = os.path.realpath(typed)
    if not name:
        raise UnsendableError(f"cannot send {path!r}: it has no name to offer")
    check_utf8(name, path)
    st = stat_argument(real, path)
    if stat.S_ISDIR(st.st_mode):
        return _open_directory(real, name, skip_unsendable)
    if not _is_sendable_file(st):
        raise UnsendableError(f"cannot send {path!r}: not a regular file or directory")
    fileobj, st = _open_file(real, path)
    if stat.S_ISREG(st.st_mode):
        size, watch = st.st_size, Watch(fileobj.fileno(), real, st)
    else:  # a block device: its node's times do not follow writes to it
        size, watch = fileobj.seek(0, os.SEEK_END), None
    fileobj.seek(0)
    return FileSource(FileOffer(name, size), real, fileobj, watch)


def _is_sendable_file(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) or stat.S_ISBLK(st.st_mode)


def _open_file(real: str, typed: str) -> tuple[BinaryIO, os.stat_result]:
    """Open the file that ``open_source`` found and return it with its ``fstat``.

    Between the ``stat`` and the ``open`` the path may have become a FIFO (whose plain open
    would wait for a writer forever) or a folder: the open does not block, and the type
    that counts is the one of what was opened.
    """
    try:
        fd = _open_without_blocking(real)
    except OSError as err:
        raise UnsendableError(f"cannot send {typed!r}: {err.strerror}") from None
    st = os.fstat(fd)
    if not _is_sendable_file(st):
        os.close(fd)
        raise UnsendableError(f"cannot send {typed!r}: it changed into something that is not "
                              "a regular file while it was being opened")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb"), st


def check_utf8(name: str, shown: str) -> None:
    # Undecodable bytes in a name arrive as surrogate escapes; they cannot go into JSON or zip
    # names in a way any peer would read back correctly.
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsendableError(f"cannot send {shown!r}: its name is not valid UTF-8") from None


class Unsendable:
    """What to do about an entry that cannot be sent: fail, or (``skip=True``, the CLI's
    ``--ignore-unsendable-files``) leave it out and list it in :attr:`skipped`."""

    def __init__(self, skip: bool) -> None:
        self.skip = skip
        self.skipped: list[str] = []

    def __call__(self, where: str, why: str) -> None:
        message = f"{where}: {why}"
        if not self.skip:
            raise UnsendableError(f"cannot send {message}")
        self.skipped.append(message)


def _open_directory(root: str, name: str, skip_unsendable: bool) -> DirectorySource:
    unsendable = Unsendable(skip_unsendable)
    return folder_source(root, name, list(walk(root, unsendable)), tuple(unsendable.skipped))


Walked = tuple[str, str, os.stat_result]
"""``(path, arcname, stat)`` of one entry, as :func:`walk` yields them."""


def folder_source(path: str, name: str, walked: list[Walked],
                  skipped: tuple[str, ...] = ()) -> DirectorySource:
    """A folder offer named ``name`` whose zip holds ``walked`` (arcnames as given)."""
    entries: list[Entry] = []
    paths: list[str] = []
    numbytes = numfiles = 0
    for full, rel, st in walked:
        entry = Entry(rel, st.st_size if stat.S_ISREG(st.st_mode) else 0, st.st_mode,
                      time.localtime(st.st_mtime)[:6])
        entries.append(entry)
        paths.append(full)
        if not entry.is_dir:
            numbytes += entry.size
            numfiles += 1
    layout = ZipLayout(entries)
    offer = DirectoryOffer(dirname=name, zipsize=layout.size, numbytes=numbytes,
                           numfiles=numfiles, mode=DIRECTORY_MODE)
    return DirectorySource(offer, path, layout, paths, skipped)


def walk(root: str, unsendable: Callable[[str, str], None], *, prefix: str = ""
         ) -> Iterator[tuple[str, str, os.stat_result]]:
    """Yield ``(path, arcname, stat)`` for each entry (a folder's arcname ends with "/"),
    arcnames starting with ``prefix`` ("" or a name and "/").

    Top-down and sorted, so zips of the same tree are the same. Iterative, not
    ``os.walk`` (which recursed once per level on Python 3.11: a tree 1,500 folders deep
    raised RecursionError). What a hilltop receiver refuses (:mod:`hilltop.transfer.entrynames`)
    is unsendable here, before the code is shown: a name that clashes with a sibling's, and
    a path nested more than :data:`MAX_PATH_DEPTH` levels or longer than
    :data:`MAX_PATH_BYTES`; the walk goes no deeper than that limit.
    """
    def key(st: os.stat_result) -> tuple[int, int]:
        return (st.st_dev, st.st_ino)

    visited = {key(os.stat(root))}
    # (folder path, its arcname without the trailing "/", its stat; None for root)
    todo: list[tuple[str, str, os.stat_result | None]] = [(root, prefix.rstrip("/"), None)]
    while todo:
        dirpath, folder, folder_stat = todo.pop()
        listed = _listed(dirpath, unsendable)
        if listed is None:
            continue  # unreadable: reported, and not sent as an empty folder
        dirnames, filenames = listed
        keep = []
        for dirname in dirnames:
            full = os.path.join(dirpath, dirname)
            try:
                st = os.stat(full)
            except OSError as err:
                unsendable(full, err.strerror or str(err))
                continue
            if key(st) in visited:
                continue  # a symlink loop, or a second link to a directory already sent
            visited.add(key(st))
            rel = f"{folder}/{dirname}" if folder else dirname
            if _fits(rel, full, unsendable):
                keep.append((full, rel, st))
        sent_any = False
        for filename in filenames:
            full = os.path.join(dirpath, filename)
            rel = f"{folder}/{filename}" if folder else filename
            file_st = _sendable_file(full, unsendable)
            if (file_st is not None and _utf8_ok(rel, full, unsendable)
                    and _fits(rel, full, unsendable)):
                sent_any = True
                yield full, rel, file_st
        # Only empty directories get an entry (others are implied by their contents), exactly
        # as official senders do: see the module docstring for why.
        if (folder_stat and not sent_any and not keep
                and _utf8_ok(folder, dirpath, unsendable)):
            yield dirpath, folder + "/", folder_stat
        todo.extend(reversed(keep))  # popped in sorted order: depth first, as os.walk


def _listed(dirpath: str, unsendable: Callable[[str, str], None]
            ) -> tuple[list[str], list[str]] | None:
    """The sorted names of the folders and of everything else in ``dirpath`` (links
    followed, as ``os.walk(followlinks=True)`` sorts them), leaving out, as unsendable,
    any name that clashes with an earlier sibling's (the rule of
    :class:`hilltop.transfer.entrynames.Claims`); None (reported) if it cannot be read."""
    try:
        with os.scandir(dirpath) as entries:
            found = sorted((entry.name, _is_dir(entry)) for entry in entries)
    except OSError as err:
        unsendable(dirpath, err.strerror or str(err))
        return None
    dirnames: list[str] = []
    filenames: list[str] = []
    claimed: dict[str, str] = {}
    for name, is_dir in found:
        key = clash_key(name)
        earlier = claimed.get(key)
        if earlier is not None:
            unsendable(os.path.join(dirpath, name),
                       f"clashes with {ascii(earlier)} (one name on case-insensitive or "
                       "Unicode-normalising disks)")
            continue
        claimed[key] = name
        (dirnames if is_dir else filenames).append(name)
    return dirnames, filenames


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False  # reported when it is looked at as a file


def _fits(rel: str, full: str, unsendable: Callable[[str, str], None]) -> bool:
    """Whether ``rel`` is shallow and short enough for a hilltop receiver to create."""
    if rel.count("/") >= MAX_PATH_DEPTH:
        unsendable(_abridged(full), f"is nested more than {MAX_PATH_DEPTH} folders deep")
        return False
    if len(rel.encode("utf-8", errors="surrogateescape")) > MAX_PATH_BYTES:
        unsendable(_abridged(full), f"has a path longer than {MAX_PATH_BYTES} bytes")
        return False
    return True


def _abridged(path: str) -> str:
    """A path short enough for one line of an error message."""
    return path if len(path) <= 160 else f"{path[:60]}...{path[-60:]}"


def _utf8_ok(rel: str, full: str, unsendable: Callable[[str, str], None]) -> bool:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        unsendable(ascii(full), "name is not valid UTF-8")
        return False
    return True


def _sendable_file(full: str, unsendable: Callable[[str, str], None]
                   ) -> os.stat_result | None:
    """The stat of a readable regular file (following links), else report it and None."""
    try:
        st = os.stat(full)
    except FileNotFoundError:
        unsendable(full, "broken symlink" if os.path.islink(full) else "vanished")
        return None
    except OSError as err:
        unsendable(full, err.strerror or str(err))
        return None
    if not stat.S_ISREG(st.st_mode):
        unsendable(full, "not a regular file")
        return None
    # access(), not a trial open(): one system call and no descriptor per file of a big tree
    if not os.access(full, os.R_OK, effective_ids=_EFFECTIVE_IDS):
        unsendable(full, os.strerror(errno.EACCES))
        return None
    return st


_EFFECTIVE_IDS = os.access in os.supports_effective_ids  # check as open() would, set-uid too
