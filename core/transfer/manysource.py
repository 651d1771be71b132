"""Sender side of ``wormhole send A B DIR/``: several paths, one code.

The arguments are walked once (:class:`Bundle`), then sent in whichever shape the peer
takes: a hilltop peer listing ``files-v1`` gets a manifest and the files' bytes back to back
(:class:`FilesSource`, :mod:`hilltop.transfer.manifest`); any other (official 0.24,
wormhole-william, an older hilltop) one folder, the zip every client unpacks
(:func:`hilltop.transfer.source.folder_source`) with the same entries inside, named after the
arguments' common parent folder, or ``wormhole-N-items`` when they share none worth a name.

The rules for what may be sent are those of one folder (symlinks followed, only regular
files, unreadable files refused or skipped); two arguments that would arrive under one name
(``a/x.txt b/x.txt``) are refused before the code is shown.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

from hilltop._values import value
from hilltop.errors import UnsendableError
from hilltop.rendezvous import capabilities
from hilltop.rendezvous.capabilities import PeerCapabilities
from hilltop.transfer.entrynames import clash_key
from hilltop.transfer.manifest import MAX_MANIFEST_BYTES, FilesOffer, ManifestEntry
from hilltop.transfer.source import (
    DirectorySource,
    Source,
    Unsendable,
    Walked,
    Watch,
    changed,
    check_utf8,
    folder_source,
    stat_argument,
    walk,
)


@value
class Bundle:
    """Every entry of several arguments, walked once; see the module docstring."""

    walked: tuple[Walked, ...]
    items: tuple[str, ...]  # the arguments' names, as they arrive
    label: str  # the folder's name toward a peer without files-v1
    skipped: tuple[str, ...] = ()

    @property
    def numbytes(self) -> int:
        return sum(st.st_size for _, rel, st in self.walked if not rel.endswith("/"))

    @property
    def numfiles(self) -> int:
        return sum(1 for _, rel, _st in self.walked if not rel.endswith("/"))

    def manifest(self) -> FilesOffer:
        return FilesOffer(tuple(
            ManifestEntry(rel) if rel.endswith("/") else
            ManifestEntry(rel, st.st_size, stat.S_IMODE(st.st_mode) & 0o777)
            for _, rel, st in self.walked))

    def fits_manifest(self) -> bool:
        """Whether the manifest fits in one mailbox message (:data:`MAX_MANIFEST_BYTES`)."""
        return len(self.manifest().to_wire()) <= MAX_MANIFEST_BYTES

    def folder_reason(self, ours: Iterable[str], peer: PeerCapabilities) -> str | None:
        """Why this peer gets one folder rather than the manifest (None: it gets the
        manifest): it lacks ``files-v1``, or the manifest is too big for one message."""
        if peer.is_v1_only:
            return "runs an official or wormhole-william client"
        if capabilities.FILES not in peer.shared_features(ours):
            return "cannot take several files"
        if not self.fits_manifest():
            return "would need more than one message for the list"
        return None

    def source_for(self, ours: Iterable[str], peer: PeerCapabilities
                   ) -> FilesSource | DirectorySource:
        """The manifest for a ``files-v1`` peer, one folder for any other."""
        if self.folder_reason(ours, peer) is None:
            return self.files_source()
        return self.folder_source()

    def files_source(self) -> FilesSource:
        """For a ``files-v1`` peer."""
        return FilesSource(self.manifest(), [full for full, _, _ in self.walked])

    def folder_source(self) -> DirectorySource:
        """For any other peer: one folder named :attr:`label`."""
        return folder_source(self.label, self.label, list(self.walked), self.skipped)


def open_bundle(paths: list[str], *, cwd: str | None = None,
                skip_unsendable: bool = False) -> Bundle:
    """Walk ``paths`` (relative to ``cwd``); raises :class:`UnsendableError` for a missing or
    special path, for two arguments with one name, and (unless ``skip_unsendable``) for an
    unsendable entry inside a folder."""
    base = cwd or os.getcwd()
    unsendable = Unsendable(skip_unsendable)
    walked: list[Walked] = []
    names: dict[str, str] = {}  # clash key -> the argument that claimed it
    items: list[str] = []
    parents: list[str] = []
    for path in paths:
        typed = os.path.normpath(os.path.join(base, path))
        name = os.path.basename(typed)
        if not name:
            raise UnsendableError(f"cannot send {path!r}: it has no name to offer")
        check_utf8(name, path)
        earlier = names.get(clash_key(name))
        if earlier is not None:
            raise UnsendableError(f"cannot send {earlier!r} and {path!r} together: both "
                                  f"would arrive as {name!r}")
        names[clash_key(name)] = path
        items.append(name)
        parents.append(os.path.dirname(typed))
        real = os.path.realpath(typed)
        st = stat_argument(real, path)
        if stat.S_ISDIR(st.st_mode):
            found = list(walk(real, unsendable, prefix=name + "/"))
            walked.extend(found or [(real, name + "/", st)])  # an empty folder has an entry
        elif stat.S_ISREG(st.st_mode):
            if not os.access(real, os.R_OK):
                raise UnsendableError(f"cannot send {path!r}: permission denied")
            walked.append((real, name, st))
        else:
            raise UnsendableError(f"cannot send {path!r} with other files: not a regular file "
                                  "or directory")
    return Bundle(tuple(walked), tuple(items), folder_label(parents, len(paths)),
                  tuple(unsendable.skipped))


def folder_label(parents: list[str], count: int) -> str:
    """The one folder's name toward a v1 peer: the last component of the arguments' common
    parent (``~/project/a ~/project/b`` arrive in ``project``), else ``wormhole-N-items``."""
    try:
        common = os.path.commonpath(parents)
    except ValueError:
        common = ""
    name = os.path.basename(common)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        name = ""
    return name or f"wormhole-{count}-items"


class FilesSource(Source):
    """The manifest's files, read back to back: exactly ``offer.numbytes`` bytes.

    A file that changed size since it was listed, or was written while it was read, fails
    the send (as inside a folder) before its last bytes leave, rather than shifting every
    file after it or delivering a mix.
    """

    offer: FilesOffer

    def __init__(self, offer: FilesOffer, paths: list[str]) -> None:
        super().__init__(offer, paths[0] if paths else "")
        self._todo = [(path, entry.size) for path, entry in zip(paths, offer.entries,
                                                                strict=True) if entry.size]
        self._index = 0
        self._fd: int | None = None
        self._left = 0
        self._current = ""
        self._watch: Watch | None = None

    def read(self, n: int) -> bytes:
        buffer = bytearray(max(0, min(n, self.size - self.position)))
        got = self.readinto(buffer)
        return bytes(buffer[:got])

    def readinto(self, buffer: memoryview | bytearray) -> int:
        view = memoryview(buffer)
        want = min(len(view), self.size - self.position)
        filled = 0
        while filled < want:
            if self._fd is None:
                self._open_next()
            assert self._fd is not None
            n = self._read(view[filled: filled + min(want - filled, self._left)])
            if not n:
                raise changed(self._current)
            filled += n
            self._left -= n
            if self._watch is not None:
                self._watch.read(n)
            if not self._left:
                self._close_current(check_end=True)
        self.position += filled
        return filled

    def _open_next(self) -> None:
        path, size = self._todo[self._index]
        self._index += 1
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as err:
            raise UnsendableError(f"cannot read {path!r}: {err.strerror}") from None
        self._current, self._left = path, size
        self._watch = Watch(self._fd, path)

    def _read(self, view: memoryview) -> int:
        assert self._fd is not None
        try:
            return os.readv(self._fd, [view])
        except OSError as err:
            raise UnsendableError(f"cannot read {self._current!r}: {err.strerror}") from None

    def _close_current(self, *, check_end: bool) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if check_end and os.read(fd, 1):
                raise changed(self._current)
            if check_end and self._watch is not None:
                self._watch.check()
        except OSError as err:
            raise UnsendableError(f"cannot read {self._current!r}: {err.strerror}") from None
        finally:
            os.close(fd)

    def close(self) -> None:
        self._close_current(check_end=False)

