"""A question waits for its answer without stopping the reactor."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest
import pytest_twisted
from twisted.internet.defer import CancelledError
from twisted.internet.task import LoopingCall, deferLater

from hilltop.cli import prompts


class Keyboard:
    """A pipe standing in for the person's stdin; each end is closed exactly once."""

    def __init__(self) -> None:
        self.read_end, self._write_end = os.pipe()
        self._open = {self.read_end, self._write_end}

    def type(self, keys: bytes) -> None:
        os.write(self._write_end, keys)

    def hang_up(self) -> None:
        self._close(self._write_end)

    def _close(self, fd: int) -> None:
        if fd in self._open:
            self._open.discard(fd)
            os.close(fd)

    def close(self) -> None:
        for fd in (self._write_end, self.read_end):
            self._close(fd)


@pytest.fixture
def keyboard() -> Iterator[Keyboard]:
    board = Keyboard()
    yield board
    board.close()


@pytest_twisted.ensureDeferred
async def test_the_reactor_keeps_running_while_the_question_waits(
        keyboard: Keyboard) -> None:
    from twisted.internet import reactor

    ticks: list[float] = []
    ticker = LoopingCall(lambda: ticks.append(reactor.seconds()))
    ticker.start(0.01)
    threading.Timer(0.3, keyboard.type, args=(b"no\nyes\n",)).start()  # a slow person
    try:
        assert await prompts.ask_yes_no(reactor, "ok? ", fd=keyboard.read_end) is False
    finally:
        ticker.stop()
    assert len(ticks) >= 10, f"the reactor stood still while the question waited: {ticks}"
    assert os.read(keyboard.read_end, 16) == b"yes\n"  # only the answer's line was taken


@pytest.mark.parametrize(("typed", "agreed"), [
    (b"yes\n", True), (b"Y\r\n", True), (b" YES \n", True),
    (b"no\n", False), (b"\n", False), (b"yess\n", False), (b"", False),
])
@pytest_twisted.ensureDeferred
async def test_only_yes_agrees(keyboard: Keyboard, typed: bytes, agreed: bool) -> None:
    from twisted.internet import reactor

    keyboard.type(typed)
    keyboard.hang_up()  # b"": stdin closed without an answer
    assert await prompts.ask_yes_no(reactor, "ok? ", fd=keyboard.read_end) is agreed


@pytest_twisted.ensureDeferred
async def test_cancelling_stops_waiting_for_the_answer(keyboard: Keyboard) -> None:
    from twisted.internet import reactor

    line = prompts.read_line(reactor, fd=keyboard.read_end)
    line.cancel()
    with pytest.raises(CancelledError):
        await line
    keyboard.type(b"late\n")  # the thread still reads it; nobody is told
    await deferLater(reactor, 0.05, lambda: None)
