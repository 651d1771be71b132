"""Receiver side of a folder: unpack the peer's zip as it arrives, trusting nothing in it.

A received directory is a zip chosen by the peer, so it is hostile input. :class:`DirectorySink`
unpacks it as it arrives (:mod:`hilltop.transfer.zipreader`) into a hidden temporary directory
beside
the target, checking each entry before anything is created for it: no absolute paths, ``..``,
drive letters, backslashes or paths nested over 256 deep, no two names in one folder that
would land on one name (also after case folding and Unicode normalisation, for
case-insensitive disks: the rule is :mod:`hilltop.transfer.entrynames`'s), no file
where a folder is needed, and totals that roughly agree with the offer; then, from the central
directory, no symlinks or device entries and every entry matching what was read. Modes are
the receiver's (:func:`hilltop.transfer.modes.received_mode`): of the sender's, only a file's
executable bit counts. Only a complete, checked archive is renamed into place; any failure
removes the temporary directory.

A module of its own (not part of :mod:`hilltop.transfer.filesink`, whose lifecycle it shares) so
that
receiving a single file does not import the zip reader: a receiver opens its sink after the
offer has arrived, while the sender waits for the answer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from hilltop._runtime.memory import Trimmer
from hilltop.errors import ProtocolError
from hilltop.transfer import filesink  # filesink.write_all: the seam tests patch for a full disk
from hilltop.transfer.entrynames import Claims, safe_parts
from hilltop.transfer.filesink import Offered, Sink, appeared, io_error
from hilltop.transfer.modes import received_mode
from hilltop.transfer.offers import DirectoryOffer
from hilltop.transfer.partials import OPEN_FLAGS, claim_folder, remove_tree
from hilltop.transfer.zipformat import CENTRAL_HEADER, END_RECORD, LOCAL_HEADER
from hilltop.transfer.zipreader import (
    CentralEntry,
    MemberData,
    MemberEnd,
    MemberStart,
    ZipStreamReader,
)

_ENTRY_HEADERS = LOCAL_HEADER.size + CENTRAL_HEADER.size
"""76 bytes of zip every entry costs besides its name (twice) and data."""
FOLDER_ENTRY_SLACK = 100
"""Folder entries allowed beyond what the offer leaves room for (zips from other writers)."""


class _EntryChecker:
    """Checks entries one at a time as the zip arrives: names, clashes, kinds, totals
    (the names and clashes by :class:`hilltop.transfer.entrynames.Claims`)."""

    def __init__(self, offer: DirectoryOffer) -> None:
        self._offer = offer
        self._claims = Claims()
        self._max_files = _slack(offer.numfiles, 100)
        self._max_bytes = _slack(offer.numbytes, 1024 * 1024)
        self._max_folders = max_folder_entries(offer)
        self.folders = 0
        self.files = 0
        self.bytes = 0

    def local(self, name: str) -> str | None:
        """The cleaned relative path for a member's local header (None for the ``./``
        root entry official senders add for an empty directory)."""
        parts = _safe_parts(name)
        is_dir = name.endswith("/")
        if not parts:
            if is_dir:
                return None
            raise _refuse(name, "has an empty name")
        path = "/".join(parts)
        why = self._claims.claim(path, is_dir)
        if why is not None:
            raise _refuse(name, why)
        if is_dir:
            self.folders += 1
            if self.folders > self._max_folders:
                raise ProtocolError(
                    f"refusing the received folder: it holds more than {self._max_folders} "
                    f"folder entries, more than its offer leaves room for")
        else:
            self.files += 1
            if self.files > self._max_files:
                raise ProtocolError(
                    f"refusing the received folder: it holds more than {self._max_files} "
                    f"files, but {self._offer.numfiles} were offered")
        return path

    def check_end(self) -> None:
        """Refuse an archive with no file at all when files were offered.

        Only this, not any shortfall: official 0.24, wormhole-william and hilltop send exactly
        the files they count, but a file that vanishes on the sender's side while the zip is
        built is not worth refusing a whole folder for; an empty archive for a non-empty
        offer is a peer that sent something else than the user accepted.
        """
        if self.files == 0 and self._offer.numfiles > 0:
            raise ProtocolError(
                f"refusing the received folder: it holds no files, but "
                f"{self._offer.numfiles} were offered")

    def wrote(self, nbytes: int) -> None:
        self.bytes += nbytes
        if self.bytes > self._max_bytes:
            raise ProtocolError(
                f"refusing the received folder: it unpacks to more than {self._max_bytes} "
                f"bytes, but {self._offer.numbytes} were offered")

    @staticmethod
    def central(entry: CentralEntry) -> int | None:
        """Refuse kinds a zip can declare only in its central directory; return the
        permission bits the sender asked for (None: it sent none)."""
        name = entry.name
        kind = stat.S_IFMT(entry.external_attr >> 16)
        if kind == stat.S_IFLNK:
            raise _refuse(name, "is a symbolic link")
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise _refuse(name, "is a device, FIFO or socket")
        if entry.flags & 0x1:
            raise _refuse(name, "is encrypted")
        perms = entry.external_attr >> 16 & 0o777
        return perms if entry.create_system == 3 and perms else None


class FolderSpool(Offered):
    """A claimed hidden folder that received bytes go into, one open file at a time: what a
    folder's unpacker and the several-files staging folder (:mod:`hilltop.transfer.manysink`)
    share, so both close, clean up and reach the disk the same way."""

    def __init__(self, size: int, what: str, directory: str, name: str) -> None:
        super().__init__(size, what)
        self.direct_io = False  # many files through the page cache; nothing to switch
        try:
            self.path, self._claim = claim_folder(directory, name)
        except OSError as err:
            raise io_error(err, f"creating a temporary folder in {directory!r}") from None
        self._fd: int | None = None  # the file being written
        self._umask = umask_shown_by(self.path)

    def make_durable(self) -> None:
        """Flush everything received to the disk before the ack: an acknowledged transfer may
        be deleted at the sender, so it must survive a power cut here (a file gets its fsync)."""
        try:
            filesink.sync_filesystem(self.path)
        except OSError as err:
            raise io_error(err, "writing the received files to disk") from None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._fd is not None:
                fd, self._fd = self._fd, None
                with contextlib.suppress(OSError):
                    os.close(fd)

    def discard(self) -> None:
        self.close()
        remove_tree(self.path)
        self.release()

    def release(self) -> None:
        """Let go of the folder's lock: it was renamed into place, or removed."""
        self._claim.release()


