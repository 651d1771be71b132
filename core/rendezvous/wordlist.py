"""The PGP word list, as the official clients use it for wormhole codes.

Each byte has a two-syllable "even" word (column A) and a three-syllable "odd" word (column B).
A code's first word is odd, the second even, and so on: alternating columns means a swapped or
dropped word sounds wrong when read aloud. The list itself is data (``pgp_words.txt``, one
``hex even odd`` row per byte); ``tests/vectors`` checks it against the official client's copy.
"""

from __future__ import annotations

from functools import cache

EVEN, ODD = 0, 1  # column index in a table() row


@cache
def table() -> tuple[tuple[str, str], ...]:
    """``table()[byte] == (even_word, odd_word)``, read once from the package data.
    ``importlib.resources`` is imported here: a text sent with a given code never needs the
    words, and importing it costs ~3 ms and 6 modules at start-up (bench/README.md)."""
    from importlib import resources

    text = resources.files("hilltop.rendezvous").joinpath("pgp_words.txt").read_text("utf-8")
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


def column(position: int) -> int:
    """Which column the word at 0-based ``position`` comes from (the first word is odd)."""
    return ODD if position % 2 == 0 else EVEN


def word(byte: int, position: int) -> str:
    """The word for ``byte`` at 0-based ``position`` in a code."""
    return table()[byte][column(position)]


def words_for_position(position: int) -> tuple[str, ...]:
    """Every word that may stand at ``position``, in byte order (not quite alphabetical)."""
    return _columns()[column(position)]


def byte_of(text: str, position: int) -> int | None:
    """The byte a word stands for at ``position``; None if it is not a word of that column.

    Only lowercase words match: codes are case-sensitive passwords, so "Guitarist" is
    a different (non-PGP) word, not a spelling of "guitarist".
    """
    return _reverse()[column(position)].get(text)


@cache
def _columns() -> tuple[tuple[str, ...], tuple[str, ...]]:
    rows = table()
    return tuple(r[EVEN] for r in rows), tuple(r[ODD] for r in rows)


@cache
def _reverse() -> tuple[dict[str, int], dict[str, int]]:
    even, odd = _columns()
    return {w: b for b, w in enumerate(even)}, {w: b for b, w in enumerate(odd)}
