"""The PGP word list: shape, columns, and the lookups codes and completion rely on."""

from __future__ import annotations

import pytest

from hilltop.rendezvous import wordlist


def test_table_has_256_lowercase_rows() -> None:
    rows = wordlist.table()
    assert len(rows) == 256
    for even, odd in rows:
        assert even == even.lower() and even.isalpha()
        assert odd == odd.lower() and odd.isalpha()


def test_known_rows() -> None:
    rows = wordlist.table()
    assert rows[0x00] == ("aardvark", "adroitness")
    assert rows[0x69] == ("gazelle", "guitarist")
    assert rows[0xA9] == ("revenge", "passenger")
    assert rows[0xFF] == ("zulu", "yucatan")


def test_columns_are_disjoint_and_unique() -> None:
    even = wordlist.words_for_position(1)
    odd = wordlist.words_for_position(0)
    assert len(set(even)) == len(set(odd)) == 256
    assert not set(even) & set(odd)


@pytest.mark.parametrize("position", [0, 1, 2, 3, 10, 11])
def test_word_and_byte_of_are_inverse(position: int) -> None:
    for byte in range(256):
        word = wordlist.word(byte, position)
        assert wordlist.byte_of(word, position) == byte
        # the same word is never valid in the other column
        assert wordlist.byte_of(word, position + 1) is None


def test_first_word_is_odd() -> None:
    assert wordlist.column(0) == wordlist.ODD
    assert wordlist.column(1) == wordlist.EVEN
    assert wordlist.word(0x69, 0) == "guitarist"
    assert wordlist.word(0xA9, 1) == "revenge"


def test_byte_of_is_case_sensitive_and_exact() -> None:
    assert wordlist.byte_of("Guitarist", 0) is None
    assert wordlist.byte_of("guitar", 0) is None
    assert wordlist.byte_of("", 0) is None


def test_words_for_position_is_in_byte_order() -> None:
    odd = wordlist.words_for_position(0)
    assert odd == tuple(row[1] for row in wordlist.table())
    assert wordlist.words_for_position(2) == odd
