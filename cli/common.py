"""What every command shares: the global options and the one place errors become exit codes.

Kept apart from ``main.py`` (which builds the click group and registers the commands) so a
command module can import it without importing every other command.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from hilltop.cli import output
from hilltop.errors import HilltopError


@dataclass
class GlobalOptions:
    appid: str
    relay_url: str
    transit_helper: str


def run(main: Callable[[Any], Coroutine[Any, Any, int | None]]) -> None:
    """Run ``main(reactor)`` on the asyncio reactor and exit with its status.

    This is the single place where errors turn into one line and an exit code.
    """
    from hilltop.reactor import install_asyncio_reactor

    reactor = install_asyncio_reactor()
    from twisted.internet.defer import ensureDeferred

    result: dict[str, int | None] = {"status": None}

    def done(status: int | None) -> None:
        result["status"] = status or 0

    def failed(failure: Any) -> None:
        result["status"] = 1
        if failure.check(HilltopError):
            output.error(str(failure.value))
        else:
            failure.printTraceback(file=sys.stderr)

    def stop(_: Any) -> None:
        if reactor.running:
            reactor.stop()

    def start() -> None:
        d = ensureDeferred(main(reactor))
        d.addCallbacks(done, failed)
        d.addBoth(stop)

    reactor.callWhenRunning(start)
    reactor.run()  # Ctrl-C and SIGTERM stop the reactor before main() finishes
    if result["status"] is None:
        output.error("interrupted before the transfer finished")
        sys.exit(130)
    sys.exit(result["status"])
