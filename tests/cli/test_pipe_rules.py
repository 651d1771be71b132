"""The CLI's pipe rules: the --text - limit, what counts as a stream, stdout on a terminal."""

from __future__ import annotations

import io
import os
import sys

import click
import pytest

from hilltop.cli import pipes
from hilltop.cli.progress import TransferProgress
from hilltop.errors import LocalError


class _CountingStdin(io.StringIO):
    """A stdin that remembers how much was asked for, to show nothing is read past the limit."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.asked: list[int] = []

    def read(self, size: int | None = -1) -> str:  # type: ignore[override]
        self.asked.append(-1 if size is None else size)
        return super().read(size)


def test_text_at_the_limit_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", _CountingStdin("a" * pipes.TEXT_LIMIT))
    assert len(pipes.read_stdin_text()) == pipes.TEXT_LIMIT


def test_text_over_the_limit_is_refused_without_reading_it_all(
        monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = _CountingStdin("a" * (3 * pipes.TEXT_LIMIT))
    monkeypatch.setattr(sys, "stdin", stdin)
    with pytest.raises(LocalError, match=r"over 1.0 MB .*wormhole send -"):
        pipes.read_stdin_text()
    assert stdin.asked == [pipes.TEXT_LIMIT + 1]
    assert stdin.tell() == pipes.TEXT_LIMIT + 1  # the rest was never read


def test_multibyte_text_counts_bytes() -> None:
    with pytest.raises(LocalError, match="over"):
        pipes.check_text_size("é" * (pipes.TEXT_LIMIT // 2 + 1))
    pipes.check_text_size("é" * (pipes.TEXT_LIMIT // 2))


def test_text_that_escapes_too_big_is_refused() -> None:
    with pytest.raises(LocalError, match="escaped"):
        pipes.check_text_size("\x01" * pipes.TEXT_LIMIT)


def test_what_is_a_stream(tmp_path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    regular = tmp_path / "file"
    regular.write_bytes(b"x")
    assert pipes.is_stream_path("-")
    assert pipes.is_stream_path(str(fifo))
    assert pipes.is_stream_path("/dev/null")  # a character device
    assert not pipes.is_stream_path(str(regular))
    assert not pipes.is_stream_path(str(tmp_path))
    assert not pipes.is_stream_path(str(tmp_path / "missing"))


def test_stdout_on_a_terminal_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdout", Tty())
    with pytest.raises(click.UsageError, match="terminal"):
        pipes.refuse_terminal_stdout()
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    pipes.refuse_terminal_stdout()


def test_progress_of_unknown_total_sums_what_moved() -> None:
    shown = TransferProgress(None, hide=True, stream=io.StringIO())
    shown.connected("Receiving...", "direct-tcp x")
    shown.update(1_500_000)
    shown.update(500_000)
    assert shown.summary("Received").startswith("Received 2.0 MB in ")
