"""What a person sees while bytes move: the status line, one progress bar, the summary.

Why one object for all three: the bar used to be opened before transit connected, so tqdm drew
"0%" first and the "Receiving (->direct-tcp ...)" line then landed after it, leaving a stale 0%
line and a split status line on the screen. Here the bar exists only from the moment the
connection line has been printed, and the clock that the summary reports starts then too.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, TextIO

from hilltop.cli import events, output
from hilltop.units import readable_duration, readable_rate, readable_size


class TransferProgress:
    """The screen side of one transfer of ``total`` bytes.

    ``connected(line, via)`` prints ``line`` and only then opens the bar (at most once);
    ``update(n)`` advances it; ``summary(verb)`` closes the bar and says how it went. The bar is
    drawn only on a terminal and without --hide-progress, as the official client does.
    """

    def __init__(self, total: int | None, hide: bool, stream: TextIO | None = None) -> None:
        self.total = total  # None: a stream of unknown length (the bar counts, the summary too)
        self.moved = 0
        self._stream = stream or sys.stderr
        self._show_bar = not hide and self._stream.isatty() and not events.json_mode()
        self._events = events.ProgressEvents(total)
        self._bars = ExitStack()
        self._advance = _ignore
        self._bar: Any = None
        self._started: float | None = None
        self._via = ""
        self._skipped = 0

    def connected(self, line: str, via: str) -> None:
        """The transport won: say so on its own line, then start the bar and the clock."""
        if self._started is not None:
            return  # one bar per transfer
        if events.json_mode():
            events.emit("transit_connected", via=via)
        else:
            output.status(line, self._stream)
        self._via = via
        self._started = time.monotonic()
        if self._show_bar:
            from tqdm import tqdm  # ~60 ms to import: only when there is a bar to draw

            drawn_on = _CursorAtLineStart(self._stream)
            bar = self._bars.enter_context(tqdm(
                total=self.total, initial=self._skipped, unit="B", unit_scale=True,
                unit_divisor=1000,
                file=drawn_on, dynamic_ncols=True, leave=False))
            self._advance = bar.update
            self._bar = bar

    def path(self, via: str | None) -> None:
        """A durable transfer lost its connection (None) or has a new one: the bar's label
        (or a status line without a bar) says "reconnecting..." until it is back; the
        summary and the ``done`` event name the path the transfer ended on."""
        if via is not None:
            self._via = via
        if events.json_mode():
            events.emit("transit_path", state="reconnecting" if via is None else "connected",
                        **({} if via is None else {"via": via}))
            return
        if self._bar is not None:
            self._bar.set_description_str("reconnecting..." if via is None else "")
        else:
            output.status("reconnecting..." if via is None else f"reconnected ({via})",
                          self._stream)

    def line(self, text: str) -> None:
        """A status line above the bar, which is redrawn under it (several files' lines)."""
        if self._bar is not None:
            self._bar.write(output.terminal_safe(text), file=self._bar.fp)
        else:
            output.status(text, self._stream)

    def skip(self, nbytes: int) -> None:
        """The first ``nbytes`` were kept from an interrupted transfer (resume): the bar
        starts there, and the summary counts only what moves now. Before :meth:`connected`."""
        self._skipped = nbytes
        self._events.done = nbytes  # --json progress counts from there too, up to 100 %

    def update(self, nbytes: int) -> None:
        self.moved += nbytes
        self._advance(nbytes)
        self._events.update(nbytes)

    def close(self) -> None:
        """Take the bar off the screen (leave=False erases it) before anything else is said."""
        self._advance = _ignore
        self._bar = None
        self._bars.close()

    def summary(self, verb: str) -> str:
        """``"Received 1.0 GB in 2.3 s (445.0 MB/s) via direct-tcp 127.0.0.1:41234"``."""
        self.close()
        elapsed = 0.0 if self._started is None else time.monotonic() - self._started
        # a resumed transfer counts only what moved now; a stream what it carried
        total = self.moved if self.total is None else self.total - self._skipped
        line = (f"{verb} {readable_size(total)} in {readable_duration(elapsed)} "
                f"({readable_rate(total, elapsed)})")
        return f"{line} via {self._via}" if self._via else line

    def done(self, verb: str, **fields: Any) -> None:
        """The ``done`` event: the summary line for a person, the figures for a script."""
        line = self.summary(verb)
        elapsed = 0.0 if self._started is None else time.monotonic() - self._started
        moved = self.moved if self.total is None else self.total
        events.emit("done", line, bytes=moved, seconds=round(elapsed, 3),
                    via=self._via, **fields)


def _ignore(_nbytes: int) -> None:
    pass


class _CursorAtLineStart:
    """The stream the bar is drawn on, with the cursor put back at the start of the bar's line
    after each drawing.

    Why: Ctrl-C makes the terminal echo "^C" where the cursor is. At the end of a bar as wide
    as the terminal, the echo wrapped onto the next line, so tqdm's erase (a carriage return
    and spaces) cleared that line and left the bar on the screen above "Kept ..." and the
    error. From the start of the line the echo lands inside the bar, and the erase covers it.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        written = self._stream.write(text)
        if text and not text.endswith("\n"):
            self._stream.write("\r")
        return written

    def __getattr__(self, name: str) -> Any:  # flush, fileno, encoding, isatty: the stream's
        return getattr(self._stream, name)


@contextmanager
def transfer_progress(total: int | None, hide: bool,
                      stream: TextIO | None = None) -> Iterator[TransferProgress]:
    """A :class:`TransferProgress` whose bar is erased however the transfer ends."""
    shown = TransferProgress(total, hide, stream)
    try:
        yield shown
    finally:
        shown.close()
