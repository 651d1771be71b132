"""Wormhole codes: ``NAMEPLATE-WORD-WORD...``.

The whole code string is the SPAKE2 password, so it is never lowercased or otherwise
"corrected": only NFC-normalised (the same letters typed on two systems must give the same
bytes). ``--code`` accepts any words, not only PGP words, exactly like the official CLI.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from hilltop._values import value
from hilltop.errors import CodeFormatError
from hilltop.rendezvous import wordlist

MAX_NAMEPLATE_DIGITS = 40  # the mailbox server's own limit
EXAMPLE = "a code looks like 7-guitarist-revenge"
ZERO_MODE_CODE = "0-"
"""The code of the official client's ``-0`` mode: nameplate 0 and an empty word, so the
password is known to all. For tests and demonstrations; anyone on the server can join."""


def is_nameplate(text: str) -> bool:
    """Whether ``text`` is a nameplate: 1 to :data:`MAX_NAMEPLATE_DIGITS` ASCII digits.

    The one rule for every place that takes a nameplate (codes, an early claim, LAN service
    names). ``str.isdigit()`` alone also accepts "²" and Arabic-Indic digits; the server
    wants ASCII.
    """
    return text.isascii() and text.isdigit() and len(text) <= MAX_NAMEPLATE_DIGITS


def check_nameplate(text: str) -> str:
    """``text`` if :func:`is_nameplate`, else :class:`CodeFormatError` saying what one is."""
    if not is_nameplate(text):
        raise CodeFormatError(f"a nameplate is 1-{MAX_NAMEPLATE_DIGITS} digits, not {text!r}")
    return text


@value
class Code:
    """A checked code; building one with a bad part is a programming error (ValueError)."""

    nameplate: str
    words: tuple[str, ...]

    def __post_init__(self) -> None:
        if not is_nameplate(self.nameplate):
            raise ValueError(f"bad nameplate {self.nameplate!r}")
        if str(self) == ZERO_MODE_CODE:
            return
        if not self.words or any(not w or "-" in w or _has_space(w) for w in self.words):
            raise ValueError(f"bad code words {self.words!r}")

    def __str__(self) -> str:
        return "-".join((self.nameplate, *self.words))


def _has_space(text: str) -> bool:
    return any(ch.isspace() for ch in text)


def parse_code(text: str) -> Code:
    """Check ``text`` and split it; raises CodeFormatError saying what is wrong.

    Surrounding whitespace is dropped (a pasted code often carries a newline); whitespace
    inside is refused rather than removed, since the peer would hash it differently.
    """
    text = unicodedata.normalize("NFC", text.strip())
    if not text:
        raise CodeFormatError(f"no code given ({EXAMPLE})")
    if _has_space(text):
        raise CodeFormatError(f"a code has no spaces: {text!r} ({EXAMPLE})")
    nameplate, dash, rest = text.partition("-")
    if not (nameplate.isascii() and nameplate.isdigit()):
        raise CodeFormatError(f"a code must start with a number: {text!r} ({EXAMPLE})")
    if len(nameplate) > MAX_NAMEPLATE_DIGITS:
        raise CodeFormatError(
            f"the number in the code is longer than {MAX_NAMEPLATE_DIGITS} digits: {text!r}"
        )
    words = tuple(rest.split("-")) if dash else ()
    if text == ZERO_MODE_CODE:
        return Code(nameplate, words)
    if not words or words == ("",):
        raise CodeFormatError(f"the code needs words after the number: {text!r} ({EXAMPLE})")
    if any(not w for w in words):
        raise CodeFormatError(f"the code has an empty word (two hyphens in a row?): {text!r}")
    return Code(nameplate, words)


def words_from_bytes(data: bytes) -> list[str]:
    """One PGP word per byte; the column alternates, starting with the odd one."""
    return [wordlist.word(b, i) for i, b in enumerate(data)]


def make_code(nameplate: str, random_bytes: bytes) -> str:
    """The code for an allocated nameplate; the caller supplies one random byte per word."""
    return str(Code(nameplate, tuple(words_from_bytes(random_bytes))))


def complete(text: str, nameplates: Sequence[str], length: int) -> list[str]:
    """Whole-line candidates for tab completion of a partly typed code, sorted.

    Before the first hyphen we complete nameplates (adding ``-``). After it, the word being
    typed is completed from the column its position uses (odd after an even number of
    hyphens among the words), adding ``-`` while more than the typed words are expected.
    Typed words are kept as they are: any word is allowed, only the last one is completed.
    """
    nameplate, dash, rest = text.partition("-")
    if not dash:
        return sorted(f"{n}-" for n in set(nameplates) if n.startswith(text) and is_nameplate(n))
    if not is_nameplate(nameplate):
        return []
    *typed, partial = rest.split("-")
    position = len(typed)
    suffix = "-" if position + 1 < length else ""
    head = "-".join((nameplate, *typed))
    words = sorted(w for w in wordlist.words_for_position(position) if w.startswith(partial))
    return [f"{head}-{w}{suffix}" for w in words]
