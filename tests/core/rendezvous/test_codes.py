"""Code grammar, generation from given bytes, and tab completion."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilltop.errors import CodeFormatError, LocalError
from hilltop.rendezvous import wordlist
from hilltop.rendezvous.codes import (
    ZERO_MODE_CODE,
    Code,
    complete,
    make_code,
    parse_code,
    words_from_bytes,
)

nameplates = st.from_regex(r"\A[0-9]{1,40}\Z")
# any word without hyphens or whitespace: --code accepts non-PGP words
words = st.text(
    st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc"), blacklist_characters="-"),
    min_size=1, max_size=12,
).filter(lambda w: not any(ch.isspace() for ch in w))


# -- parse_code --------------------------------------------------------------------------------

def test_parse_simple_code() -> None:
    code = parse_code("7-guitarist-revenge")
    assert code == Code("7", ("guitarist", "revenge"))
    assert str(code) == "7-guitarist-revenge"


def test_parse_accepts_any_words_and_keeps_case() -> None:
    assert parse_code("123-Hello-WORLD-x").words == ("Hello", "WORLD", "x")
    assert parse_code("0-onlyone").words == ("onlyone",)


def test_parse_strips_surrounding_whitespace_only() -> None:
    assert str(parse_code("  7-a-b\n")) == "7-a-b"


def test_parse_nfc_normalises() -> None:
    decomposed = "4-cafe\u0301"
    code = parse_code(decomposed)
    assert str(code) == "4-caf\u00e9"
    assert str(code) == unicodedata.normalize("NFC", decomposed)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "no code given"),
        ("   ", "no code given"),
        ("7-guitarist revenge", "no spaces"),
        ("7-guitarist\trevenge", "no spaces"),
        ("abc-guitarist", "start with a number"),
        ("-guitarist-revenge", "start with a number"),
        ("\u0667-arabic-digit", "start with a number"),  # not an ASCII digit
        ("7", "needs words"),
        ("7-", "needs words"),
        ("7-guitarist--revenge", "empty word"),
        ("7-guitarist-", "empty word"),
        ("1" * 41 + "-a", "longer than 40"),
    ],
)
def test_parse_rejects_with_clear_message(text: str, fragment: str) -> None:
    with pytest.raises(CodeFormatError) as info:
        parse_code(text)
    assert fragment in str(info.value)
    assert isinstance(info.value, LocalError)
    assert "\n" not in str(info.value)


@given(nameplates, st.lists(words, min_size=1, max_size=6))
def test_parse_round_trips(nameplate: str, ws: list[str]) -> None:
    text = unicodedata.normalize("NFC", "-".join([nameplate, *ws]))
    code = parse_code(text)
    assert str(code) == text
    assert parse_code(str(code)) == code


@given(st.text(max_size=30))
def test_parse_garbage_raises_only_code_format_error(text: str) -> None:
    try:
        code = parse_code(text)
    except CodeFormatError:
        return
    assert parse_code(str(code)) == code


def test_zero_mode_code_is_the_only_one_without_words() -> None:
    """``0-`` is the official client's ``-0`` code (an empty password word); ``7-`` and
    ``0--`` are still typing mistakes."""
    code = parse_code("0-")
    assert (code.nameplate, code.words, str(code)) == ("0", ("",), ZERO_MODE_CODE)
    for near_miss in ("7-", "0--", "00-"):
        with pytest.raises(CodeFormatError):
            parse_code(near_miss)
    with pytest.raises(ValueError):
        Code("7", ("",))


def test_code_checks_itself() -> None:
    with pytest.raises(ValueError):
        Code("x", ("a",))
    with pytest.raises(ValueError):
        Code("1", ())
    with pytest.raises(ValueError):
        Code("1", ("a-b",))


# -- generation --------------------------------------------------------------------------------

def test_words_from_bytes_alternates_columns_starting_odd() -> None:
    assert words_from_bytes(bytes([0x69, 0xA9])) == ["guitarist", "revenge"]
    assert words_from_bytes(b"\x00\x00\x00") == ["adroitness", "aardvark", "adroitness"]
    assert words_from_bytes(b"") == []


def test_make_code() -> None:
    assert make_code("7", bytes([0x69, 0xA9])) == "7-guitarist-revenge"


@given(nameplates, st.binary(min_size=1, max_size=8))
def test_make_code_round_trips_to_bytes(nameplate: str, data: bytes) -> None:
    code = parse_code(make_code(nameplate, data))
    assert code.nameplate == nameplate
    assert bytes(wordlist.byte_of(w, i) for i, w in enumerate(code.words)) == data


# -- completion --------------------------------------------------------------------------------

def test_complete_nameplates() -> None:
    plates = ["7", "12", "123", "4"]
    assert complete("", plates, 2) == ["12-", "123-", "4-", "7-"]
    assert complete("12", plates, 2) == ["12-", "123-"]
    assert complete("9", plates, 2) == []


def test_complete_first_word_from_odd_column_with_hyphen() -> None:
    got = complete("7-guit", [], 2)
    assert got == ["7-guitarist-"]


def test_complete_second_word_from_even_column_without_hyphen() -> None:
    got = complete("7-guitarist-rev", [], 2)
    assert got == ["7-guitarist-revenge"]
    # "revenge" is column A; an odd-column prefix gives nothing at position 1
    assert complete("7-guitarist-guit", [], 2) == []


def test_complete_third_word_uses_odd_column_again() -> None:
    assert complete("7-guitarist-revenge-guit", [], 3) == ["7-guitarist-revenge-guitarist"]
    assert complete("7-guitarist-rev", [], 3) == ["7-guitarist-revenge-"]


def test_complete_empty_word_lists_whole_column_sorted() -> None:
    got = complete("7-", [], 2)
    assert len(got) == 256
    assert got == sorted(got)
    assert all(c.startswith("7-") and c.endswith("-") for c in got)
    assert {c[2:-1] for c in got} == set(wordlist.words_for_position(0))


def test_complete_keeps_typed_non_pgp_words() -> None:
    assert complete("7-Custom-rev", [], 2) == ["7-Custom-revenge"]


def test_complete_is_case_sensitive() -> None:
    assert complete("7-Guit", [], 2) == []


def test_complete_needs_a_numeric_nameplate() -> None:
    assert complete("x-guit", [], 2) == []


def test_complete_matches_official_rule() -> None:
    """The column depends on the number of hyphens in the words part (even -> odd column)."""
    for prefix, column in [("", 0), ("a-", 1), ("a-b-", 0), ("a-b-c-", 1)]:
        got = complete(f"5-{prefix}", [], 9)
        assert {c.rsplit("-", 2)[-2] for c in got} == set(wordlist.words_for_position(column))


# --- one nameplate rule for every place that takes one -----------------------------------------
NOT_NAMEPLATES = ["", "4a", "7-x", "١٢", "²", " 7", "1" * 41]


@pytest.mark.parametrize("bad", NOT_NAMEPLATES)
def test_every_nameplate_check_refuses_the_same(bad: str) -> None:
    from hilltop.lan import wire
    from hilltop.rendezvous import codes
    from hilltop.rendezvous.mailbox import Mailbox

    assert not codes.is_nameplate(bad)
    with pytest.raises(CodeFormatError, match="a nameplate is 1-40 digits"):
        codes.check_nameplate(bad)
    with pytest.raises(CodeFormatError):
        Mailbox("appid", "side", lambda n: bytes(n)).claim_nameplate(bad)
    with pytest.raises(CodeFormatError):
        wire.mailbox_service_name(bad)
    assert wire.nameplate_of(f"nameplate-{bad}._wormhole._tcp.local.") is None


@pytest.mark.parametrize("good", ["0", "7", "1" * 40])
def test_every_nameplate_check_accepts_the_same(good: str) -> None:
    from hilltop.lan import wire
    from hilltop.rendezvous import codes
    from hilltop.rendezvous.mailbox import Mailbox

    assert codes.check_nameplate(good) == good
    mailbox = Mailbox("appid", "side", lambda n: bytes(n))
    mailbox.claim_nameplate(good)
    assert mailbox.nameplate == good
    assert wire.nameplate_of(wire.mailbox_service_name(good)) == good
