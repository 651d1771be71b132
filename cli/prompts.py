"""Questions a person answers while the reactor keeps running.

Why: ``input()`` or ``sys.stdin.readline()`` on the reactor thread stops everything else, so
the mailbox is neither read nor written until the person answers. That is how ``send
--verify`` lost its "no": the peer's ``version`` sat unread in the socket, so the rejection
waited in the outbox for a key confirmation that the close then threw away, and the receiver
waited forever. Here the line is read on a thread and handed back with ``callFromThread``.

The thread is a daemon reading the raw descriptor with ``os.read``, one byte at a time:
Twisted's thread pool joins its workers at shutdown and ``sys.stdin``'s buffered reader holds
a lock at interpreter exit, so either would turn Ctrl-C during the question into a hang (or a
fatal "could not acquire lock" error) until someone pressed Enter. One byte at a time leaves
whatever follows the answer on stdin unread.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

from twisted.internet.defer import Deferred

from hilltop.cli import output

STDIN = 0

YES = ("y", "yes")
"""Every other answer, an empty line and a closed stdin count as no: declining is the safe side."""


def read_line(reactor: Any, fd: int = STDIN) -> Deferred[str]:
    """The next line from ``fd`` (without its newline; "" at end of input), read off the
    reactor thread. Cancelling stops waiting; the thread ends with the process."""
    answered: Deferred[str] = Deferred()

    def deliver(line: str) -> None:
        if not answered.called:  # cancelled meanwhile: nobody wants the line
            answered.callback(line)

    def read() -> None:
        reactor.callFromThread(deliver, _read_line_blocking(fd))

    threading.Thread(target=read, name="hilltop-prompt", daemon=True).start()
    return answered


async def ask_yes_no(reactor: Any, question: str, fd: int = STDIN) -> bool:
    """Ask on stderr (stdout carries received data) and wait for yes or no without blocking.
    The question may hold what a peer chose (an offered name): it is shown escaped."""
    from hilltop.cli import events

    events.emit("question", question=question.strip())  # a script answers on stdin
    sys.stderr.write(output.terminal_safe(question))
    sys.stderr.flush()
    with on_screen(question):
        answer = await read_line(reactor, fd)
    return answer.strip().lower() in YES


_asking: list[str] = []
"""Questions on screen waiting for their answer (the cursor is at the end of the last)."""


@contextlib.contextmanager
def on_screen(question: str) -> Iterator[None]:
    """``question`` is shown and the cursor waits after it until the block ends."""
    _asking.append(question)
    try:
        yield
    finally:
        if question in _asking:  # end_question_line may have taken it off already
            _asking.remove(question)


def end_question_line() -> None:
    """Ctrl-C (or a failure) at a question: what is printed next gets a line of its own."""
    if _asking:
        _asking.clear()
        sys.stderr.write("\n")
        sys.stderr.flush()


_saved_modes: list[tuple[int, list[Any]]] = []
"""Terminal modes as they were before a prompt that changes them (readline's raw mode)."""


def save_terminal(fd: int = STDIN) -> None:
    """Remember ``fd``'s terminal modes, for :func:`restore_terminal` (nothing if no terminal).

    Why: readline puts the terminal in raw mode (no echo, no line editing, no CR to NL) while
    ``input()`` waits and restores it when ``input()`` returns. The code prompt's thread never
    returns when Ctrl-C or SIGTERM ends the command, so the shell was left with a terminal
    that showed nothing typed (``stty -a``: ``-icrnl -icanon -echo``).
    """
    import termios

    with contextlib.suppress(termios.error, OSError):  # not a terminal: nothing to restore
        _saved_modes.append((fd, termios.tcgetattr(fd)))


def restore_terminal() -> None:
    """Put back every mode :func:`save_terminal` saw; called on every way out of a command."""
    import signal
    import termios

    while _saved_modes:
        fd, modes = _saved_modes.pop()
        # a background job that sets terminal modes gets SIGTTOU, which would stop it
        previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            termios.tcsetattr(fd, termios.TCSANOW, modes)
        except (termios.error, OSError):  # the terminal went away: nobody to restore it for
            pass
        finally:
            signal.signal(signal.SIGTTOU, previous)


def _read_line_blocking(fd: int) -> str:
    line = bytearray()
    try:
        while not line.endswith(b"\n"):
            byte = os.read(fd, 1)
            if not byte:
                break
            line += byte
    except OSError:  # no usable stdin (closed, or a terminal that went away): no answer
        return ""
    return line.decode("utf-8", errors="replace").rstrip("\r\n")
