"""Typing the code at the prompt with tab completion, in a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from hilltop.rendezvous import wordlist

if TYPE_CHECKING:
    from conftest import Peer

HILLTOP = [os.path.join(os.path.dirname(sys.executable), "wormhole")]


def read_until(fd: int, needle: bytes, seen: bytearray, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while needle not in seen:
        if time.monotonic() > deadline:
            raise AssertionError(f"{needle!r} never appeared; screen so far: {bytes(seen)!r}")
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break


@pytest.mark.interop
def test_tab_completes_nameplate_and_words(official: Callable[..., Peer], mailbox_url: str,
                                           transit_helper: str) -> None:
    sender = official("send", "--text", "typed with completion")
    code = sender.wait_for_code()
    nameplate, first, second = code.split("-")
    pid, fd = pty.fork()
    if pid == 0:  # the child: hilltop's receiver on the terminal
        os.environ.update(WORMHOLE_RELAY_URL=mailbox_url, WORMHOLE_TRANSIT_HELPER=transit_helper)
        os.execv(HILLTOP[0], HILLTOP + ["receive"])
    screen = bytearray()
    try:
        read_until(fd, b"Enter receive wormhole code: ", screen)
        os.write(fd, nameplate.encode() + b"\t")
        read_until(fd, f"{nameplate}-".encode(), screen)
        # a unique prefix of each word, then TAB, must complete it (plus the hyphen)
        for word, position in ((first, 0), (second, 1)):
            choices = wordlist.words_for_position(position)
            prefix = next(word[:n] for n in range(1, len(word) + 1)
                          if [w for w in choices if w.startswith(word[:n])] == [word])
            os.write(fd, prefix.encode() + b"\t")
            read_until(fd, word.encode(), screen)
        os.write(fd, b"\r")
        read_until(fd, b"typed with completion", screen, timeout=60)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, bytes(screen)
    finally:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)
    assert sender.finish(30).returncode == 0
