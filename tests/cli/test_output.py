"""What a peer wrote never reaches the terminal raw: every CLI output path escapes it."""

from __future__ import annotations

import io
import os
import re

import pytest
import pytest_twisted
from hypothesis import given
from hypothesis import strategies as st

from hilltop.cli import output

CLEAR_SCREEN = "\x1b[2J\x1b[H"
RETITLE = "\x1b]0;owned\x07"
FAKE_LINE = "\rFile sent and confirmed by the receiver. Transfer complete."
HOSTILE = f"hi{CLEAR_SCREEN}{RETITLE}{FAKE_LINE}\b\x7f\x9b2J\u202etxt.exe\u2028\ud800"

RAW_IN_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                         "\u2028\u2029\ud800-\udfff]")
RAW_IN_TEXT = re.compile("\r(?!\n)|[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f"
                         "\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_status_line_shows_escape_sequences_as_text() -> None:
    shown = output.terminal_safe(HOSTILE)
    assert shown == ("hi\\x1b[2J\\x1b[H\\x1b]0;owned\\x07\\rFile sent and confirmed by the "
                     "receiver. Transfer complete.\\x08\\x7f\\x9b2J\\u202etxt.exe\\u2028\\ud800")


def test_a_status_line_cannot_start_a_line_of_its_own() -> None:
    assert output.terminal_safe("refused\nERROR: fake\tline") == "refused\\nERROR: fake\\tline"


def test_a_text_message_keeps_its_lines_and_tabs() -> None:
    text = "first\tcolumn\nsecond line\r\nthird line from Windows\n"
    assert output.terminal_safe(text, multiline=True) == text


def test_a_text_message_loses_its_controls_but_not_its_lines() -> None:
    shown = output.terminal_safe(f"one{CLEAR_SCREEN}\ntwo{FAKE_LINE}\v\f", multiline=True)
    assert shown == ("one\\x1b[2J\\x1b[H\ntwo\\rFile sent and confirmed by the receiver. "
                     "Transfer complete.\\x0b\\x0c")


def test_readable_text_is_left_alone() -> None:
    text = "naïve résumé ✓ 家族 👨\u200d👩\u200d👧 'quoted' \\x1b back\\slash"
    assert output.terminal_safe(text) == text
    assert output.terminal_safe(text, multiline=True) == text


@given(st.text())
def test_nothing_unsafe_survives(text: str) -> None:
    line = output.terminal_safe(text)
    assert not RAW_IN_LINE.search(line)
    block = output.terminal_safe(text, multiline=True)
    assert not RAW_IN_TEXT.search(block)
    block.encode("utf-8")  # lone surrogates are escaped, so printing cannot fail


@given(st.one_of(st.text(), st.text(st.characters(max_codepoint=127))), st.booleans())
def test_the_printable_ascii_shortcut_changes_nothing(text: str, multiline: bool) -> None:
    """Printable ASCII skips the patterns; anything goes through them: both give what the
    pattern alone gives."""
    kind = "text" if multiline else "line"
    everything = output._pattern(kind).sub(output._escape, text)
    assert output.terminal_safe(text, multiline=multiline) == everything


def test_received_text_on_a_terminal_is_escaped() -> None:
    terminal = _Terminal()
    output.received_text(f"line one{CLEAR_SCREEN}\nline two", terminal)
    assert terminal.getvalue() == "line one\\x1b[2J\\x1b[H\nline two\n"


def test_received_text_on_a_terminal_ends_its_line_once() -> None:
    """The shell's prompt gets a line of its own, and a message's own newline is not doubled."""
    terminal = _Terminal()
    output.received_text("ends in a newline\n", terminal)
    assert terminal.getvalue() == "ends in a newline\n"


@pytest.mark.parametrize("message", ["abc", "abc\n", "abc\n\n", "", f"exact{CLEAR_SCREEN}\r\n"])
def test_received_text_into_a_pipe_is_exact(message: str) -> None:
    """``wormhole receive CODE > file`` stores what the sender sent and nothing more (no
    newline added: ``printf abc | wormhole send --text -`` used to arrive as ``abc\\n``)."""
    pipe = io.StringIO()
    output.received_text(message, pipe)
    assert pipe.getvalue() == message


def test_lone_surrogates_are_escaped_even_into_a_pipe() -> None:
    """UTF-8 cannot carry them: written raw, printing would fail."""
    pipe = io.StringIO()
    output.received_text("half \ud83d pair", pipe)
    assert pipe.getvalue() == "half \\ud83d pair"


def test_status_and_error_lines_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    output.status(f"Receiving file named '{HOSTILE}'")
    output.error(f"the sender abandoned the transfer: {HOSTILE}\nok")
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[1].startswith("ERROR: the sender abandoned the transfer: hi\\x1b[2J")
    assert not RAW_IN_LINE.search(err.replace("\n", ""))


@pytest_twisted.ensureDeferred
async def test_the_accept_prompt_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from twisted.internet import reactor

    from hilltop.cli import prompts

    read_end, write_end = os.pipe()
    os.write(write_end, b"n\n")
    os.close(write_end)
    try:
        assert not await prompts.ask_yes_no(reactor, f"ok? (y/N) [saves as {HOSTILE}]: ",
                                            fd=read_end)
    finally:
        os.close(read_end)
    err = capsys.readouterr().err
    assert err.startswith("ok? (y/N) [saves as hi\\x1b[2J") and not RAW_IN_LINE.search(err)