class _Unpacker(FolderSpool):
    """Unpacks a zip stream of exactly ``size`` bytes into a fresh hidden folder as it
    arrives (see :class:`Offered`), in the place of :class:`_Spool`.

    Each member becomes a file the moment its local header arrives, so creating 10,000
    files overlaps the transfer instead of following it, and the zip itself is never
    stored. Nothing is visible under the final name until :meth:`DirectorySink.finish`.
    ``write`` may be called from a worker thread (one at a time).
    """

    def __init__(self, directory: str, name: str, offer: DirectoryOffer) -> None:
        super().__init__(offer.zipsize, f"the zip of {name!r}", directory, name)
        self._reader = ZipStreamReader()
        self._checker = _EntryChecker(offer)
        self._made = {self.path}  # folders known to exist
        self._where = ""  # its path, for error messages
        self._relative_paths: list[str] = []  # of each member, in archive order
        self._central_index = 0
        try:  # private while it fills: its files get their narrowed modes only at the end
            os.chmod(self.path, PRIVATE_FOLDER)
        except OSError as err:
            raise io_error(err, f"making {self.path!r} private") from None
        self._plain_file_mode = received_mode(None, umask=self._umask, is_dir=False)
        self._file_modes: list[tuple[str, int]] = []  # only those that need a chmod
        self._trimmer = Trimmer()  # one buffer per member: keep the heap from fragmenting

    def write(self, data: bytes | memoryview) -> None:
        self._admit(data)
        self._count(data)
        try:
            for event in self._reader.feed(data):
                self._handle(event)
        except OSError as err:
            raise io_error(err, f"unpacking {ascii(self._where)}") from None

    def _handle(self, event: object) -> None:
        if isinstance(event, MemberData):
            self._checker.wrote(len(event.data))  # before writing: never past the limit
            if self._fd is not None:
                filesink.write_all(self._fd, event.data)
            elif event.data:
                raise ProtocolError(f"refusing the received folder: folder entry "
                                    f"{ascii(self._where)} holds data")
        elif isinstance(event, MemberStart):
            self._start(event.name)
        elif isinstance(event, MemberEnd):
            if self._fd is not None:
                fd, self._fd = self._fd, None
                os.close(fd)
            self._trimmer.moved(event.size)
        elif isinstance(event, CentralEntry):
            sent = self._checker.central(event)
            relative = self._relative_paths[self._central_index]
            self._central_index += 1
            if relative and not event.name.endswith("/"):  # folders keep the umask's mode
                mode = received_mode(sent, umask=self._umask, is_dir=False)
                if mode != self._plain_file_mode:  # only executables: no chmod for 10,000
                    self._file_modes.append((relative, mode))

    def _start(self, name: str) -> None:
        self._where = name
        relative = self._checker.local(name)
        if relative is None:  # "./": the folder itself
            self._relative_paths.append("")
            return
        self._relative_paths.append(relative)  # the checker keeps this same string
        path = os.path.join(self.path, *relative.split("/"))
        is_dir = name.endswith("/")
        folder = path if is_dir else os.path.dirname(path)
        if folder not in self._made:
            os.makedirs(folder, 0o777, exist_ok=True)
            self._made.add(folder)
        if not is_dir:
            self._fd = os.open(path, OPEN_FLAGS, 0o666)

    def complete(self, expected_sha256: str | None) -> str | None:
        """Check the count, the archive's end and the hash; mark executables executable."""
        digest = self._checked_digest(expected_sha256)
        self._reader.close()
        self.close()
        self._checker.check_end()
        try:
            for relative, mode in self._file_modes:
                os.chmod(os.path.join(self.path, relative), mode)
            os.chmod(self.path, received_mode(None, umask=self._umask, is_dir=True))
        except OSError as err:
            raise io_error(err, "setting permissions") from None
        self.make_durable()
        return digest


