"""The ``wormhole`` (alias ``hilltop``) command: shared flags, then one module per command.

Flag names and environment variables match the official CLI so ours is a drop-in
replacement. Every :class:`~hilltop.errors.HilltopError` becomes one ``ERROR:`` line and
the exit status :mod:`hilltop.cli.exitcodes` gives its class; a bug gets status 1 and its
traceback goes to a file the line names (``hilltop.cli.common.report_unexpected``).
"""

from __future__ import annotations

import importlib

import click

from hilltop._runtime.lazyimport import defer_module
from hilltop._runtime.memory import importing

defer_module("http.cookiejar")  # Twisted's compat module re-exports it; nothing uses it
defer_module("hyperlink")  # autobahn's WebSocket protocol imports it for a server's redirect
defer_module("ssl")  # asyncio imports it for TLS transports; a wss:// mailbox loads it
defer_module("asyncio.sslproto")  # (imports asyncio, with the two above deferred)
defer_module("importlib.metadata._adapters", import_parent=False)  # email, for dist.metadata
defer_module("bz2")  # zipfile and shutil import both for compressors no command uses
defer_module("lzma")
defer_module("shutil")  # zipfile (Twisted's plugin finder) imports it; a file's free space runs it
defer_module("pickle")  # Twisted's reflect and autobahn's protocol import it; nothing pickles
defer_module("pty")  # Twisted's process module (its stdio endpoint); no command opens a pty
from hilltop._runtime.lazytls import defer_openssl, openssl_deferred  # noqa: E402

# autobahn's WebSocket module imports it for a client agent we do not use; the mailbox dials
# without it (sharedport.SharedPortEndpoint), a file's transit loads it, still without TLS
defer_module("twisted.internet.endpoints", loading=openssl_deferred)
defer_module("twisted.internet.unix")  # the reactor's UNIX sockets and UDP: no command uses
defer_module("twisted.internet.udp")  # them (listenUDP, connectUNIX, ...)
defer_openssl()  # the CLI opens TLS connections only for a wss:// mailbox
with openssl_deferred():
    from hilltop import api  # Twisted's reactor and TCP modules, without TLS
from hilltop.cli import events, exitcodes, timing  # noqa: E402
from hilltop.cli.common import GlobalOptions, exit_with  # noqa: E402
from hilltop.cli.version import version_text  # noqa: E402

ALIASES = {"tx": "send", "rx": "receive", "recv": "receive", "recieve": "receive"}
"""Other names official 0.24 accepts for its commands (``recieve`` is its deliberate
misspelling); scripts written for it use them, and like it we leave them out of ``--help``."""


COMMANDS = {
    "send": "hilltop.cli.send",
    "receive": "hilltop.cli.receive",
    "ssh": "hilltop.cli.ssh",
    "forward": "hilltop.cli.forward",
    "transports": "hilltop.cli.transports",
    "completion": "hilltop.cli.completion",
}
"""Each command's module (the command is the module's attribute of the same name), imported
only when that command runs or ``--help`` lists it: a ``wormhole receive`` does not import
``send``'s, ``forward``'s or ``ssh``'s modules (~23 ms of a ~330 ms CLI import, bench/README.md)."""


