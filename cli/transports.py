"""``wormhole transports``: what is installed, what it dials, and whether it works right now."""

from __future__ import annotations

import click

from hilltop.cli import output
from hilltop.plugins import load_transports


@click.command(name="transports")
def transports() -> None:
    """List installed transports: name, hint types, usable now or why not."""
    loaded = load_transports()
    rows = [("NAME", "HINT TYPES", "STATUS")]
    for t in loaded.loaded:
        status = "usable" if t.info.usable else f"not usable: {t.info.why_not or 'no reason given'}"
        rows.append((t.name, ",".join(t.info.hint_types), status))
    for failure in loaded.failures:
        rows.append((failure.name, "-", f"failed to load: {failure.reason}"))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    for name, hints, status in rows:
        click.echo(f"{name:<{widths[0]}}  {hints:<{widths[1]}}  {status}")
    if not loaded.loaded:
        output.error("no transports are installed")
        raise SystemExit(1)