class DirectorySink(Sink):
    """Receive a directory offer (a zip stream of ``offer.zipsize`` bytes) to ``target``.

    The zip is unpacked as it arrives (:class:`_Unpacker`, :mod:`hilltop.transfer.zipreader`) into
    ``.NAME.hilltop-dir`` beside the target, each entry checked before anything is created
    for it, and that directory is renamed to ``NAME`` at the end. Any standard zip is
    accepted: STORED or DEFLATED, zip64 or not, with or without data descriptors.
    """

    _spool: _Unpacker

    def __init__(self, target: str, offer: DirectoryOffer) -> None:
        self.target = os.path.abspath(target)
        self.offer = offer
        self._name = os.path.basename(self.target)
        self._parent = os.path.dirname(self.target)
        self._spool = _Unpacker(self._parent, self._name, offer)

    def _publish(self) -> None:
        publish_folder(self._spool.path, self.target)
        self._spool.release()


def publish_folder(source: str, target: str) -> None:
    """Give the complete folder ``source`` its final name ``target``, never overwriting.

    mkdir is exclusive, and rename() onto an empty directory replaces it: together they
    never overwrite anything, even if the target appears while we extract.
    """
    try:
        os.mkdir(target, 0o700)
    except FileExistsError:
        raise appeared(target) from None
    except OSError as err:
        raise io_error(err, f"creating {target!r}") from None
    try:
        os.rename(source, target)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.rmdir(target)
        if err.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise appeared(target) from None
        raise io_error(err, f"moving the received folder to {target!r}") from None


PRIVATE_FOLDER = 0o700
"""The hidden temporary folder's mode until it is complete. Why: every file in it is created
with the umask default and narrowed (a sent 0o600 key) only once the archive's central
directory has been read, at the end; until then only the receiver may look inside."""


def umask_shown_by(folder: str) -> int:
    """The receiver's umask, read off ``folder``, which was just made with mode 0o777.

    Not ``os.umask()``: it can only be read by setting it, for the whole process, while
    another thread may be creating a file; and the folder also shows what a default ACL
    does to new entries, which is what the receiver's own files get.
    """
    return 0o777 & ~stat.S_IMODE(os.stat(folder).st_mode)


def _refuse(name: str, why: str) -> ProtocolError:
    shown = ascii(name if len(name) <= 80 else name[:77] + "...")
    return ProtocolError(f"refusing the received folder: entry {shown} {why}")


def max_folder_entries(offer: DirectoryOffer) -> int:
    """How many folder entries a zip may hold, given what its offer says the rest is.

    An empty folder costs about 80 bytes of zip, so without a bound a peer that offers
    "3 files, 30 MB" could send 375,000 empty folders instead. Each entry costs at least
    :data:`_ENTRY_HEADERS` plus its name twice (a file's at least 1 byte, a folder's 2, "a/"),
    and the files' bytes are in the zip as they are in STORED zips; so what is left of
    ``zipsize`` after the files and the end record bounds the folders. Official 0.24 and
    hilltop send STORED zips with exact counts, so their zips always fit; wormhole-william's are
    DEFLATED but have no folder entries; :data:`FOLDER_ENTRY_SLACK` covers other writers.
    """
    room = (offer.zipsize - offer.numbytes - END_RECORD.size
            - offer.numfiles * (_ENTRY_HEADERS + 2))
    return max(0, room) // (_ENTRY_HEADERS + 4) + FOLDER_ENTRY_SLACK


def _slack(declared: int, minimum: int) -> int:
    return declared + declared // 10 + minimum


def _safe_parts(name: str) -> tuple[str, ...]:
    """Split a zip member name into path components, refusing anything that could escape
    (the rules: :mod:`hilltop.transfer.entrynames`)."""
    return safe_parts(name, _refuse)
