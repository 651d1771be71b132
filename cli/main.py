"""The ``wormhole`` (alias ``hilltop``) command: shared flags, then one module per command.

Flag names and environment variables match the official CLI so ours is a drop-in
replacement. Every :class:`~hilltop.errors.HilltopError` becomes one ``ERROR:`` line and
exit status 1; so does a bug, whose traceback goes to a file the line names
(``hilltop.cli.common.report_unexpected``).
"""

from __future__ import annotations

import click

from hilltop._runtime.lazytls import defer_openssl, openssl_deferred

defer_openssl()  # the CLI opens TLS connections only for a wss:// mailbox
with openssl_deferred():
    from hilltop import __version__, api  # Twisted's endpoints, without TLS
from hilltop.cli.common import GlobalOptions  # noqa: E402


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
