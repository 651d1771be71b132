"""``send --verify``: the answer typed at the verifier prompt reaches the peer.

The hilltop sender runs on a pseudo-terminal, as a person would use it: the test reads the
screen, waits for ``Verifier ... ok? (yes/no):`` and types the answer. A "no" must end both
sides promptly (the official receiver and hilltop's), each with a non-zero exit and a line
that says why; a "yes" must still transfer. The receiver's own ``--verify`` line must show
the same verifier as the sender's prompt.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from nsproc import hilltop_command

if TYPE_CHECKING:
    from conftest import Peer, Peers

interop = pytest.mark.interop

ENDS_WITHIN = 20.0
"""Seconds each side may take to exit after the answer; a loopback exchange needs about one."""

PROMPT = re.compile(rb"Verifier ([0-9a-f]{64})\. ok\? \(yes/no\): ")
VERIFIER_LINE = re.compile(r"Verifier ([0-9a-f]{64})\.")
CODE = re.compile(rb"Wormhole code is: (\S+)")
PAYLOAD = b"compare the verifiers before you trust me\n"


class Terminal:
    """One process on a pseudo-terminal: the screen it draws and the keys a person types."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave,
                                     stderr=slave, start_new_session=True)
        os.close(slave)
        self._fd = master
        self.screen = bytearray()

    def _read(self, until: float) -> bool:
        """Read what is on the terminal by ``until``; False once the process closed it."""
        wait = max(0.0, min(0.2, until - time.monotonic()))
        ready, _, _ = select.select([self._fd], [], [], wait)
        if not ready:
            return True
        try:
            chunk = os.read(self._fd, 4096)
        except OSError:  # EIO: every process holding the terminal has exited
            return False
        self.screen += chunk
        return bool(chunk)

    def wait_for(self, pattern: re.Pattern[bytes], timeout: float = 60.0) -> re.Match[bytes]:
        deadline = time.monotonic() + timeout
        while not (match := pattern.search(self.screen)):
            if time.monotonic() > deadline or not self._read(deadline):
                raise AssertionError(f"/{pattern.pattern!r}/ never appeared on the screen:\n"
                                     f"{self.text()}")
        return match

    def type(self, keys: str) -> None:
        os.write(self._fd, keys.encode())

    def finish(self, timeout: float) -> int:
        """The exit status once the process ended; a process still running is a hang."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            if not self._read(deadline):
                break
        try:
            status = self.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the sender did not exit within {timeout:.0f}s:\n{self.text()}",
                        pytrace=False)
        while self._read(time.monotonic() + 0.2):  # the last lines it wrote
            pass
        return status

    def text(self) -> str:
        return self.screen.decode("utf-8", errors="replace").replace("\r\n", "\n")

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        os.close(self._fd)


@pytest.fixture
def sender_on_terminal(peers: Peers, tmp_path: Path) -> Iterator[Callable[..., Terminal]]:
    """``sender_on_terminal(*args)``: hilltop's ``wormhole`` on a pty, on the shared servers."""
    started: list[Terminal] = []

    def start(*args: str) -> Terminal:
        env = {**os.environ, "WORMHOLE_QR": "0", "PYTHONUNBUFFERED": "1", "PYTHONUTF8": "1"}
        argv = [*hilltop_command(), "--relay-url", peers.servers.relay_url,
                "--transit-helper", peers.servers.transit_helper, *args]
        terminal = Terminal(argv, tmp_path, env)
        started.append(terminal)
        return terminal

    try:
        yield start
    finally:
        for terminal in started:
            terminal.close()


def _send_with_verify(start: Callable[..., Terminal], tmp_path: Path) -> tuple[Terminal, str]:
    payload = tmp_path / "note.txt"
    payload.write_bytes(PAYLOAD)
    sender = start("send", "--verify", str(payload))
    return sender, sender.wait_for(CODE).group(1).decode()


def _receiver(kind: str, peers: Peers, code: str) -> Peer:
    run = peers.official if kind == "official" else peers.hilltop
    return run("receive", "--verify", "--accept-file", code)


def _same_verifier(sender: Terminal, receiver: Peer) -> None:
    shown = sender.wait_for(PROMPT).group(1).decode()
    receiver.wait_for_line(VERIFIER_LINE)
    theirs = VERIFIER_LINE.search(receiver.output("stderr"))
    assert theirs is not None and theirs.group(1) == shown, receiver.output("stderr")


def _answer_the_verifier(start: Callable[..., Terminal], peers: Peers, tmp_path: Path,
                         receiver_kind: str, answer: str) -> tuple[Terminal, Peer]:
    """A hilltop ``send --verify`` and a ``receive --verify`` of ``receiver_kind``; once both
    show the same verifier, the sender's user types ``answer``."""
    sender, code = _send_with_verify(start, tmp_path)
    receiver = _receiver(receiver_kind, peers, code)
    _same_verifier(sender, receiver)
    sender.type(answer + "\r")
    return sender, receiver

@interop
@pytest.mark.parametrize("receiver_kind", ["official", "hilltop"])
def test_no_at_the_verifier_prompt_ends_both_sides(
        sender_on_terminal: Callable[..., Terminal], peers: Peers, tmp_path: Path,
        receiver_kind: str) -> None:
    sender, receiver = _answer_the_verifier(sender_on_terminal, peers, tmp_path, receiver_kind,
                                            "no")

    sender_status = sender.finish(ENDS_WITHIN)
    received = receiver.finish(ENDS_WITHIN)

    screen = sender.text()
    assert sender_status != 0, screen
    assert "ERROR: verification rejected" in screen, screen
    assert received.returncode != 0, received.describe()
    assert "sender rejected verification check" in received.stderr, received.describe()
    assert not list(receiver.cwd.iterdir()), received.describe()  # nothing arrived
    for output in (screen, received.stderr):
        assert "Traceback" not in output, output


@interop
@pytest.mark.parametrize("receiver_kind", ["official", "hilltop"])
def test_yes_at_the_verifier_prompt_transfers(
        sender_on_terminal: Callable[..., Terminal], peers: Peers, tmp_path: Path,
        receiver_kind: str) -> None:
    sender, receiver = _answer_the_verifier(sender_on_terminal, peers, tmp_path, receiver_kind,
                                            "yes")

    assert sender.finish(ENDS_WITHIN) == 0, sender.text()
    received = receiver.finish(ENDS_WITHIN)
    assert received.returncode == 0, received.describe()
    assert (receiver.cwd / "note.txt").read_bytes() == PAYLOAD


@interop
def test_official_sender_saying_no_ends_hilltop_receive_verify(
        official: Callable[..., Peer], hilltop: Callable[..., Peer], fresh_code: str) -> None:
    # the official sender reads its answer with input(), so a piped "no" is enough here
    sender = official("send", "--verify", "--code", fresh_code, "--text", "not for you",
                      stdin="no\n")
    receiver = hilltop("receive", "--verify", fresh_code)

    sent = sender.finish(ENDS_WITHIN)
    received = receiver.finish(ENDS_WITHIN)

    assert sent.returncode != 0, sent.describe()
    assert received.returncode != 0, received.describe()
    assert VERIFIER_LINE.search(received.stderr), received.describe()
    assert ("ERROR: the sender abandoned the transfer: sender rejected verification check"
            in received.stderr), received.describe()
    assert "not for you" not in received.stdout, received.describe()
