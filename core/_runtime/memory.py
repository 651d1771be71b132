"""Give freed heap memory back to the system while many small files stream through.

Why: unpacking a received directory allocates one short-lived buffer per file (1-64 KiB,
below glibc's mmap threshold, so from the heap) between small objects that live on (the
entry checks' record of every path). The sender needs none: it reads every small file into
one reused buffer (:mod:`hilltop.transfer.source`). The freed buffers leave holes glibc keeps,
and peak RSS grew by ~6 MB per 10,000 files with no live data behind it.
``malloc_trim(0)`` returns the free pages inside the heap; called every few MiB of file data
it costs well under a millisecond each time. Elsewhere (no glibc) it does nothing.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

TRIM_EVERY = 8 * 1024 * 1024
"""Bytes of file data between two trims (see :class:`Trimmer`)."""


def _find_trim() -> Callable[[int], int] | None:
    import ctypes

    try:  # the symbols already loaded into this process: glibc has it, musl and macOS not
        found: Any = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    found.argtypes = [ctypes.c_size_t]
    found.restype = ctypes.c_int
    return found


_trim: Callable[[int], int] | None | bool = False  # False: not looked up yet


def trim() -> None:
    """Return free heap pages to the system now (no-op without glibc)."""
    global _trim
    if _trim is False:
        _trim = _find_trim()
    if callable(_trim):
        _trim(0)


class Trimmer:
    """Counts bytes moved and trims once every :data:`TRIM_EVERY` of them."""

    def __init__(self, every: int = TRIM_EVERY) -> None:
        self._every = every
        self._count = 0

    def moved(self, nbytes: int) -> None:
        self._count += nbytes
        if self._count >= self._every:
            self._count = 0
            trim()


_startup_frozen = False


def freeze_after_startup() -> None:
    """Keep what the start-up imported out of the collector's sight, and turn it back on.

    Why: a CLI process creates ~60,000 long-lived objects while it imports (Twisted,
    autobahn, click, spake2, its own modules), and the collector ran ~140 times during those
    imports, rescanning them: 30-50 ms of a 3-byte transfer's ~0.45 s of CPU per side,
    measured with ``gc.callbacks`` (bench/README.md, "Time budget"). The caller disables the
    collector before importing and calls this after; the objects are the program itself,
    not garbage, so freezing them loses nothing. Later collections scan only what came after.
    """
    global _startup_frozen
    gc.freeze()
    _startup_frozen = True
    gc.enable()


def frozen_at_startup() -> bool:
    """Whether :func:`freeze_after_startup` froze this process's objects (the CLI's)."""
    return _startup_frozen


@contextmanager
def importing() -> Iterator[None]:
    """Run a block that imports a batch of modules the way the start-up did: with the
    collector off, freezing what the block created when it ends. Only in a process whose
    start-up was frozen (the CLI, :func:`freeze_after_startup`) and whose collector is on;
    anywhere else (a library's host, a test) the block runs as it is.

    Why: after that freeze a CLI process still imports its command's module, autobahn at the
    first mailbox connection and, for a file, the transit machinery and its transports; with
    the collector on, a 3-byte receive ran ~40 collections meanwhile, 3 of them of the middle
    generation (rescanning every young object the imports made): 11-27 ms per process,
    measured with ``gc.callbacks`` (bench/README.md, "Fourth session").
    """
    if not _startup_frozen or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
