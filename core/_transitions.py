"""The one idiom for hilltop's state machines: an Enum of states and a transition table.

A table maps ``(state, event)`` to the next state; whatever is not in it is illegal. Reading the
table answers "what can happen next" without following ``if`` ladders, and a bad move fails at
the lookup with one error naming the state and the event (h11's ``_state.py`` does the same).
Pure: no I/O, so every engine may use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from hilltop.errors import IllegalTransition

S = TypeVar("S")


def move(table: Mapping[tuple[S, str], S], state: S, event: str) -> S:
    """The state after ``event`` in ``state``; :class:`IllegalTransition` if the table has none."""
    try:
        return table[(state, event)]
    except KeyError:
        raise IllegalTransition(state, event) from None
