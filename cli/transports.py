"""``wormhole transports``: what is installed, what it dials, and whether it works right now.

Plugins that were skipped are listed with the reason (failed to import, wrong plugin api,
disabled by the config file or ``--no-plugins``). ``--check`` also runs every transport once on
loopback (start, dial its own hint, stop, each under the hook timeouts), so a plugin that
raises, hangs or returns bad hints during a transfer shows up here with the same reason.

The Tor transports work only under ``--tor``, so the loopback run says nothing about them: their
rows say what was really checked. Without ``--check`` that is only that txtorcon is installed
(it once said "usable" with no Tor running, and ``send --tor`` then failed); with it, Tor is
looked for as ``send --tor`` would (:class:`hilltop.tor.manager.TorManager`), under a deadline.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import click

from hilltop._values import value
from hilltop.cli import output
from hilltop.cli.transitopts import no_plugins_chosen, no_plugins_flag
from hilltop.errors import HilltopError

if TYPE_CHECKING:  # loaded when the command runs, not whenever the CLI starts
    from hilltop.transit.plugins import Transports


TOR_TRANSPORTS = ("tor", "tor-relay")
"""The built-in transports that work only through Tor (``hilltop.transports.tor``)."""

TOR_CHECK_SECONDS = 10.0
"""How long ``--check`` waits for Tor: connection refused comes at once; a port that accepts and
never answers, or a SOCKS probe (2 s each), is what this bounds."""


@value
class TorFound:
    """What ``--check`` learnt about Tor: whether ``send --tor`` could use it, and how."""

    ok: bool
    detail: str

    def status(self) -> str:
        return f"ok (checked: {self.detail})" if self.ok else \
            f"not usable now (checked): {self.detail}"


NOT_LOOKED_FOR = "usable with --tor (txtorcon installed; Tor not looked for: add --check)"


def listing(loaded: Transports, checked: dict[str, list[str]] | None = None,
            tor: TorFound | None = None) -> list[str]:
    """The table, one line per transport: name, hint types, origin, status."""
    rows = [("NAME", "HINT TYPES", "FROM", "STATUS")]
    failed = {f.name: f.reason for f in loaded.failures}
    for t in loaded.loaded:
        if t.name in loaded.broken:
            status = f"failed: {loaded.broken[t.name]}"
        elif not t.info.usable:
            status = f"not usable: {t.info.why_not or 'no reason given'}"
        elif t.builtin and t.name in TOR_TRANSPORTS:
            status = tor.status() if tor is not None else NOT_LOOKED_FOR
        elif checked is not None:
            status = "ok (checked)"
        else:
            status = "usable"
        if t.info.tor_note and t.name not in loaded.broken:
            status += f" ({t.info.tor_note})"
        rows.append((t.name, ",".join(t.info.hint_types) or "-", _origin(t), status))
        failed.pop(t.name, None)
    for name, reason in failed.items():
        rows.append((name, "-", "plugin", f"skipped: {reason}"))
    for d in loaded.disabled:
        rows.append((d.name, "-", "-", d.reason))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}".rstrip()
            for a, b, c, d in rows]


def _origin(t: Any) -> str:
    if t.builtin:
        return "built-in"
    module = type(t.plugin).__module__.split(".")[0]
    return f"plugin ({module})"


@click.command(name="transports")
@click.option("--check", is_flag=True,
              help="also try each transport once on loopback (start, dial, stop) and report "
                   "any that fail or hang")
@no_plugins_flag
def transports(check: bool) -> None:
    """List installed transports: name, hint types, usable now or why not."""
    logging.getLogger("hilltop.transit.plugins").setLevel(logging.ERROR)  # the table says it all
    from hilltop._runtime.reactor import install_asyncio_reactor

    install_asyncio_reactor()  # before any plugin module can import (and so pick) a reactor
    try:
        from hilltop.transit.plugins import load_configured

        loaded = load_configured(no_plugins=no_plugins_chosen())
    except HilltopError as err:  # a broken config file
        output.error(str(err))
        raise SystemExit(1) from None
    if not check:
        status = _show(loaded, None)
        if status:
            raise SystemExit(status)
        return

    from hilltop.cli.common import run

    async def main(reactor: Any) -> int:
        from hilltop.transit.plugins import HookTimeouts

        checked = await loaded.probe(reactor, HookTimeouts(start=10.0, connect=10.0, stop=10.0))
        tor = None
        if any(t.builtin and t.name in TOR_TRANSPORTS and t.info.usable for t in loaded.loaded):
            tor = await look_for_tor(reactor)
        return _show(loaded, checked, tor)

    run(main)


async def look_for_tor(reactor: Any, deadline: float = TOR_CHECK_SECONDS) -> TorFound:
    """Find Tor as ``send --tor`` would (control ports, then SOCKS ports), within ``deadline``."""
    from twisted.internet import defer

    from hilltop.tor.manager import TorManager

    manager = TorManager(reactor)
    try:
        finding = manager.ready()
        finding.addTimeout(deadline, reactor)
        await finding
    except defer.TimeoutError:
        return TorFound(False, f"no answer from Tor within {deadline:.0f} s")
    except HilltopError as err:
        return TorFound(False, str(err))
    finally:
        await manager.close()
    host, port = manager.socks or ("?", 0)
    if manager.control_endpoint is not None:
        return TorFound(True, f"control port {manager.control_endpoint}, SOCKS {host}:{port}")
    return TorFound(True, f"no control port; SOCKS port {host}:{port} accepts connections "
                          "(not checked to be Tor); no onion service can be made")


def _show(loaded: Transports, checked: dict[str, list[str]] | None,
          tor: TorFound | None = None) -> int:
    for line in listing(loaded, checked, tor):
        click.echo(line)
    if not loaded.loaded:
        output.error("no transports are installed")
        return 1
    return 0
