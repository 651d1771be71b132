"""``wormhole --dump-timing FILE``: when each step of a command happened, written as JSON.

Official 0.24 has the flag for debugging slowness; we write the same layout, a list of
``{"name", "start", "stop", "details"}`` with times in seconds since the epoch (``stop`` is
null for a moment rather than a span), so a script that reads its files reads ours. The
events are hilltop's own (see the README): official logs every mailbox frame, which would tie
the file to its internals. One command runs per process, so the timeline is module state
that the group callback starts and :func:`hilltop.cli.common.run` writes.
"""

from __future__ import annotations

import json
import time
from dataclasses import field
from typing import TYPE_CHECKING, Any

from hilltop._values import value
from hilltop.cli import output

if TYPE_CHECKING:
    from hilltop.api import Wormhole


@value(frozen=False)
class Event:
    """One entry of the ``--dump-timing`` file, in official 0.24's layout."""

    name: str
    start: float
    stop: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


class Timeline:
    """The events of one command, in the order they happened."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.events: list[Event] = []

    def add(self, name: str, **details: Any) -> Event:
        event = Event(name, time.time(), details=details)
        self.events.append(event)
        return event

    def watch(self, w: Wormhole) -> None:
        """Record each rendezvous milestone of ``w`` when it happens (none if it never does)."""
        milestones = (("code ready", w.get_code()), ("code consumed", w.when_code_consumed()),
                      ("key established", w.get_verifier()),
                      ("key confirmed", w.get_peer_versions()))
        for name, happened in milestones:
            happened.addCallbacks(lambda _, name=name: self.add(name), lambda _: None)
        w.when_closed().addCallbacks(lambda mood: self.add("mailbox closed", mood=mood),
                                     lambda _: self.add("mailbox closed", mood="errory"))

    def write(self) -> None:
        """Write the file; a failure is a warning, since the command itself is done."""
        data = [{"name": e.name, "start": e.start, "stop": e.stop, "details": e.details}
                for e in self.events]
        try:
            with open(self.path, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
        except OSError as e:
            output.status(f"Warning: could not write timing data to {self.path}: "
                          f"{e.strerror or e}")
            return
        output.status(f"Timing data written to {self.path}")


_current: Timeline | None = None


def start(path: str | None, command: str | None) -> None:
    """Begin recording if ``--dump-timing`` was given (the group callback calls this)."""
    global _current
    _current = Timeline(path) if path else None
    if _current is not None:
        _current.add("command dispatch", command=command)


def watch(w: Wormhole) -> None:
    if _current is not None:
        _current.watch(w)


def finish(status: int) -> None:
    """Record the exit and write the file: on failure too, where timings help most."""
    if _current is not None:
        _current.add("exit", status=status)
        _current.write()
