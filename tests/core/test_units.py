"""Sizes, durations and rates as people read them (hilltop.units)."""

from __future__ import annotations

import pytest

from hilltop.units import readable_duration, readable_rate, readable_size


@pytest.mark.parametrize(("nbytes", "shown"), [
    (0, "0 bytes"),
    (1, "1 byte"),
    (999, "999 bytes"),
    (1000, "1.0 kB"),
    (123_456, "123.5 kB"),
    (12_500_000, "12.5 MB"),
    (999_949, "999.9 kB"),
    (999_950, "1.0 MB"),          # the unit is chosen after rounding: never "1000.0 kB"
    (999_999_999, "1.0 GB"),
    (1_073_741_824, "1.1 GB"),    # 1 GiB, in decimal units like official's naturalsize
    (10**30, "1000000000000.0 EB"),
])
def test_readable_size(nbytes: int, shown: str) -> None:
    assert readable_size(nbytes) == shown


def test_a_negative_size_is_a_bug() -> None:
    with pytest.raises(ValueError, match="negative"):
        readable_size(-1)


@pytest.mark.parametrize(("seconds", "shown"), [
    (0.0, "0.00 s"),
    (0.042, "0.04 s"),
    (2.34, "2.3 s"),
    (59.94, "59.9 s"),
    (59.96, "1 min 00 s"),
    (245.2, "4 min 05 s"),
])
def test_readable_duration(seconds: float, shown: str) -> None:
    assert readable_duration(seconds) == shown


def test_readable_rate() -> None:
    assert readable_rate(1_000_000_000, 2.25) == "444.4 MB/s"
    assert readable_rate(10, 0.0) == "too fast to measure"
