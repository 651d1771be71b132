"""The transition-table idiom: one lookup per move, and a trace hook every machine shares."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hilltop import _transitions
from hilltop._transitions import machine_name, move
from hilltop.errors import IllegalTransition
from hilltop.transit.handshake import Handshake, ShakeState
from hilltop.transit.race import ATTEMPT_MOVES, AttemptState

TK = bytes(range(32))


@pytest.fixture
def moves() -> Iterator[list[tuple[str, str, str, str]]]:
    seen: list[tuple[str, str, str, str]] = []
    _transitions.trace(lambda *m: seen.append(m))
    try:
        yield seen
    finally:
        _transitions.trace(None)


def test_a_traced_engine_reports_each_move_with_its_machine(moves) -> None:
    """Two handshake engines back to back: every move of each, in order, named."""
    s, r = Handshake("sender", TK), Handshake("receiver", TK)
    r.receive_data(s.data_to_send())
    s.receive_data(r.data_to_send())
    s.send_go()
    r.receive_data(s.data_to_send())
    assert moves == [
        ("handshake.ShakeState", "PEER", "peer line", "WAIT_GO"),
        ("handshake.ShakeState", "PEER", "peer line", "READY"),
        ("handshake.ShakeState", "READY", "send go", "DONE"),
        ("handshake.ShakeState", "WAIT_GO", "got go", "DONE"),
    ]
    assert r.state is ShakeState.DONE


def test_an_illegal_move_is_refused_and_not_traced(moves) -> None:
    with pytest.raises(IllegalTransition):
        move(ATTEMPT_MOVES, AttemptState.WON, "fail")
    assert moves == []


def test_nothing_is_traced_once_tracing_stops(moves) -> None:
    _transitions.trace(None)
    assert move(ATTEMPT_MOVES, AttemptState.SCHEDULED, "start") is AttemptState.RUNNING
    assert moves == []


def test_machine_names_come_from_the_module_and_the_enum() -> None:
    assert machine_name(AttemptState.RUNNING) == "race.AttemptState"
