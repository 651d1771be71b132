"""The one idiom for hilltop's state machines: an Enum of states and a transition table.

A table maps ``(state, event)`` to the next state; whatever is not in it is illegal. Reading the
table answers "what can happen next" without following ``if`` ladders, and a bad move fails at
the lookup with one error naming the state and the event (h11's ``_state.py`` does the same).
Pure: no I/O, so every engine may use it.

Because every machine moves through :func:`move`, one hook here sees them all: ``wormhole
--debug-state`` sets a :data:`Tracer` with :func:`trace` and prints each move. Off, the hook
costs one ``is None`` test per move; the stream codec moves once per record, so nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from hilltop.errors import IllegalTransition

S = TypeVar("S")

Tracer = Callable[[str, str, str, str], None]
"""Called as ``tracer(machine, old_state, event, new_state)`` after each legal move."""

_tracer: Tracer | None = None


def move(table: Mapping[tuple[S, str], S], state: S, event: str) -> S:
    """The state after ``event`` in ``state``; :class:`IllegalTransition` if the table has none."""
    try:
        new = table[(state, event)]
    except KeyError:
        raise IllegalTransition(state, event) from None
    if _tracer is not None:
        _tracer(machine_name(state), _state_name(state), event, _state_name(new))
    return new


def trace(tracer: Tracer | None) -> None:
    """Call ``tracer`` after every move of every machine from now on (None: stop).

    Process-wide, like official's ``--debug-state``: a command runs one wormhole per process.
    """
    global _tracer
    _tracer = tracer


def machine_name(state: object) -> str:
    """``module.Enum`` of a state, such as ``handshake.ShakeState`` or ``mailbox.Link``.

    Derived rather than registered, so a new table is traced without a line elsewhere; the
    module part is what ``--debug-state`` selects by (the mailbox module has three tables).
    """
    kind = type(state)
    return f"{kind.__module__.rpartition('.')[2]}.{kind.__name__}"


def _state_name(state: object) -> str:
    name = getattr(state, "name", None)
    return name if isinstance(name, str) else str(state)
