"""What a person sees: a send and a receive on real terminals (tmux), read back from the screen.

Why tmux and not a pipe: the progress bar is drawn only on a terminal, and the defect it had
(tqdm drew "0%" before the "Receiving (->...)" line, which then landed after the bar and left a
stale 0% line) shows only where carriage returns and line erases are interpreted. tmux keeps
the screen as a terminal renders it, and ``capture-pane -p`` prints it as text.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from nsproc import hilltop_command

if TYPE_CHECKING:  # conftest is pytest's to import; at runtime these come through fixtures
    from conftest import Peer

PAYLOAD_BYTES = 30_000_000
PAYLOAD_SHOWN = "30.0 MB"
DEADLINE_SECONDS = 25.0
"""The whole exchange takes about a second on loopback; the test gives up well within 30 s."""
EXIT_LINE = r"^exit status (\d+)$"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="needs tmux (apt-get install tmux)")


class Terminals:
    """One private tmux server (its own socket); each ``open`` is a window of 100x40."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", str(self.socket), *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def open(self, name: str, cwd: Path, argv: list[str], after: str = "") -> None:
        """Run ``argv`` in a new terminal; the shell prints its exit status, runs ``after``
        and keeps the screen, so it can be read after the command ended. The command's PID
        is written to ``cwd/NAME.pid``."""
        pid_file = shlex.quote(str(cwd / f"{name}.pid"))
        command = f"sh -c 'echo $$ > {pid_file}; exec \"$@\"' sh {shlex.join(argv)}"
        # the trap: Ctrl-C reaches this shell too, and would end it before it reports
        line = (f"trap : INT; cd {shlex.quote(str(cwd))} && {command}; "
                f'echo "exit status $?"; {after or ":"}; sleep 120')
        self.tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "40",
                  "env", "TERM=xterm-256color", "PYTHONUTF8=1", "WORMHOLE_QR=0",
                  "sh", "-c", line)

    def screen(self, name: str) -> str:
        """The screen and its scroll-back, as shown (wrapped lines joined)."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", name)

    def wait_for(self, name: str, pattern: str, until: float) -> str:
        while True:
            shown = self.screen(name)
            if re.search(pattern, shown, re.MULTILINE):
                return shown
            if time.monotonic() > until:
                raise AssertionError(f"{name}: {pattern!r} never appeared; screen:\n{shown}")
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True,
                       timeout=10, check=False)


@pytest.fixture
def terminals(tmp_path: Path) -> Iterator[Terminals]:
    opened = Terminals(tmp_path / "tmux.sock")
    try:
        yield opened
    finally:
        opened.close()


def in_order(screen: str, patterns: list[str]) -> list[str]:
    """The lines matching each pattern, checked to come one after the other on the screen."""
    lines = [line.rstrip() for line in screen.splitlines()]  # an erased bar leaves blanks
    found, at = [], 0
    for pattern in patterns:
        for index in range(at, len(lines)):
            if re.search(pattern, lines[index]):
                found.append(lines[index])
                at = index + 1
                break
        else:
            raise AssertionError(f"{pattern!r} not found after line {at}; screen:\n{screen}")
    return found


def test_send_and_receive_screens(terminals: Terminals, tmp_path: Path, mailbox_url: str,
                                  transit_helper: str, fresh_code: str) -> None:
    until = time.monotonic() + DEADLINE_SECONDS
    sender_dir, receiver_dir = tmp_path / "send", tmp_path / "receive"
    sender_dir.mkdir()
    receiver_dir.mkdir()
    payload = os.urandom(PAYLOAD_BYTES)
    (sender_dir / "payload.bin").write_bytes(payload)
    servers = ["--relay-url", mailbox_url, "--transit-helper", transit_helper]

    terminals.open("send", sender_dir, [*hilltop_command(), *servers, "send", "--code",
                                        fresh_code, "payload.bin"])
    terminals.wait_for("send", "^On the other computer", until)
    terminals.open("receive", receiver_dir, [*hilltop_command(), *servers, "receive",
                                             fresh_code])
    terminals.wait_for("receive", r"ok\? \(y/N\)", until)
    terminals.tmux("send-keys", "-t", "receive", "y", "Enter")
    received = terminals.wait_for("receive", EXIT_LINE, until)
    sent = terminals.wait_for("send", EXIT_LINE, until)

    size = re.escape(PAYLOAD_SHOWN)
    summary = rf" {size} in [\d.]+ s \(([\d.]+ [kMG]B/s|too fast to measure)\) via (\S.*)$"
    sender_lines = in_order(sent, [
        rf"^Sending {size} file named 'payload\.bin'$",
        rf"^Wormhole code is: {fresh_code}$",
        r"^Sending \((\S.*)\)\.\.\.$",
        rf"^Sent{summary}",
        r"^File sent and confirmed by the receiver\. Transfer complete\.$",
        r"^exit status 0$",
    ])
    receiver_lines = in_order(received, [
        rf"^Receiving {size} file named 'payload\.bin'$",
        rf"^ok\? \(y/N\) \[saves {size} as payload\.bin\]: y$",
        r"^Receiving \(->(\S.*)\)\.\.\.$",
        rf"^Received{summary}",
        r"^Received payload\.bin$",
        r"^exit status 0$",
    ])
    for screen in (sent, received):
        # no stale progress bar (tqdm draws "NN%|"), no raw byte counts
        assert "%" not in screen, screen
        assert str(PAYLOAD_BYTES) not in screen, screen
    # each summary names the transport its own "Sending (...)" / "Receiving (->...)" line named
    for lines in (sender_lines, receiver_lines):
        connected = re.search(r"\((?:->)?(.*)\)\.\.\.$", lines[2])
        assert connected is not None and lines[3].endswith(f" via {connected.group(1)}")
    assert (receiver_dir / "payload.bin").read_bytes() == payload


TERMINAL_MODES = r"^modes: (\S+) (\S+) (\S+)$"
"""The line ``stty`` prints after the command: icrnl, icanon and echo, each "-" when off."""


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_interrupt_at_the_code_prompt_restores_the_terminal(
        terminals: Terminals, tmp_path: Path, mailbox_url: str, stop: str) -> None:
    """readline's raw mode used to outlive Ctrl-C or SIGTERM at the prompt (the shell then
    showed nothing typed), and the error line was glued to the half-typed code."""
    until = time.monotonic() + DEADLINE_SECONDS
    show_modes = ("m=$(stty -a | tr '\\n;' '  '); for f in icrnl icanon echo; do "
                  "case \" $m \" in *\" -$f \"*) printf ' -%s' $f;; *) printf ' %s' $f;; "
                  "esac; done | sed 's/^/modes:/'; echo")
    terminals.open("receive", tmp_path, [*hilltop_command(), "--relay-url", mailbox_url,
                                         "receive"], after=show_modes)
    terminals.wait_for("receive", r"^Enter receive wormhole code: $", until)
    terminals.tmux("send-keys", "-t", "receive", "4-pa")
    terminals.wait_for("receive", r"^Enter receive wormhole code: 4-pa$", until)
    if stop == "ctrl-c":
        terminals.tmux("send-keys", "-t", "receive", "C-c")
    else:
        os.kill(int((tmp_path / "receive.pid").read_text()), signal.SIGTERM)
    shown = terminals.wait_for("receive", TERMINAL_MODES, until)
    in_order(shown, [
        r"^Enter receive wormhole code: 4-pa$",  # the error is not glued to what was typed
        r"^ERROR: interrupted before the transfer finished$",
        r"^exit status 130$",
        r"^modes: icrnl icanon echo$",  # none of them left off
    ])


def test_ctrl_c_mid_transfer_erases_the_bar(terminals: Terminals, tmp_path: Path,
                                            mailbox_url: str, transit_helper: str,
                                            fresh_code: str, hilltop: Callable[..., Peer]
                                            ) -> None:
    """The bar used to stay above "Kept ..." and the error: the echoed "^C" wrapped past a
    full-width bar, and tqdm's erase cleared the wrong line. The line about the partial
    agrees with an error that may say "not saved"."""
    until = time.monotonic() + DEADLINE_SECONDS
    source = tmp_path / "huge.bin"
    with open(source, "wb") as f:
        f.truncate(8 * 1024 ** 3)  # sparse: cheap to send, far too long to finish first
    sender = hilltop("send", "--code", fresh_code, str(source))
    sender.wait_for_code()
    dest = tmp_path / "receive"
    dest.mkdir()
    terminals.open("receive", dest, [*hilltop_command(), "--relay-url", mailbox_url,
                                     "--transit-helper", transit_helper, "receive",
                                     "--accept-file", fresh_code])
    terminals.wait_for("receive", r"%\|", until)
    partial = dest / ".huge.bin.hilltop-part"
    while not (partial.exists() and partial.stat().st_size > 0):  # so there is one to keep
        assert time.monotonic() < until, terminals.screen("receive")
        time.sleep(0.05)
    terminals.tmux("send-keys", "-t", "receive", "C-c")
    shown = terminals.wait_for("receive", EXIT_LINE, until)
    try:
        assert "%|" not in shown, shown  # no bar left on the screen
        in_order(shown, [
            r"^Receiving \(->",
            r"^huge\.bin was not saved; the [\d.]+ [kMG]B of 8\.6 GB received so far are kept "
            r"\(hidden\), and receiving this file here again continues from there$",
            r"^ERROR: interrupted before the transfer finished$",
            r"^exit status 130$",
        ])
    finally:
        shutil.rmtree(dest)  # the kept partial: up to a few GB
