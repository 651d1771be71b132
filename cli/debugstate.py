"""``--debug-state [MACHINES]``: print every move of hilltop's state machines on stderr.

Official 0.24 has the flag on ``send`` and ``receive`` and traces its automat machines in
lines like ``send.B[S0_empty].start -> [S1_lonely]``. hilltop's machines are its own
transition tables (:mod:`hilltop._transitions`), traced in the same line format with the table
as the machine: ``send.mailbox.Link[CONNECTING].connected -> [UP]``. Official prints on stdout;
we print on stderr, where every other status line goes, so a received text or ``-o -`` data on
stdout stays exactly what was sent.

Official's machine letters (``B``, ``N``, ``M``, ``K``, ...) are all parts of its rendezvous
client, which in hilltop is the one mailbox engine: a script that passes them gets the mailbox
traced rather than a usage error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from hilltop.cli import output

MACHINES = ("mailbox", "handshake", "race", "streamcodec", "engine", "l2", "manager",
            "takeover")
"""What can be selected: the modules whose tables go through ``_transitions.move``
(``tests/cli/test_debugstate.py`` checks this list against the source)."""

OFFICIAL_MACHINES = frozenset({"B", "N", "M", "S", "O", "K", "SK", "R", "RC", "L", "A", "I",
                               "C", "T"})
"""Official 0.24's machine names; each is a piece of its rendezvous client."""

CLIENT_NAMES = {"send": "send", "receive": "recv"}
"""The first word of each line, as official writes it for each command."""


def parse_machines(value: str) -> frozenset[str]:
    """The modules a comma-separated ``--debug-state`` value selects; UsageError for others."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [n for n in names if n not in MACHINES and n not in OFFICIAL_MACHINES]
    if unknown or not names:
        raise click.BadParameter(
            f"cannot debug unknown machines: {' '.join(unknown) or '(none given)'}; hilltop's "
            f"are {','.join(MACHINES)} (official's letters select mailbox)")
    return frozenset("mailbox" if n in OFFICIAL_MACHINES else n for n in names)


def tracer(client: str, machines: frozenset[str]) -> Callable[[str, str, str, str], None]:
    """A :data:`hilltop._transitions.Tracer` printing official's line for selected moves."""

    def print_move(machine: str, old: str, event: str, new: str) -> None:
        if machine.partition(".")[0] in machines:
            output.status(f"{client}.{machine}[{old}].{event} -> [{new}]")

    return print_move


def _callback(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    from hilltop import _transitions

    client = CLIENT_NAMES.get(ctx.info_name or "", ctx.info_name or "wormhole")
    _transitions.trace(tracer(client, parse_machines(value)))


def debug_state_flag(f: Callable[..., Any]) -> Callable[..., Any]:
    """The option, with official's spelling: alone it traces every machine."""
    return click.option(
        "--debug-state", is_flag=False, flag_value=",".join(MACHINES), default=None,
        metavar="MACHINES", expose_value=False, callback=_callback,
        help="(debug) print each state-machine move on stderr; MACHINES is a comma-separated "
             f"list of {','.join(MACHINES)} (default: all; official's letters select "
             "mailbox)")(f)
