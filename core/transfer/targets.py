"""Where a received file or folder may go: the receiver's filesystem policy.

A peer chooses the offered name, so it is hostile input: we keep only its last path component
(as official receivers do, which defeats ``~/.ssh/authorized_keys``) and refuse names that
cannot be a plain file name at all. We never overwrite: official 0.24 overwrites a file named
with ``--output-file``, but a transfer that silently replaces data is a worse failure than
asking the user to pick another name.

Split from the wire codec (:mod:`hilltop.transfer.offers`, pure) because these rules read the
filesystem: whether a path exists, and how much space is free.
"""

from __future__ import annotations

import os
import shutil
import unicodedata
from typing import Final

from hilltop.errors import RejectedError
from hilltop.transfer.entrynames import MAX_NAME_BYTES
from hilltop.transfer.manifest import FilesOffer
from hilltop.transfer.offers import DirectoryOffer, FileOffer
from hilltop.units import readable_size


def safe_name(offered: str) -> str:
    """Return the last path component of an offered name, or raise :class:`RejectedError`.

    Like official receivers we keep only the basename (``/etc/passwd`` becomes ``passwd``). What
    is left must be usable as one file name on this system and must not be able to confuse a
    later step: no empty name, ``.``, ``..``, NUL, backslash, control characters, or more than
    255 bytes. Backslashes are refused rather than split because they are separators on Windows.
    """
    if not isinstance(offered, str):
        raise RejectedError("peer offered a name that is not text; refusing it")
    name = offered.rsplit("/", 1)[-1]
    shown = ascii(offered)
    if name in ("", ".", ".."):
        raise RejectedError(f"peer offered an unusable name {shown}; refusing it")
    if "\\" in name or "\x00" in name:
        raise RejectedError(f"peer offered a name with a path separator or NUL {shown}; refusing")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise RejectedError(f"peer offered a name with control characters {shown}; refusing it")
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates survive json.loads
        raise RejectedError(f"peer offered a name that is not valid Unicode {shown}") from None
    if len(encoded) > MAX_NAME_BYTES:
        raise RejectedError(f"peer offered a name longer than {MAX_NAME_BYTES} bytes; refusing it")
    return name


def target_path(offer_name: str, output_option: str | None, cwd: str) -> str:
    """Decide the absolute path a received file or directory will get.

    Without ``-o/--output-file`` it is ``cwd/safe_name(offer_name)``. With it, the option is
    taken relative to ``cwd``; if it names an existing directory the transfer goes *inside* it
    under the offered name, as the official receiver does. In every case an existing path
    (even a dangling symlink) is refused rather than overwritten, and the parent directory must
    already exist.
    """
    name = safe_name(offer_name)
    if output_option:
        target = os.path.abspath(os.path.join(cwd, output_option))
        if os.path.isdir(target):
            target = os.path.join(target, name)
    else:
        target = os.path.abspath(os.path.join(cwd, name))
    if os.path.lexists(target):
        raise RejectedError(f"refusing to overwrite existing {target!r}")
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise RejectedError(f"cannot save to {target!r}: directory {parent!r} does not exist")
    return target


BLOCK_PER_FILE: Final = 4096
"""Room allowed per received file on top of its bytes: its last block is allocated whole.

4 KiB is the block of ext4, xfs and btrfs by default and the page tmpfs counts in, so a
folder of N files needs at most N * 4096 bytes more than it holds (a 1-byte file takes 4 KiB).
"""


def space_needed(offer: FileOffer | DirectoryOffer | FilesOffer) -> int:
    """Bytes a receiver needs free for an offer.

    A folder is unpacked as its zip arrives and the zip is never stored, so only the files
    need room: their bytes plus :data:`BLOCK_PER_FILE` each. Counting the zip too (as this
    did) refused a 30 MB folder on a disk with 45 MB free. Official 0.24 counts only
    ``numbytes``, though it does store the zip before unpacking it.
    """
    if isinstance(offer, FileOffer):
        return offer.filesize
    return offer.numbytes + offer.numfiles * BLOCK_PER_FILE  # files arrive as a folder's do


def check_free_space(directory: str, needed: int, free_bytes: int | None) -> None:
    """Refuse a transfer that cannot fit. ``free_bytes=None`` means "unknown": let it through."""
    if free_bytes is not None and free_bytes < needed:
        need, have = readable_size(needed), readable_size(free_bytes)
        if need == have:  # "need 45.0 MB, only 45.0 MB available" would explain nothing
            need, have = f"{needed} bytes", f"{free_bytes} bytes"
        raise RejectedError(
            f"not enough free space in {directory!r}: need {need}, only {have} available")


def free_space(directory: str) -> int | None:
    """Free bytes on the filesystem holding ``directory``, or None when it cannot be told."""
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None



def plan_target(offer: FileOffer | DirectoryOffer, output: str | None, cwd: str) -> str:
    """Where the offer will be saved; raises RejectedError if that is unsafe or cannot fit."""
    name = offer.filename if isinstance(offer, FileOffer) else offer.dirname
    target = target_path(name, output, cwd)
    parent = os.path.dirname(target)
    check_free_space(parent, space_needed(offer), free_space(parent))
    return target


def plan_files(offer: FilesOffer, output: str | None, cwd: str) -> str:
    """The folder several files (``files-v1``) will be saved in: ``cwd``, or ``-o`` when it
    names an existing folder. Raises RejectedError if any first-level item exists there
    (nothing is overwritten, and the transfer is refused before any byte, as for one file),
    or if the files cannot fit."""
    directory = os.path.abspath(os.path.join(cwd, output)) if output else cwd
    if not os.path.isdir(directory):
        raise RejectedError(f"cannot save several files to {directory!r}: with several "
                            "files, -o must name an existing folder")
    for top in offer.tops():
        target = os.path.join(directory, safe_name(top.name))
        if os.path.lexists(target):
            raise RejectedError(f"refusing to overwrite existing {target!r}")
    check_free_space(directory, space_needed(offer), free_space(directory))
    return directory
