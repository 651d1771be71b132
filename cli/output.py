"""Everything the CLI says to a person goes through here: stderr for status, stdout for data.

Much of what is said comes from the peer (its text message, file names, refusals, error
texts) or from the network (server and LAN answers), so every line is passed through
:func:`terminal_safe` on its way out: a peer must not be able to clear the screen, retitle the
terminal or print a line that looks like ours.
"""

from __future__ import annotations

import functools
import re
import sys
from typing import TextIO

_CONTROLS = "\x00-\x1f\x7f-\x9f"
"""C0, DEL and C1: ESC starts every terminal escape sequence, 0x9b (CSI) is its one-byte form
on terminals that take 8-bit controls, BEL rings, CR and backspace overwrite what is shown."""

_LOOKS_ONLY = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
"""Bidi overrides, embeddings, isolates and marks reorder what follows them (a name can show
as ``txt.exe`` while being ``exe.txt``); the line and paragraph separators break lines on some
terminals."""

_SURROGATES = "\ud800-\udfff"
"""Lone surrogates are valid in JSON ("\\ud800") but not in UTF-8: printed raw they would end
the command with an encoding error, so they are always shown escaped."""

_PATTERNS = {
    "line": f"[{_CONTROLS}{_LOOKS_ONLY}{_SURROGATES}]",
    "text": f"\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_LOOKS_ONLY}{_SURROGATES}]",
    "unencodable": f"[{_SURROGATES}]",
}
"""What to escape in a status line, in a text message shown on a terminal, and anywhere."""


@functools.cache
def _pattern(kind: str) -> re.Pattern[str]:
    """The pattern of :data:`_PATTERNS`, compiled at its first use: the three took ~1.8 ms of
    every process's start-up, and most lines are printable ASCII, which needs none of them
    (bench/README.md, "Seventh session")."""
    return re.compile(_PATTERNS[kind])


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def terminal_safe(text: str, *, multiline: bool = False) -> str:
    """``text`` with every character that could act on a terminal written as a Python escape.

    Why Python escapes (``\\x1b``, ``\\r``, ``\\u202e``): official 0.24 shows received
    text as ``repr(message)[1:-1]``, so its users already read that notation. Unlike official
    we escape only what acts on a terminal (C0/C1 controls, DEL, bidi controls, line
    separators), not quotes, backslashes or other non-printing letters such as the joiners
    inside emoji, and with ``multiline`` a text message keeps its newlines, tabs and CRLF line
    ends readable (official prints a newline as ``\\n``). A status line (``multiline``
    false) escapes newlines and tabs too, so a peer's text can never start a line of its own.
    """
    if text.isascii() and text.isprintable():  # no control, bidi mark or surrogate
        return text
    return _pattern("text" if multiline else "line").sub(_escape, text)


def status(text: str = "", stream: TextIO | None = None) -> None:
    print(terminal_safe(text), file=stream or sys.stderr, flush=True)


def error(text: str) -> None:
    print(f"ERROR: {terminal_safe(text)}", file=sys.stderr, flush=True)


def received_text(message: str, stream: TextIO | None = None) -> None:
    """Print a received text message on stdout: escaped for a terminal, exact for a pipe.

    Decision: a pipe or file gets the message byte for byte and nothing else, because there
    it is data the user asked for (``wormhole receive CODE > notes.txt``), as with ``-o -``:
    ``printf abc | wormhole send --text -`` stores ``abc``, ``echo abc | ...`` stores
    ``abc`` and its newline, and the program reading it decides how to show it. Official 0.24
    prints ``repr(message)[1:-1]`` and a newline, so its file holds neither the message's
    own newlines nor its last byte. A terminal gets :func:`terminal_safe` (multi-line) and a
    final newline if the message has none, so the shell's prompt starts a line of its own;
    GNU ``ls`` draws the same line, replacing control characters in names with ``?`` only
    when stdout is a terminal. Lone surrogates cannot be written as UTF-8 at all, so they are
    escaped everywhere.
    """
    out = stream or sys.stdout
    if out.isatty():
        shown = terminal_safe(message, multiline=True)
        if not shown.endswith("\n"):
            shown += "\n"
    else:
        shown = message if message.isascii() else _pattern("unencodable").sub(_escape, message)
    out.write(shown)
    out.flush()


def qr_code(data: str, stream: TextIO | None = None) -> None:
    """Draw ``data`` as a QR code in text, as the official client does before its instructions.

    A terminal gets the compact half-block form; a pipe or log gets plain ASCII.
    """
    import qrcode  # only senders that show one pay for the import

    out = stream or sys.stderr
    code = qrcode.QRCode(border=1)
    code.add_data(data)
    code.print_ascii(out=out, tty=out.isatty(), invert=False)
    out.flush()
