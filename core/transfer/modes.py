"""The permissions a received folder's entries get: what the sender says is a wish.

A folder arrives as a zip whose entries carry the sender's Unix modes. Applied as sent (as
official 0.24 does, setuid included), a stranger decides that a file on the receiving machine
is world-writable, setuid or sticky. So a sent mode may only take away: the receiver's umask
decides what a file may have, as for a file it creates itself; of the sender's bits, the
owner's execute bit adds execute (the one bit git keeps, for the same reason), and the
group and other bits can only narrow (a key sent as 0o600 stays private; a 0o777 file does
not become world-writable). The owner always keeps read and write: the file is the
receiver's. Folders ignore the sender's mode altogether: a read-only or unlistable folder
only gets in the receiver's way.
"""

from __future__ import annotations

from typing import Final

PERMISSION_BITS: Final = 0o777
"""rwx for owner, group and others; setuid, setgid and sticky (0o7000) are never given."""
_FILE_DEFAULT: Final = 0o666
_EXECUTABLE_DEFAULT: Final = 0o777
_OWNER_EXECUTE: Final = 0o100
_OWNER_BITS: Final = 0o700
_GROUP_AND_OTHER_BITS: Final = 0o077


def received_mode(sent: int | None, *, umask: int, is_dir: bool) -> int:
    """The permission bits to give a received entry.

    ``sent`` is the mode the sender put in the zip (with or without the file-type bits), or
    None when it sent none; ``umask`` is the receiver's. A folder gets ``0o777 & ~umask``. A
    file starts from ``0o666 & ~umask`` (``0o777`` when the sender marked it executable for
    its owner) and keeps of the group and other bits only those the sender gave too: under
    umask 022 a sent 0o4755 becomes 0o755, a 0o777 file 0o755, a 0o600 file 0o600.
    """
    if is_dir:
        return _EXECUTABLE_DEFAULT & ~umask & PERMISSION_BITS
    if sent is None:
        return _FILE_DEFAULT & ~umask & PERMISSION_BITS
    base = _EXECUTABLE_DEFAULT if sent & _OWNER_EXECUTE else _FILE_DEFAULT
    return base & ~umask & (_OWNER_BITS | (sent & _GROUP_AND_OTHER_BITS))
