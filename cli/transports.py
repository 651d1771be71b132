"""``wormhole transports``: what is installed, what it dials, and whether it works right now.

Plugins that were skipped are listed with the reason (failed to import, wrong plugin api,
disabled by the config file or ``--no-plugins``). ``--check`` also runs every transport once on
loopback (start, dial its own hint, stop, each under the hook timeouts), so a plugin that
raises, hangs or returns bad hints during a transfer shows up here with the same reason.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import click

from hilltop.cli import output
from hilltop.cli.transitopts import no_plugins_chosen, no_plugins_flag
from hilltop.errors import HilltopError

if TYPE_CHECKING:  # loaded when the command runs, not whenever the CLI starts
    from hilltop.transit.plugins import Transports


def listing(loaded: Transports, checked: dict[str, list[str]] | None = None) -> list[str]:
    """The table, one line per transport: name, hint types, origin, status."""
    rows = [("NAME", "HINT TYPES", "FROM", "STATUS")]
    failed = {f.name: f.reason for f in loaded.failures}
    for t in loaded.loaded:
        if t.name in loaded.broken:
            status = f"failed: {loaded.broken[t.name]}"
        elif not t.info.usable:
            status = f"not usable: {t.info.why_not or 'no reason given'}"
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
        return _show(loaded, checked)

    run(main)


def _show(loaded: Transports, checked: dict[str, list[str]] | None) -> int:
    for line in listing(loaded, checked):
        click.echo(line)
    if not loaded.loaded:
        output.error("no transports are installed")
        return 1
    return 0
