"""``--debug-state``: official's spelling and line format, over hilltop's own tables."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from hilltop import _transitions
from hilltop._transitions import move
from hilltop.cli.debugstate import MACHINES, parse_machines
from hilltop.cli.receive import receive
from hilltop.cli.send import send
from hilltop.rendezvous.mailbox import LINK_MOVES, Link
from hilltop.transit.race import ATTEMPT_MOVES, AttemptState

CORE = Path(__file__).resolve().parents[2] / "core"


@pytest.fixture(autouse=True)
def _untraced() -> Iterator[None]:
    yield
    _transitions.trace(None)


def parse(command: click.Command, *args: str) -> None:
    """Parse ``args`` as the command line would, without running the command."""
    command.make_context(command.name, list(args))


def test_the_bare_flag_traces_every_machine_in_officials_line_format(capsys) -> None:
    parse(send, "--debug-state", "--text", "hi")  # bare: the next word is not its value
    move(LINK_MOVES, Link.CONNECTING, "connected")
    move(ATTEMPT_MOVES, AttemptState.RUNNING, "win")
    assert capsys.readouterr() == ("", (
        "send.mailbox.Link[CONNECTING].connected -> [UP]\n"
        "send.race.AttemptState[RUNNING].win -> [WON]\n"))


def test_a_list_selects_machines_and_receive_says_recv(capsys) -> None:
    parse(receive, "--debug-state=race,handshake", "1-a-b")
    move(LINK_MOVES, Link.CONNECTING, "connected")
    move(ATTEMPT_MOVES, AttemptState.SCHEDULED, "start")
    assert capsys.readouterr().err == "recv.race.AttemptState[SCHEDULED].start -> [RUNNING]\n"


def test_officials_letters_select_the_mailbox() -> None:
    assert parse_machines("B,N,M,K,SK,RC") == {"mailbox"}
    assert parse_machines("K,race") == {"mailbox", "race"}


@pytest.mark.parametrize("value", ["sink", "X", ",", "mailbox,Q"])
def test_an_unknown_machine_is_a_usage_error(value: str) -> None:
    with pytest.raises(click.BadParameter, match="cannot debug unknown machines"):
        parse(send, f"--debug-state={value}", "--text", "hi")
    assert _transitions._tracer is None


def test_the_selectable_machines_are_the_modules_whose_tables_use_move() -> None:
    """A new table through ``_transitions.move`` must be selectable, and no name may be stale
    (a :class:`~hilltop.transit.handshake.ShakeEngine` moves through its base's ``move``)."""
    users = set()
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.ImportFrom) and node.module == "hilltop._transitions"
                    and any(alias.name == "move" for alias in node.names)):
                users.add(path.stem)
            # a ShakeEngine's table goes through move in its base (hilltop.transit.handshake)
            if isinstance(node, ast.ClassDef) and any(
                    "ShakeEngine[" in ast.unparse(base) for base in node.bases):
                users.add(path.stem)
    assert users == set(MACHINES)
