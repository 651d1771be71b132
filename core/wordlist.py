"""The PGP word list, as the official clients use it for wormhole codes.

Each byte has a two-syllable word (used at even positions) and a three-syllable word (used at
odd positions: the first word of a code is "odd"). Alternating the columns makes a swapped or
dropped word detectable by ear. The list itself is data (``pgp_words.txt``), checked against
the official client's copy by ``tests/vectors``.
"""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def table() -> tuple[tuple[str, str], ...]:
    """``table()[byte] == (even_word, odd_word)``."""
    text = resources.files("hilltop").joinpath("pgp_words.txt").read_text("utf-8")
    rows: list[tuple[str, str]] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        index, even, odd = line.split()
        if int(index, 16) != len(rows):
            raise ValueError(f"pgp_words.txt is out of order at {index}")
        rows.append((even, odd))
    if len(rows) != 256:
        raise ValueError("pgp_words.txt must have 256 rows")
    return tuple(rows)


def word(byte: int, position: int) -> str:
    """The word for ``byte`` at 0-based ``position`` in the code's word list."""
    even, odd = table()[byte]
    return odd if position % 2 == 0 else even


def words_for_position(position: int) -> tuple[str, ...]:
    """Every word that may stand at ``position`` (for completion)."""
    column = 1 if position % 2 == 0 else 0
    return tuple(row[column] for row in table())
