"""Wormhole codes: ``NAMEPLATE-WORD-WORD...``.

The whole code string is the SPAKE2 password, so it is never lowercased or otherwise
"corrected": only NFC-normalised (the same letters typed on two systems must give the same
bytes). ``--code`` accepts any words, not only PGP words, exactly like the official CLI.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from hilltop import wordlist
from hilltop.errors import CodeFormatError

MAX_NAMEPLATE_DIGITS = 40  # the mailbox server's own limit


@dataclass(frozen=True)
class Code:
    nameplate: str
    words: tuple[str, ...]

    def __str__(self) -> str:
        return "-".join((self.nameplate, *self.words))


def parse_code(text: str) -> Code:
    """Check ``text`` and split it; raises CodeFormatError saying what is wrong."""
    text = unicodedata.normalize("NFC", text.strip())
    example = "a code looks like 7-guitarist-revenge"
    if not text:
        raise CodeFormatError(f"no code given ({example})")
    if any(ch.isspace() for ch in text):
        raise CodeFormatError(f"a code has no spaces: {text!r} ({example})")
    nameplate, dash, rest = text.partition("-")
    if not (nameplate.isascii() and nameplate.isdigit()):
        raise CodeFormatError(f"a code must start with a number: {text!r} ({example})")
    if len(nameplate) > MAX_NAMEPLATE_DIGITS:
        raise CodeFormatError(f"the number in the code is too long: {text!r}")
    words = tuple(rest.split("-")) if dash else ()
    if not words or any(not w for w in words):
        raise CodeFormatError(f"the code needs words after the number: {text!r} ({example})")
    return Code(nameplate, words)


def words_from_bytes(data: bytes) -> list[str]:
    """One PGP word per byte, alternating odd/even columns starting with odd."""
    return [wordlist.word(b, i) for i, b in enumerate(data)]


def make_code(nameplate: str, random_bytes: bytes) -> str:
    return str(Code(nameplate, tuple(words_from_bytes(random_bytes))))


def complete(text: str, nameplates: Sequence[str], length: int) -> list[str]:
    """Whole-line candidates for tab completion of a partly typed code.

    Before the first hyphen we complete nameplates (adding ``-``); after it, words from the
    column that position uses, adding ``-`` while more words are expected.
    """
    nameplate, dash, rest = text.partition("-")
    if not dash:
        return sorted(f"{n}-" for n in nameplates if n.startswith(text))
    *typed, partial = rest.split("-")
    position = len(typed)
    suffix = "-" if position + 1 < length else ""
    head = "-".join((nameplate, *typed))
    return [f"{head}-{w}{suffix}" for w in sorted(wordlist.words_for_position(position))
            if w.startswith(partial)]
