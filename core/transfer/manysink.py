"""Receiver side of a ``files-v1`` manifest: several files and folders, placed all at once.

Every entry is written into one hidden staging folder beside the targets
(``.wormhole-N-items.hilltop-dir``, claimed and locked as a folder receive's is:
:mod:`hilltop.transfer.partials`), the bytes split at the sizes the manifest gave. Only when
all of them arrived and checked out is each first-level item moved to its own name, so an
interrupted transfer leaves nothing that looks complete: the staging folder is removed, or
(killed outright) left hidden for the next receive to clear. Names were checked when the
offer was parsed (:mod:`hilltop.transfer.manifest`); existing targets were refused before
the answer (:func:`hilltop.transfer.targets.plan_files`), and one that appears meanwhile is
never overwritten (a file is linked into place, a folder renamed onto an empty folder made
exclusively, as :mod:`hilltop.transfer.filesink` and :mod:`hilltop.transfer.foldersink` do).
"""

from __future__ import annotations

import contextlib
import errno
import os

from hilltop.transfer import filesink
from hilltop.transfer.filesink import Sink, io_error, publish_file
from hilltop.transfer.foldersink import PRIVATE_FOLDER, FolderSpool, publish_folder
from hilltop.transfer.manifest import FilesOffer
from hilltop.transfer.modes import received_mode
from hilltop.transfer.partials import OPEN_FLAGS


def staging_name(offer: FilesOffer) -> str:
    return f"wormhole-{len(offer.tops())}-items"


class _Staging(FolderSpool):
    """Exactly ``offer.numbytes`` bytes, cut into the manifest's files in a fresh hidden
    folder (see :class:`Offered`). ``write`` may be called from a worker thread."""

    def __init__(self, directory: str, offer: FilesOffer) -> None:
        super().__init__(offer.numbytes, "the offered files", directory, staging_name(offer))
        self._offer = offer
        self._left = 0
        self._where = ""
        self._next = 0  # index of the next entry to open
        self._made = {self.path}
        try:
            os.chmod(self.path, PRIVATE_FOLDER)
            self._open_through_empty()
        except OSError as err:
            self.discard()
            raise io_error(err, f"creating {ascii(self._where)}") from None

    def _local(self, relative: str) -> str:
        return os.path.join(self.path, *relative.rstrip("/").split("/"))

    def _open_through_empty(self) -> None:
        """Create entries up to the next one that holds bytes (folders and empty files
        need no data), and open that one."""
        entries = self._offer.entries
        while self._fd is None and self._next < len(entries):
            entry = entries[self._next]
            self._next += 1
            self._where = entry.path
            local = self._local(entry.path)
            folder = local if entry.is_dir else os.path.dirname(local)
            if folder not in self._made:
                os.makedirs(folder, 0o777, exist_ok=True)
                self._made.add(folder)
            if entry.is_dir:
                continue
            fd = os.open(local, OPEN_FLAGS, 0o666)
            if entry.size:
                self._fd, self._left = fd, entry.size
            else:
                os.close(fd)

    def write(self, data: bytes | memoryview) -> None:
        self._admit(data)
        self._count(data)
        view = memoryview(data)
        try:
            while view:
                if self._fd is None:  # cannot happen: _admit holds the total to the sizes
                    raise io_error(OSError(errno.EIO, "no file left"), "cutting the files")
                take = min(len(view), self._left)
                filesink.write_all(self._fd, view[:take])
                view = view[take:]
                self._left -= take
                if not self._left:
                    fd, self._fd = self._fd, None
                    os.close(fd)
                    self._open_through_empty()
        except OSError as err:
            raise io_error(err, f"writing {ascii(self._where)}") from None

    def complete(self, expected_sha256: str | None) -> str | None:
        """Check the count and the hash (every file is then whole: sizes cut the bytes),
        then give each file the mode it may have."""
        digest = self._checked_digest(expected_sha256)
        self.close()
        try:
            self._open_through_empty()  # trailing empty files and folders of a 0-byte tail
            plain = received_mode(None, umask=self._umask, is_dir=False)
            for entry in self._offer.files:
                mode = received_mode(entry.mode, umask=self._umask, is_dir=False)
                if mode != plain:
                    os.chmod(self._local(entry.path), mode)
        except OSError as err:
            raise io_error(err, "setting permissions") from None
        self.make_durable()
        return digest

    def item(self, name: str) -> str:
        return os.path.join(self.path, name)

    def finished(self) -> None:
        """Every item was moved out: remove the empty staging folder, let go of its lock."""
        with contextlib.suppress(OSError):
            os.rmdir(self.path)
        self.release()


class FilesSink(Sink):
    """Receive a :class:`FilesOffer` into ``directory``: each first-level item under its
    own name there, all of them only once every byte arrived (see the module docstring)."""

    _spool: _Staging

    def __init__(self, directory: str, offer: FilesOffer) -> None:
        self.directory = os.path.abspath(directory)
        self.target = self.directory
        self.offer = offer
        self.targets = [os.path.join(self.directory, top.name) for top in offer.tops()]
        self._spool = _Staging(self.directory, offer)

    def _publish(self) -> None:
        for top in self.offer.tops():
            source, target = self._spool.item(top.name), os.path.join(self.directory, top.name)
            if top.is_dir:
                publish_folder(source, target)
            else:
                publish_file(source, target)
        self._spool.finished()
