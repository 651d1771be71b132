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
