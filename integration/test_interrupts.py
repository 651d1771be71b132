"""SIGTERM and Ctrl-C while a receive waits (for the typed code, for the peer): one line,
exit status 130, no traceback, no "bug in hilltop", and no waiting for someone to press Enter.
(Mid-transfer interrupts: ``test_interop_files.test_interrupted_receiver_removes_what_it_had``.)
"""

from __future__ import annotations

import signal
import subprocess
import time
from typing import TYPE_CHECKING

import pytest
from nsproc import hilltop_command

if TYPE_CHECKING:
    from conftest import Peers

INTERRUPTS = [pytest.param(signal.SIGTERM, id="sigterm"), pytest.param(signal.SIGINT, id="ctrl-c")]


def interrupted(proc: subprocess.Popen[bytes], interrupt: signal.Signals) -> str:
    """Send ``interrupt`` and return stderr; the process must end within 15 s, stdin open."""
    proc.send_signal(interrupt)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running 15 s after {interrupt.name}")
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "ERROR: interrupted before the transfer finished", err
    assert "Traceback" not in err and "bug" not in err and "Warning" not in err, err
    return err


def start_receive(peers: Peers, *code: str) -> subprocess.Popen[bytes]:
    """``wormhole receive`` with a stdin that stays open, as a terminal would."""
    return subprocess.Popen(
        [*hilltop_command(), "--relay-url", peers.servers.relay_url, "receive", *code],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_interrupt_at_the_code_prompt(peers: Peers, interrupt: signal.Signals) -> None:
    """The prompt's thread is blocked in ``input()``: it used to keep the command waiting
    until Enter was pressed."""
    proc = start_receive(peers)
    try:
        time.sleep(2.0)  # at the prompt
        interrupted(proc, interrupt)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_interrupt_while_waiting_for_the_peer(peers: Peers, fresh_code: str,
                                              interrupt: signal.Signals) -> None:
    proc = start_receive(peers, fresh_code)
    try:
        time.sleep(2.0)  # connected to the mailbox, no sender
        interrupted(proc, interrupt)
    finally:
        proc.kill()
        proc.wait()
