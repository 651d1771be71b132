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
from collections.abc import Callable
from typing import NoReturn

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
        run_command = _import_command()
        run_command()
    except KeyboardInterrupt:
        _interrupted()
    except SystemExit as done:  # how every command ends (click's standalone mode)
        if (done.code is None or isinstance(done.code, int)) and _flushed():
            _exit_now(done.code or 0)
        raise


def _import_command() -> Callable[[], object]:
    """Import the CLI with the cyclic collector off, then freeze what it imported
    (:func:`hilltop._runtime.memory.freeze_after_startup`: 30-50 ms of CPU per process)."""
    import gc

    gc.disable()
    try:
        from hilltop.cli.main import main as run_command
    finally:
        from hilltop._runtime.memory import freeze_after_startup

        freeze_after_startup()
    return run_command


def _flushed() -> bool:
    """Flush the output; False if that failed (a closed pipe), which the interpreter's own
    exit reports as it always did."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        return False
    return True


def _exit_now(status: int) -> NoReturn:
    """End the process without the interpreter's teardown, which costs 80-110 ms here (every
    module dict cleared, every object freed one by one) and waits for pool threads nobody
    needs any more (an aiortc import still running when direct TCP already won).

    By now the command is over: the reactor has stopped and the transfer finished or was
    cleaned up, received files are synced and closed (before the ack), and the threads left
    are daemons or idle pool workers. What the teardown would still do that matters is kept:
    the ``atexit`` handlers run (logging's flush among them) and the output is flushed.
    """
    import atexit
    import os

    atexit._run_exitfuncs()
    _flushed()
    os._exit(status)


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
