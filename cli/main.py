"""The ``wormhole`` (alias ``hilltop``) command: shared flags, then one module per command.

Flag names and environment variables match the official CLI so ours is a drop-in
replacement. Every :class:`~hilltop.errors.HilltopError` becomes one ``ERROR:`` line and
exit status 1; tracebacks are reserved for bugs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import click

from hilltop import __version__, api
from hilltop.cli import output
from hilltop.errors import HilltopError


@dataclass
class GlobalOptions:
    appid: str
    relay_url: str
    transit_helper: str


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--appid", default=api.APPID, show_default=True, metavar="APPID",
              help="application id: both sides must use the same one")
@click.option("--relay-url", default=api.RELAY_URL, show_default=True, metavar="URL",
              envvar="WORMHOLE_RELAY_URL", show_envvar=True,
              help="rendezvous (mailbox) server to use")
@click.option("--transit-helper", default=api.TRANSIT_HELPER, show_default=True,
              metavar="tcp:HOST:PORT", envvar="WORMHOLE_TRANSIT_HELPER", show_envvar=True,
              help="transit relay to use")
@click.version_option(__version__, prog_name="hilltop")
@click.pass_context
def cli(ctx: click.Context, appid: str, relay_url: str, transit_helper: str) -> None:
    """Create a Magic Wormhole and send text, files or directories through it.

    Both sides speak the same short code; the key comes from SPAKE2, so only someone who
    knows the code can read what is sent.
    """
    ctx.obj = GlobalOptions(appid, relay_url, transit_helper)


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


def _register() -> None:
    from hilltop.cli import receive, send, transports

    cli.add_command(send.send)
    cli.add_command(receive.receive)
    cli.add_command(transports.transports)


_register()


def main() -> None:
    cli(prog_name="wormhole")


if __name__ == "__main__":
    main()
