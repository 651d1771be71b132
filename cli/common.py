"""What every command shares: the global options and the one place errors become exit codes.

Kept apart from ``main.py`` (which builds the click group and registers the commands) so a
command module can import it without importing every other command.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, cast

from hilltop._values import value
from hilltop.cli import events, exitcodes, output
from hilltop.cli.prompts import end_question_line, restore_terminal
from hilltop.errors import HilltopError, OutOfFileDescriptors

if TYPE_CHECKING:
    from hilltop import api


def zero_mode_code(code: str | None, lan: bool, code_flag: str) -> str:
    """The code for ``-0`` (send and receive alike), refusing what cannot go with it."""
    import click

    from hilltop.rendezvous.codes import ZERO_MODE_CODE

    if code is not None:
        raise click.UsageError(f"give either {code_flag} or -0, not both")
    if lan:
        raise click.UsageError("-0 needs a mailbox server: anyone on the LAN could join")
    return ZERO_MODE_CODE


@value(frozen=False)
class GlobalOptions:
    """The options every command shares (given before the command name)."""

    appid: str
    relay_url: str
    transit_helpers: tuple[str, ...]  # as given by --transit-helper or the environment

    @property
    def default_transit_helper(self) -> bool:
        """No relay chosen on the command line (none given, or only the default one)."""
        from hilltop.api import TRANSIT_HELPER

        return self.transit_helpers in ((), (TRANSIT_HELPER,))


_CLEANUP_SECONDS = 5.0
"""How long an interrupted transfer may take to clean up before the process exits anyway."""


def exit_with(error: HilltopError) -> NoReturn:
    """End the command for ``error`` found before :func:`run` started (an argument that turned
    out unusable): the same ``ERROR:`` line, exit status and ``--json`` event as in :func:`run`."""
    outcome = exitcodes.outcome_of(error)
    events.error(outcome.code, outcome.status, str(error))
    sys.exit(outcome.status)


_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})


def known_error(error: BaseException) -> BaseException:
    """``error``, or what it really is when the process or the system ran out of file
    descriptors anywhere in its chain: one can fail in any ``open``, ``socket`` or even an
    ``import`` (seen: "unexpected OSError: [Errno 24] ... bug in hilltop"), and it is a limit to
    raise, not a bug. Twisted keeps a connect's errno in ``ConnectError.osError``."""
    cause: BaseException | None = error
    for _ in range(8):  # a chain is short; a cycle must not hang the error path
        if cause is None:
            break
        number = getattr(cause, "errno", None) or getattr(cause, "osError", None)
        if number in _OUT_OF_DESCRIPTORS:
            return OutOfFileDescriptors(_descriptors_message(number))
        cause = cause.__cause__ or cause.__context__
    return error


def _descriptors_message(number: int) -> str:
    if number == errno.ENFILE:
        return ("the system has run out of open files (ENFILE); close other programs and "
                "try again")
    try:
        import resource

        limit = f" ({resource.getrlimit(resource.RLIMIT_NOFILE)[0]})"
    except (ImportError, OSError, ValueError):
        limit = ""
    return (f"too many open files: hilltop reached this process's limit{limit}; raise it "
            "(ulimit -n) or close other programs, and try again")


def report_unexpected(error: BaseException, traceback: str, *, fatal: bool = True) -> None:
    """Say in one line that something went wrong that hilltop did not foresee.

    Every failure hilltop expects is a :class:`HilltopError` with a sentence for a person;
    anything else is a bug (ours or a plugin's). A screenful of traceback helps nobody at the
    terminal, so it goes to a file that a bug report can attach, and the line says where.
    Only if that file cannot be written (a full disk, say) is the traceback printed instead.
    ``fatal=False`` is for an error that did not end the command (one Twisted logged): the
    line is a warning and the exit status stays what the command made it.
    """
    import tempfile

    say = output.error if fatal else (lambda text: output.status(f"Warning: {text}"))
    known = known_error(error)
    if isinstance(known, HilltopError):
        say(str(known))
        return
    summary = f"{type(error).__name__}: {error}".rstrip(": ")
    try:
        fd, path = tempfile.mkstemp(prefix="hilltop-error-", suffix=".txt")
        with open(fd, "w", encoding="utf-8") as report:
            report.write(traceback)
    except OSError:
        say(f"unexpected {summary} (a bug in hilltop)")
        sys.stderr.write(output.terminal_safe(traceback, multiline=True))
        return
    say(f"unexpected {summary}; this is a bug in hilltop, details in {path}")


_UNHANDLED_HEADING = "Unhandled error in Deferred:"
"""The line Twisted logs on its own just before the failure of an unhandled Deferred."""


