"""A Dilation generation's race that wins at once with a given connection: the stand-in for
:class:`hilltop.transit.runner.TransitRunner` in the Dilator's unit tests (one place for what
tests/core/dilation's flow, takeover and stop tests each need)."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer


class _NoTransports:
    @staticmethod
    def hint_types() -> list[str]:
        return []


class InstantRace:
    """Publishes no hints of ours and connects to ``won`` (a test's Won: stream, description,
    shake) whatever hints the peer gave."""

    def __init__(self, won: Any) -> None:
        self.won = won
        self.transports = _NoTransports()

    def our_hints(self) -> defer.Deferred[list[Any]]:
        return defer.succeed([])

    def connect(self, hints: Any) -> defer.Deferred[Any]:
        return defer.succeed(self.won)

    def stop(self) -> defer.Deferred[None]:
        return defer.succeed(None)
