"""Hidden temporaries for what is being received, and clearing those a dead receiver left.

A receiver fills ``.NAME.hilltop-part`` (a file) or ``.NAME.hilltop-dir`` (a folder) beside
the target and renames it only once everything arrived and checked out. A receiver that is
killed (SIGKILL, a crash, a power cut) cannot remove its own, and such leftovers piled up
under ``.NAME.1.hilltop-part``, ``.NAME.2...``, each as big as that transfer had got.

So a receiver holds an ``flock`` on its temporary for as long as it fills it, and a later
one that finds the name taken removes what is there only if nobody holds that lock and it
has not changed for :data:`STALE_AFTER` seconds (the age closes the instant between a live
receiver creating the name and locking it). Anything else (a live receiver's temporary, a
symlink, a file where a folder is expected) is left alone and the next name is used. Where
locks are not available nothing is ever removed.

A partial kept for resuming (``resume-v1``, :mod:`hilltop.transfer.resume`) has a record
``.NAME.hilltop-resume`` beside it. Other receives of that name leave it alone for
:data:`hilltop.transfer.resume.KEEP_FOR` (they use the next name), unless told to drop it
(``--no-resume``); a resumable receive takes it over (:func:`claim_resumable`). Once a
complete file holds the name, a kept partial of it can never be continued, so it goes
(:func:`drop_kept_before`).

"Created exclusively" is the rule for every file written here: a new name is created with
``O_EXCL`` (the record too: a fresh ``.new`` name, then a rename), and an existing file is
written into only when it is a kept partial that is provably ours (:func:`is_ours`). The
folder may be writable by others, and a hard link planted under one of our names would
otherwise make us fill, and hand over, the file it links to (``O_NOFOLLOW`` stops symlinks,
not hard links). Removing a name is always safe: it never touches the file behind it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from hilltop.errors import LocalError
from hilltop.transfer import resume
from hilltop.transfer.entrynames import MAX_NAME_BYTES

try:
    import fcntl
except ImportError:  # Windows: no flock, so leftovers are never removed
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")

STALE_AFTER = 30.0
"""Seconds a leftover must be unchanged (and unlocked) before a receiver removes it."""
FILE_TAG = "hilltop-part"
FOLDER_TAG = "hilltop-dir"
RECORD_TAG = "hilltop-resume"
OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(
    os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
"""How every received file is created: exclusively, never through a symlink."""
_PEEK_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(
    os, "O_NONBLOCK", 0)


class Claim:
    """The lock on a folder temporary we fill (a file's lock lives on its own descriptor)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    def release(self) -> None:
        """Let go of the lock (safe to call twice): the temporary is renamed or removed."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def claim_file(directory: str, name: str, *, drop_kept: bool = False) -> tuple[str, int]:
    """Create ``.NAME.hilltop-part`` (or the first free ``.NAME.N.hilltop-part``) in
    ``directory``; returns its path and a write descriptor that holds its lock.
    ``drop_kept`` removes an unlocked partial kept for resuming, whatever its age.
    Raises OSError (or LocalError after 100 names)."""
    def remove(path: str) -> None:
        os.unlink(path)
        remove_record(path)

    path, fd = _create(directory, name, FILE_TAG, lambda p: os.open(p, OPEN_FLAGS, 0o666),
                       stat.S_ISREG, remove, kept=resume.KEEP_FOR if not drop_kept else 0.0)
    _lock(fd)
    remove_record(path)  # the name is ours: a record beside it lost its partial long ago
    return path, fd


class Kept:
    """A file temporary a resumable receive fills: ``offset`` bytes of an earlier receive
    are kept in it (0: a fresh start; ``why`` then says why an existing one was not
    continued, or is empty)."""

    def __init__(self, path: str, fd: int, offset: int, why: str) -> None:
        self.path = path
        self.fd = fd
        self.offset = offset
        self.why = why


def claim_resumable(directory: str, name: str, filename: str, filesize: int) -> Kept:
    """Like :func:`claim_file`, but an unlocked partial of ours under the name
    (:func:`is_ours`) is taken over: kept up to where it can continue the offer
    ``filename``/``filesize`` (its record matches), else emptied. Anything else there is
    removed if :func:`claim_file` would remove it (a new file is then created in its place),
    or passed over. The descriptor reads and writes and sits at the offset."""
    def make(path: str) -> int:
        fd = os.open(path, OPEN_FLAGS & ~os.O_WRONLY | os.O_RDWR, 0o666)
        _lock(fd)
        return fd

    def remove(path: str) -> None:
        os.unlink(path)
        remove_record(path)

    for path in _temp_names(directory, name, FILE_TAG):
        try:
            return Kept(path, make(path), 0, "")
        except FileExistsError:
            kept = _take_over(path, filename, filesize)
            if kept is not None:
                return kept
            if not _remove_if_stale(path, stat.S_ISREG, remove, resume.KEEP_FOR):
                continue
        try:  # the leftover is gone: its name is ours unless another receiver was quicker
            return Kept(path, make(path), 0, "")
        except FileExistsError:
            continue
    raise LocalError(f"too many leftover temporary files for {name!r} in {directory!r}")


def is_ours(st: os.stat_result, record: resume.PartialRecord | None) -> bool:
    """Whether the file ``st`` (an ``fstat`` of the open partial) is a partial this user's
    receive created and may write into again: a regular file with no other link, owned by
    us, whose record names it. A hard link to another file fails the link count, a file
    someone else made fails the owner, and a partial swapped for another file fails the
    record."""
    geteuid = getattr(os, "geteuid", None)
    return (stat.S_ISREG(st.st_mode) and st.st_nlink == 1
            and (geteuid is None or st.st_uid == geteuid())
            and record is not None and record.names_file(st.st_dev, st.st_ino))


def _take_over(path: str, filename: str, filesize: int) -> Kept | None:
    """The partial at ``path``, locked and positioned, or None if it is not ours to take."""
    if fcntl is None:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        held = os.fstat(fd) if _lock(fd) else None  # None: a live receiver holds it
        record = read_record(path)
        if held is None or not os.path.samestat(held, st) or not is_ours(held, record):
            os.close(fd)  # a live receiver's, or not ours: nothing is written into it
            return None
        decision = resume.decide(record, st.st_size, filename, filesize,
                                 time.time() - st.st_mtime)
        os.ftruncate(fd, decision.offset)
        os.lseek(fd, decision.offset, os.SEEK_SET)
    except OSError:
        os.close(fd)
        return None
    return Kept(path, fd, decision.offset, decision.why)


def drop_kept_before(directory: str, name: str, part: str) -> int:
    """Remove the partials kept for resuming under the hidden names tried before ``part``
    (the temporary that has just become the complete file ``name``): with that name taken,
    none of them can ever be continued. Only partials of ours (:func:`is_ours`) that no live
    receiver holds go; returns the bytes they held."""
    freed = 0
    for path in _temp_names(directory, name, FILE_TAG):
        if path == part:
            break
        if not os.path.lexists(record_path(path)):
            continue
        fd = _open_locked(path)
        if fd is None:
            continue  # gone, a symlink, or a live receiver's
        try:
            st = os.fstat(fd)
            if is_ours(st, read_record(path)) and os.path.samestat(os.lstat(path), st):
                os.unlink(path)
                remove_record(path)
                freed += st.st_size
        except OSError:
            pass
        finally:
            os.close(fd)
    return freed


def record_path(part: str) -> str:
    """``.NAME.hilltop-resume`` for ``.NAME.hilltop-part``."""
    return part[: -len(FILE_TAG)] + RECORD_TAG


def write_record(part: str, record: resume.PartialRecord) -> None:
    """Replace the record beside ``part`` in one rename, so a kill never leaves half of one.
    The new record is a new file (``O_EXCL``): whatever was at its ``.new`` name (a kill's
    leftover, or a planted hard link) is unlinked first, never written through."""
    path = record_path(part)
    new = path + ".new"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(new)
    fd = os.open(new, OPEN_FLAGS, 0o600)
    try:
        data = memoryview(record.to_bytes())
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
    os.replace(new, path)


def read_record(part: str) -> resume.PartialRecord | None:
    """The record beside ``part``, or None (missing, unreadable or not ours)."""
    try:
        fd = os.open(record_path(part), _PEEK_FLAGS)
    except OSError:
        return None
    try:
        return resume.PartialRecord.from_bytes(os.read(fd, resume.MAX_RECORD + 1))
    except OSError:
        return None
    finally:
        os.close(fd)


def remove_record(part: str) -> None:
    for path in (record_path(part), record_path(part) + ".new"):
        with contextlib.suppress(OSError):
            os.unlink(path)


def claim_folder(directory: str, name: str) -> tuple[str, Claim]:
    """Create the folder ``.NAME.hilltop-dir`` (or the first free name) and lock it."""
    path, _ = _create(directory, name, FOLDER_TAG, lambda p: os.mkdir(p, 0o777), stat.S_ISDIR,
                      remove_tree)
    # None only if an odd umask left it unreadable or locks are missing: unlocked, so it
    # could be taken for a leftover once unchanged for STALE_AFTER
    return path, Claim(_open_locked(path))


def _temp_names(directory: str, name: str, tag: str) -> Iterator[str]:
    """Hidden candidate names, shortened so they still fit in NAME_MAX."""
    room = MAX_NAME_BYTES - len(tag) - 8
    short = name.encode("utf-8")[:room].decode("utf-8", errors="ignore")
    yield os.path.join(directory, f".{short}.{tag}")
    for i in range(1, 100):
        yield os.path.join(directory, f".{short}.{i}.{tag}")


def _create(directory: str, name: str, tag: str, make: Callable[[str], T],
            is_kind: Callable[[int], bool], remove: Callable[[str], None],
            kept: float = 0.0) -> tuple[str, T]:
    for path in _temp_names(directory, name, tag):
        try:
            return path, make(path)
        except FileExistsError:
            if not _remove_if_stale(path, is_kind, remove, kept):
                continue
        try:  # the leftover is gone: its name is ours unless another receiver was quicker
            return path, make(path)
        except FileExistsError:
            continue
    raise LocalError(f"too many leftover temporary files for {name!r} in {directory!r}")


def _open_locked(path: str) -> int | None:
    """A descriptor of ``path`` holding its lock, or None if it cannot be opened or someone
    else holds the lock."""
    try:
        fd = os.open(path, _PEEK_FLAGS)
    except OSError:
        return None
    if not _lock(fd):
        os.close(fd)
        return None
    return fd


def _lock(fd: int) -> bool:
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _remove_if_stale(path: str, is_kind: Callable[[int], bool],
                     remove: Callable[[str], None], kept: float = 0.0) -> bool:
    """Remove ``path`` if it is a leftover of ours that nobody fills any more; returns
    whether the name is free now. One kept for resuming (a record beside it) must also be
    ``kept`` seconds old; with ``kept == 0`` its age does not matter (its record is written
    only under the lock, so unlocked means its receiver is gone)."""
    if fcntl is None:
        return False
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    age = time.time() - st.st_mtime
    has_record = path.endswith(FILE_TAG) and os.path.lexists(record_path(path))
    if not is_kind(st.st_mode) or age < (kept if has_record else STALE_AFTER):
        return False
    fd = _open_locked(path)
    if fd is None:
        return False  # a live receiver holds it, or it cannot be opened
    try:
        if not os.path.samestat(os.fstat(fd), st):
            return False  # replaced since the lstat: look again next time
        remove(path)
        return not os.path.lexists(path)
    except OSError:
        return False
    finally:
        os.close(fd)


def remove_tree(path: str) -> None:
    """Delete a directory we created, even if a received mode made parts of it read-only or
    unreadable. rmtree skips a folder it cannot open or list (mode 0o100, 0o300...), and its
    ``func`` is then ``os.open`` or ``os.scandir``, which cannot be retried with the path
    alone: such a folder is made readable and removed by a fresh rmtree, once."""
    retried: set[str] = set()

    def fix(func: Callable[..., object], failed: str, _exc: object) -> None:
        try:
            os.chmod(os.path.dirname(failed), 0o700)
            is_dir = os.path.isdir(failed) and not os.path.islink(failed)
            if is_dir:
                os.chmod(failed, 0o700)
            if func in (os.rmdir, os.unlink, os.remove):
                func(failed)
            elif is_dir and failed not in retried:
                retried.add(failed)
                _rmtree(failed, fix)
        except OSError:
            pass

    if os.path.isdir(path) and not os.path.islink(path):
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)
        _rmtree(path, fix)


def _rmtree(path: str, fix: Callable[[Callable[..., object], str, object], None]) -> None:
    """rmtree calling ``fix(func, path, error)`` on each failure: ``onexc`` from Python 3.12
    (``onerror``, which passes the same first two arguments, is deprecated there)."""
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=fix)
    else:
        shutil.rmtree(path, onerror=fix)
