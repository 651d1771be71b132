"""The progress bar: tqdm on stderr, only when stderr is a terminal and not --hide-progress."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(total: int, hide: bool) -> Iterator[Callable[[int], None]]:
    """Yield an ``update(nbytes)`` callable; a no-op when there is no bar to draw."""
    if hide or not sys.stderr.isatty():
        yield lambda _n: None
        return
    from tqdm import tqdm  # ~60 ms to import: only when there is a bar to draw

    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
              dynamic_ncols=True, leave=False) as bar:
        yield bar.update
