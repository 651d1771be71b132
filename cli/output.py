"""Everything the CLI says to a person goes through here: stderr for status, stdout for data."""

from __future__ import annotations

import sys
from typing import TextIO


def status(text: str = "", stream: TextIO | None = None) -> None:
    print(text, file=stream or sys.stderr, flush=True)


def error(text: str) -> None:
    print(f"ERROR: {text}", file=sys.stderr, flush=True)


def ask_yes_no(question: str) -> bool:
    """Ask on the terminal; anything but yes/y counts as no (and so does a closed stdin)."""
    sys.stderr.write(question)  # stdout carries received data; prompts go with the status
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if not answer:
        return False  # closed stdin
    return answer.strip().lower() in ("y", "yes")


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
