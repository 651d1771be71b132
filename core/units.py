"""Byte counts, durations and rates written for people: "12.5 MB", "2.3 s", "445 MB/s".

Decision: decimal SI units (1 kB = 1000 bytes) with one decimal, the convention of official
0.24, which shows every size with ``humanize.naturalsize`` ("Sending 1.2 MB file named ..."),
so a user comparing the two clients reads the same figures. Unlike ``naturalsize`` a unit is
chosen after rounding (999,999 bytes is "1.0 MB", never "1000.0 kB"), and a count under 1000
is written in full ("1 byte", "999 bytes"). Pure: the CLI and the errors of ``hilltop.transfer``
both use it.
"""

from __future__ import annotations

_UNITS = ("kB", "MB", "GB", "TB", "PB", "EB")
_STEP = 1000


def readable_size(nbytes: int) -> str:
    """``nbytes`` as a person reads it: "1 byte", "999 bytes", "1.0 kB", "12.5 MB"."""
    if nbytes < 0:
        raise ValueError(f"a size cannot be negative: {nbytes}")
    if nbytes < _STEP:
        return "1 byte" if nbytes == 1 else f"{nbytes} bytes"
    value = float(nbytes)
    for unit in _UNITS:
        value /= _STEP
        if round(value, 1) < _STEP or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable: the last unit always returns")


def readable_duration(seconds: float) -> str:
    """A transfer's duration: "0.04 s" and "2.3 s" below a minute, "4 min 05 s" above."""
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative: {seconds}")
    if seconds < 1:
        return f"{seconds:.2f} s"
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def readable_rate(nbytes: int, seconds: float) -> str:
    """Bytes per second, in the units of :func:`readable_size`: "445.0 MB/s".

    A transfer too quick for the clock to measure has no meaningful rate, so it reads "too fast to
    measure" rather than dividing by zero or printing an invented figure.
    """
    if seconds <= 0:
        return "too fast to measure"
    return f"{readable_size(round(nbytes / seconds))}/s"
