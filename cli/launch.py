"""The ``wormhole`` command's first lines: Ctrl-C and SIGTERM are handled before anything else.

Why a module of its own: importing the CLI (Twisted, click, the protocol) takes ~0.2 s, and a
SIGTERM in that window killed the process with no word and status -15, a Ctrl-C printed a
``KeyboardInterrupt`` traceback from somewhere inside an import. Here both become
``KeyboardInterrupt`` from the first instruction on, and one that arrives before the command
handles signals itself (:func:`hilltop.cli.common.run`) ends it with the same line and status
130 as an interrupted transfer. Nothing can need cleaning up that early.
"""

from __future__ import annotations

import signal
import sys

INTERRUPTED = 130
"""``hilltop.cli.exitcodes.ExitStatus.INTERRUPTED``, without importing it."""
MESSAGE = "interrupted before the transfer finished"


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Handle the signals, then import and run :func:`hilltop.cli.main.main`."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:  # nohup, background jobs: keep
            signal.signal(signum, _raise_interrupt)
    if sys.argv[1:] == ["--version"]:  # the CLI's imports cost ~0.4 s of CPU, unneeded here
        from hilltop.cli.version import version_text

        print(version_text())
        return
    try:
        from hilltop.cli.main import main as run_command

        run_command()
    except KeyboardInterrupt:
        _interrupted()


def _interrupted() -> None:
    """The ``ERROR:`` line (and with ``--json`` the event) of an interrupt, status 130."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut this short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        from hilltop.cli import events

        if "--json" in sys.argv[1:]:
            events.enable_json()
        events.error("interrupted", INTERRUPTED, MESSAGE)
    except BaseException:  # noqa: BLE001 - interrupted inside that import: say it plainly
        sys.stderr.write(f"ERROR: {MESSAGE}\n")
    sys.exit(INTERRUPTED)