class AliasedGroup(click.Group):
    """A group that also answers to the :data:`ALIASES` of its commands and imports each
    command of :data:`COMMANDS` on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        name = ALIASES.get(cmd_name, cmd_name)
        if name not in self.commands and name in COMMANDS:
            with importing():  # the collector paused, as for the CLI's own imports
                module = importlib.import_module(COMMANDS[name])
            self.add_command(getattr(module, name))
        return super().get_command(ctx, name)

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        """Report the real name, so usage lines and errors say ``wormhole send``, not ``tx``."""
        _, command, rest = super().resolve_command(ctx, args)
        return (command.name if command else None), command, rest


NETWORK_HELP = (
    "On the network a default install contacts the mailbox server (--relay-url), listens on "
    "one TCP port on every address and tells the peer those addresses, dials the peer's, and "
    "dials the transit relays 2 s later if nothing direct worked. Between two hilltops behind "
    "home routers it punches a hole through both, from the public address the mailbox server "
    "reports; no STUN server is contacted unless you give --stun. --no-listen: no listener, "
    "no address sent, no punch, no STUN. --tor: everything through Tor; no punch, no STUN."
)
"""``wormhole --help``'s last paragraph (issue 29 asks that it say what a default install does
on the network); tests/cli/test_network_help.py ties its figures to the code."""


@click.group(cls=AliasedGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=NETWORK_HELP)
@click.option("--appid", default=api.APPID, show_default=True, metavar="APPID",
              help="application id: both sides must use the same one")
@click.option("--relay-url", default=api.RELAY_URL, show_default=True, metavar="URL",
              envvar="WORMHOLE_RELAY_URL", show_envvar=True,
              help="rendezvous (mailbox) server to use")
@click.option("--transit-helper", multiple=True, metavar="RELAY",
              envvar="WORMHOLE_TRANSIT_HELPER", show_envvar=True,
              show_default=api.TRANSIT_HELPER,
              help="transit relay to meet the peer at when no direct connection works: "
                   "tcp:HOST:PORT, ws://HOST:PORT/ or wss://HOST/ (endpoints of one relay "
                   "joined by commas); give it again for more relays (both sides' relays "
                   "are tried); '' for none; default: [relay] helpers in the config file, "
                   "else the public relay")
@click.option("--dump-timing", metavar="FILE.json", type=click.Path(dir_okay=False),
              help="(debug) write when each step happened to this JSON file")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=lambda ctx, _param, value: _show_version(ctx, value),
              help="Show the version and the protocol versions it speaks, then exit.")
@events.json_flag
@click.pass_context
def cli(ctx: click.Context, appid: str, relay_url: str, transit_helper: tuple[str, ...],
        dump_timing: str | None) -> None:
    """Create a Magic Wormhole and send text, files or directories through it.

    Both sides speak the same short code; the key comes from SPAKE2, so only someone who
    knows the code can read what is sent.
    """
    ctx.obj = GlobalOptions(appid, relay_url, tuple(transit_helper))
    timing.start(dump_timing, ctx.invoked_subcommand)


def _show_version(ctx: click.Context, wanted: bool) -> None:
    if wanted and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit()


@cli.command(name="help")
@click.pass_context
def help_command(ctx: click.Context) -> None:
    """Show this message.

    \f
    The same text as ``wormhole --help``; official 0.24 has this command, so scripts use it.
    (The form feed above ends the part of this docstring ``help --help`` shows.)
    """
    click.echo(ctx.find_root().get_help())


def main() -> None:
    """Run the command; a usage error gets click's message, exit status 2 and, with
    ``--json``, the ``error`` event (click would exit before any command could send it)."""
    import sys

    from hilltop.cli.common import known_error
    from hilltop.errors import HilltopError

    try:
        status = cli.main(prog_name="wormhole", standalone_mode=False)
    except click.UsageError as err:
        err.show()
        if events.json_mode() or "--json" in sys.argv[1:]:  # refused before --json was read
            events.enable_json()
            events.emit("error", code=exitcodes.USAGE.code,
                        exit_status=int(exitcodes.USAGE.status), message=err.format_message())
        sys.exit(exitcodes.ExitStatus.USAGE)
    except HilltopError as err:  # refused before the reactor started (ssh's key checks)
        exit_with(err)
    except OSError as err:  # out of file descriptors before the reactor ran: not a bug
        known = known_error(err)
        if not isinstance(known, HilltopError):
            raise
        exit_with(known)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except click.Abort as err:  # a question before the reactor runs (ssh accept's key list)
        click.echo("Aborted!", err=True)
        interrupted = isinstance(err.__cause__, KeyboardInterrupt)
        sys.exit(exitcodes.ExitStatus.INTERRUPTED if interrupted else exitcodes.ExitStatus.FAILED)
    sys.exit(status if isinstance(status, int) else 0)


if __name__ == "__main__":
    main()
