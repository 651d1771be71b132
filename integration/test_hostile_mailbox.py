"""A malicious or broken mailbox server (issue 20, point 4): hilltop exits with one clear line,
no traceback, no hang, and shows nothing the server wrote raw on the terminal.

The server is ``hostile_mailbox.py``, one misbehaviour per run. ``HILLTOP_MAILBOX_TIMEOUT_SCALE``
shortens hilltop's 30 s answer timeouts to 3 s so the silent servers cost seconds.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Peer

HERE = Path(__file__).resolve().parent
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
SCALE = {"HILLTOP_MAILBOX_TIMEOUT_SCALE": "0.1"}
"""30 s becomes 3 s: the welcome, claim and allocate timeouts; 10 s becomes 1 s for the goodbye."""


def start_hostile_mailbox(mode: str, started: list[subprocess.Popen[str]]) -> str:
    """``hostile_mailbox.py MODE``, appended to ``started`` (the caller kills it by its PID);
    returns ``ws://127.0.0.1:PORT/v1``."""
    proc = subprocess.Popen([sys.executable, str(HERE / "hostile_mailbox.py"), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    started.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("PORT "), f"hostile_mailbox.py {mode} did not start: {line!r}"
    return f"ws://127.0.0.1:{int(line.split()[1])}/v1"


@pytest.fixture
def hostile_mailbox() -> Iterator[Callable[[str], str]]:
    """``start(mode) -> ws://127.0.0.1:PORT/v1``; each server is killed by its PID afterwards."""
    started: list[subprocess.Popen[str]] = []
    yield lambda mode: start_hostile_mailbox(mode, started)
    for proc in started:
        proc.kill()
        proc.wait()


CASES = [
    # mode, command, what the one error line must say
    ("text-garbage", "receive", "mailbox server sent a message that is not JSON"),
    ("bad-utf8", "receive", "the mailbox server broke the WebSocket protocol"),
    ("binary-garbage", "receive", "mailbox server sent a message that is not UTF-8"),
    ("big", "receive", "mailbox server sent an oversized message"),
    ("huge", "receive", "the mailbox server sent a message over 100.7 MB"),
    ("unwelcome", "receive", "the mailbox server refused us: go away\\x1b[2J\\x1b]0;owned\\x07"),
    ("error", "receive", "mailbox server error: go away\\x1b[2J"),
    ("silent", "receive", "sent no welcome within 3 s"),
    ("no-answer", "receive", "did not answer our claim of the nameplate within 3 s"),
    ("no-answer", "send", "did not allocate a nameplate within 3 s"),
    ("out-of-order", "receive", "wrong code"),
    ("no-handshake", "receive", "cannot reach the mailbox server ws://127.0.0.1:"),
    ("not-websocket", "receive", "upgrade failed [200]"),
]


@pytest.mark.parametrize(("mode", "command", "says"), CASES,
                         ids=[f"{m}-{c}" for m, c, _ in CASES])
def test_a_hostile_server_ends_the_run_with_one_clear_line(
        hilltop: Callable[..., Peer], hostile_mailbox: Callable[[str], str],
        mode: str, command: str, says: str) -> None:
    url = hostile_mailbox(mode)
    args = ["receive", "4-purple-sausages"] if command == "receive" else [
        "send", "--text", "hello"]
    started = time.monotonic()
    result = hilltop(*args, relay_url=url, transit_helper="tcp:127.0.0.1:9",
                     env=SCALE).finish(30)
    took = time.monotonic() - started
    assert result.returncode != 0, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("ERROR:")]
    assert says in line, result.describe()
    assert not RAW.search(result.stderr), result.describe()
    assert took < 20, f"took {took:.1f} s:\n{result.describe()}"


def test_a_goodbye_never_confirmed_does_not_hold_the_sender(
        hilltop: Callable[..., Peer], hostile_mailbox: Callable[[str], str]) -> None:
    """Sender and receiver meet on a server that never confirms ``release`` or ``close``:
    the text arrives, and each side exits 0 about 1 s (the scaled 10 s) after its goodbye."""
    url = hostile_mailbox("no-close")
    sender = hilltop("send", "--code", "4-purple-sausages", "--text", "through a rude server",
                     relay_url=url, transit_helper="tcp:127.0.0.1:9", env=SCALE)
    receiver = hilltop("receive", "4-purple-sausages", relay_url=url,
                       transit_helper="tcp:127.0.0.1:9", env=SCALE).finish(30)
    sent = sender.finish(30)
    assert receiver.returncode == 0 and sent.returncode == 0, (receiver.describe(),
                                                               sent.describe())
    assert receiver.stdout == "through a rude server"  # into a pipe: exactly as sent


def test_a_server_that_closes_every_connection_is_given_up_on(
        hilltop: Callable[..., Peer], hostile_mailbox: Callable[[str], str]) -> None:
    """Issue 27 item 21: a server that closes each connection right after its welcome made
    hilltop reconnect once a second for ever, saying nothing. Now the attempts back off
    (1, 2, 4 s), each is announced, and the run ends at ``--idle-timeout`` (8 s here)."""
    url = hostile_mailbox("flap")
    started = time.monotonic()
    result = hilltop("receive", "--idle-timeout", "8", "4-purple-sausages", relay_url=url,
                     transit_helper="tcp:127.0.0.1:9").finish(60)
    took = time.monotonic() - started
    assert result.returncode == 1, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("ERROR:")]
    assert "closed our connection right after accepting it, 4 times in a row" in line, (
        result.describe())
    said = [ln.split("; ")[1] for ln in result.stderr.splitlines()
            if ln.startswith("Lost the connection to the mailbox server; ")]
    assert [s.split(" (")[0] for s in said] == [
        "trying again in 1 s", "trying again in 2 s", "trying again in 4 s", "giving up in 1 s"
    ], result.describe()
    assert 8 <= took < 40, f"took {took:.1f} s:\n{result.describe()}"