def _route_twisted_log() -> None:
    """Send Twisted's log where the CLI's own errors go.

    Until logging begins, Twisted prints its critical events to stderr as they come, and
    the one a program meets is "Unhandled error in Deferred" with a traceback (a failure
    nobody handled, found when the Deferred is collected). Such a failure is a bug: it gets
    :func:`report_unexpected`'s one line and file. Python warnings, which Twisted's logging
    takes over, are still printed as Python prints them; everything else is dropped (the
    CLI logs nothing on purpose).
    """
    from twisted.logger import ILogObserver, LogLevel, formatEvent, globalLogBeginner

    def observe(event: dict[str, Any]) -> None:
        if event.get("log_level") == LogLevel.critical:
            failure = event.get("log_failure")
            if failure is not None:
                report_unexpected(failure.value, failure.getTraceback(), fatal=False)
            elif event.get("log_format") != _UNHANDLED_HEADING:  # the failure follows it
                output.status(f"Warning: {formatEvent(event)}")
        elif "warning" in event and "category" in event:
            category = str(event["category"]).removeprefix("builtins.")
            sys.stderr.write(output.terminal_safe(
                f"{event.get('filename')}:{event.get('lineno')}: "
                f"{category}: {event['warning']}\n", multiline=True))

    # Twisted calls any callable observer; the interface is only declared for classes.
    globalLogBeginner.beginLoggingTo([cast(ILogObserver, observe)], redirectStandardIO=False)


def run(main: Callable[[Any], Coroutine[Any, Any, int | None]]) -> None:
    """Run ``main(reactor)`` on the asyncio reactor and exit with its status.

    This is the single place where errors turn into one line and an exit code
    (:mod:`hilltop.cli.exitcodes`), and with ``--json`` into the ``error`` event.
    """
    from hilltop._runtime.reactor import install_asyncio_reactor

    reactor = install_asyncio_reactor()
    _route_twisted_log()
    from twisted.internet.defer import Deferred, ensureDeferred
    from twisted.internet.error import ReactorNotRunning

    result: dict[str, int | None] = {"status": None}
    running: list[Deferred[int | None]] = []
    interrupted: list[bool] = []

    def done(status: int | None) -> None:
        result["status"] = status or 0

    def failed(failure: Any) -> None:
        if interrupted:  # cancelled by Ctrl-C or SIGTERM: reported below, exit 130
            return
        end_question_line()  # a prompt left waiting: the error starts a line of its own
        error = known_error(failure.value)
        outcome = exitcodes.outcome_of(error)
        result["status"] = int(outcome.status)
        if isinstance(error, HilltopError):
            events.error(outcome.code, outcome.status, str(error))
        else:
            report_unexpected(failure.value, failure.getTraceback())
            if events.json_mode():
                events.emit("error", code=outcome.code, exit_status=int(outcome.status),
                            message=f"unexpected {type(failure.value).__name__} "
                                    "(a bug in hilltop)")

    def stop(_: Any) -> None:
        with contextlib.suppress(ReactorNotRunning):  # already stopping (interrupted)
            reactor.stop()

    def interrupt(signum: int, frame: Any) -> None:
        """Twisted's own SIGINT/SIGTERM handlers call ``reactor.stop`` unguarded, so a signal
        that came while the command was already ending (a second Ctrl-C, a SIGTERM as the
        last reply arrived) logged ReactorNotRunning, reported as a bug in hilltop."""
        reactor.callFromThread(end_question_line)
        reactor.callFromThread(stop, None)

    def start() -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):  # after Twisted installed its own
            signal.signal(signum, interrupt)
        d = ensureDeferred(main(reactor))
        running.append(d)
        d.addCallbacks(done, failed)
        d.addBoth(stop)

    def cancel_unfinished() -> Deferred[None] | None:
        """Ctrl-C and SIGTERM stop the reactor: cancel the transfer first and give it a few
        seconds to clean up (a partial download is deleted, threads stop, peers are told)
        instead of leaving its temporary files behind."""
        if not running or running[0].called:
            return None
        interrupted.append(True)
        cleaned: Deferred[None] = Deferred()
        running[0].addBoth(lambda _: None if cleaned.called else cleaned.callback(None))
        running[0].cancel()
        cleaned.addTimeout(_CLEANUP_SECONDS, reactor)
        cleaned.addErrback(lambda _: None)  # out of time: exit anyway
        return cleaned

    reactor.addSystemEventTrigger("before", "shutdown", cancel_unfinished)
    reactor.callWhenRunning(start)
    reactor.run()
    restore_terminal()  # before anything is printed: a prompt may have left it raw
    from hilltop.cli import timing

    status = result["status"]
    if status is None:
        gone = exitcodes.INTERRUPTED
        events.error(gone.code, gone.status, "interrupted before the transfer finished")
        timing.finish(gone.status)
        _exit_at_once(gone.status)
        return
    timing.finish(status)
    sys.exit(status)


def _exit_at_once(status: int) -> None:
    """Exit without the interpreter's shutdown, after the reactor cleaned up the transfer.

    An interrupt can leave a daemon thread blocked in a read of stdin (the code prompt), and
    the interpreter's shutdown then aborts ("could not acquire lock for <stdin> at interpreter
    shutdown", exit status -6) instead of exiting with ``status``. The transfer has already
    been cancelled and cleaned up by then, so only the output buffers are left to flush.
    """
    import os

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


async def close_quietly(w: api.Wormhole) -> None:
    """Close the wormhole; an error that already ended it was reported by whoever awaited.

    Ctrl-C or SIGTERM while closing still lets the close finish (the interrupt's cleanup
    allows it a few seconds): the last message queued before it, "transfer rejected" after
    a "no" say, was otherwise cut off inside this process and its sender waited for ever.
    """
    from twisted.internet.defer import CancelledError

    try:
        await w.close()
    except CancelledError:
        with contextlib.suppress(Exception):
            await w.when_closed()
        raise
    except Exception:  # noqa: BLE001, S110 - the first error is the one the user sees
        pass
