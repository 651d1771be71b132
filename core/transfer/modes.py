"""The permissions a received folder's entries get: what the sender says is a wish.

A folder arrives as a zip whose entries carry the sender's Unix modes. Applied as sent (as
official 0.24 does, setuid included), a stranger decides that a file on the receiving machine
is world-writable, setuid or sticky. So only one bit of the sender's mode is read, the owner's
execute bit (the one bit git keeps, for the same reason), and the receiver's umask decides the
rest, exactly as for a file it creates itself. Folders ignore the sender's mode altogether: a
read-only or unlistable folder only gets in the receiver's way.
"""

from __future__ import annotations

from typing import Final

PERMISSION_BITS: Final = 0o777
"""rwx for owner, group and others; setuid, setgid and sticky (0o7000) are never given."""
_FILE_DEFAULT: Final = 0o666
_EXECUTABLE_DEFAULT: Final = 0o777
_OWNER_EXECUTE: Final = 0o100


def received_mode(sent: int | None, *, umask: int, is_dir: bool) -> int:
    """The permission bits to give a received entry.

    ``sent`` is the mode the sender put in the zip (with or without the file-type bits), or
    None when it sent none; ``umask`` is the receiver's. A folder gets ``0o777 & ~umask``, a
    file ``0o666 & ~umask``, or ``0o777 & ~umask`` when the sender marked it executable for its
    owner: a sent 0o4755 becomes 0o755 and a sent 0o777 file 0o755 under the common umask 022.
    """
    executable = is_dir or (sent is not None and bool(sent & _OWNER_EXECUTE))
    base = _EXECUTABLE_DEFAULT if executable else _FILE_DEFAULT
    return base & ~umask & PERMISSION_BITS
