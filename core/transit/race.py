"""The transit race: which connection attempts start when, and which one wins.

Pure and clock-free in the aioquic style: every input carries ``now``, the caller asks
:meth:`Race.next_deadline` when to wake us and then calls :meth:`Race.handle_timer`, and
decisions come out of :meth:`Race.actions` as small frozen dataclasses. The runner owns the
sockets, the handshakes and the reactor; the race only ever sees attempt keys.

Timing follows the official client (protocol summary §5.5), with every number configurable:

* tier 0 candidates (direct dials) start at once;
* candidates of higher tiers (relays) start ``relay_delay`` (2 s) later when any tier-0 candidate
  exists, otherwise at once; each further (tier, priority) group, best priority first, starts
  ``tier_step`` (2 s) after the one before;
* each attempt has ``attempt_timeout`` (60 s) to finish its handshake; the race as a whole gives up
  after ``overall_timeout`` (120 s).

Winning: the *sender* takes the first attempt whose handshake is Ready (it says go there and
nevermind on any that become ready later); the *receiver* takes the first attempt that got go.
Every other started attempt is cancelled. One exception prefers a direct path: a relayed
attempt (tier above 0) that is ready while a direct one (a dial of tier 0, or an inbound
connection) is still running waits up to ``direct_grace`` (0.5 s) for it, so a hole punch that
completes a few hundred milliseconds after the relay still carries the bulk; it wins at once
when the last direct attempt fails. The time to the first byte over a relay thus grows by at
most ``direct_grace``.

Losing early: the race fails as soon as no attempt is running or scheduled *and nothing more
can arrive*. Our dials are all known up front (the peer's hints came before the race), so
only an inbound connection could still come, and only if we offered the peer something to
dial: that is ``listening``, which the runner sets when a transport whose hints invite
inbound connections contributed one (``TransportInfo.inbound``). A side that listens keeps
waiting until ``overall_timeout``, since the peer may still be dialling it; a side that does
not (``--no-listen``, or only ``webrtc``, where both sides dial) fails with every attempt's
reason at once: with ``--transports webrtc`` that is when ICE gives up (30 s), not 120 s.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from enum import Enum, auto
from typing import TYPE_CHECKING

from hilltop._transitions import move
from hilltop._values import value

if TYPE_CHECKING:
    from hilltop.hookspecs import Role


@value
class Candidate:
    """Something we could dial: ``key`` is opaque to the race and names the attempt in actions."""

    key: Hashable
    tier: int = 0
    priority: float = 0.0
    label: str = ""
    delay: float = 0.0  # the transport's own extra start delay, on top of its tier's


@value
class RaceConfig:
    """The race's timing, in seconds (the module docstring says what each one does)."""

    relay_delay: float = 2.0
    tier_step: float = 2.0
    attempt_timeout: float = 60.0
    overall_timeout: float = 120.0
    direct_grace: float = 0.5


# -- actions ---------------------------------------------------------------------------------------
@value
class StartAttempt:
    """Dial this candidate now."""

    key: Hashable


@value
class SendGo:
    """Sender: write go on this attempt (it is about to be the winner)."""

    key: Hashable


@value
class SendNevermind:
    """Sender: write nevermind on this attempt, then close it (a Cancel follows)."""

    key: Hashable


@value
class Cancel:
    """Stop this attempt: abort the dial or close the connection."""

    key: Hashable
    reason: str


@value
class Winner:
    """This attempt is the transit connection. The race is over."""

    key: Hashable


@value
class RaceFailed:
    """No attempt can win any more. The race is over."""

    reason: str


Action = StartAttempt | SendGo | SendNevermind | Cancel | Winner | RaceFailed


class AttemptState(Enum):
    SCHEDULED = auto()  # a candidate waiting for its start time
    RUNNING = auto()  # dialling or shaking hands
    WON = auto()
    FAILED = auto()  # the dial, the connection or the handshake failed, or it timed out
    CANCELLED = auto()  # another attempt won, or the race ended


ATTEMPT_MOVES: dict[tuple[AttemptState, str], AttemptState] = {
    (AttemptState.SCHEDULED, "start"): AttemptState.RUNNING,
    (AttemptState.SCHEDULED, "cancel"): AttemptState.CANCELLED,  # never started: nothing to undo
    (AttemptState.RUNNING, "win"): AttemptState.WON,
    (AttemptState.RUNNING, "fail"): AttemptState.FAILED,
    (AttemptState.RUNNING, "cancel"): AttemptState.CANCELLED,
}
"""Every legal move of one attempt; an inbound connection starts out ``RUNNING``."""


@value(frozen=False)
class _Attempt:
    """One candidate's attempt: when it starts, its state and its deadline."""

    key: Hashable
    label: str
    start_at: float
    state: AttemptState = AttemptState.SCHEDULED
    deadline: float | None = None
    reason: str = ""
    tier: int = 0

    def move(self, event: str) -> None:
        self.state = move(ATTEMPT_MOVES, self.state, event)

    @property
    def live(self) -> bool:
        """Scheduled or running: it may still win."""
        return self.state in (AttemptState.SCHEDULED, AttemptState.RUNNING)


class Race:
    """One race per transit session.

    ``listening``: we offered the peer something to dial, so an inbound connection may come
    until ``overall_timeout`` and the race stays open after our own attempts have failed.
    """

    def __init__(
        self,
        role: Role,
        candidates: Iterable[Candidate],
        now: float,
        *,
        listening: bool = False,
        config: RaceConfig | None = None,
    ) -> None:
        if role not in ("sender", "receiver"):
            raise ValueError(f"role must be 'sender' or 'receiver', got {role!r}")
        self.role = role
        self.config = config or RaceConfig()
        self.listening = listening
        self._attempts: dict[Hashable, _Attempt] = {}
        self._actions: list[Action] = []
        self._overall = now + self.config.overall_timeout
        self.finished = False
        self.winner: Hashable | None = None
        self._held: list[Hashable] = []  # sender: ready relayed attempts waiting for a direct one
        self._held_until: float | None = None
        self._schedule(list(candidates), now)
        self.handle_timer(now)

    # -- outputs ---------------------------------------------------------------------------------
    def actions(self) -> list[Action]:
        """Drain the decisions made since the last call, in order."""
        out, self._actions = self._actions, []
        return out

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must be called next; None once the race is over."""
        if self.finished:
            return None
        times = [self._overall]
        if self._held_until is not None:
            times.append(self._held_until)
        for a in self._attempts.values():
            if a.state is AttemptState.SCHEDULED:
                times.append(a.start_at)
            elif a.state is AttemptState.RUNNING and a.deadline is not None:
                times.append(a.deadline)
        return min(times)

    def state_of(self, key: Hashable) -> AttemptState:
        return self._attempts[key].state

    # -- inputs ----------------------------------------------------------------------------------
    def handle_timer(self, now: float) -> None:
        """Start what is due, time out what is late."""
        if self.finished:
            return
        if now >= self._overall:
            self._fail_race(f"no transit connection within {self.config.overall_timeout:g} s")
            return
        if self._held_until is not None and now >= self._held_until:
            self._release_held()
            if self.finished:
                return
        for a in sorted(self._attempts.values(), key=lambda a: a.start_at):
            if a.state is AttemptState.SCHEDULED and a.start_at <= now:
                a.move("start")
                a.deadline = now + self.config.attempt_timeout
                self._actions.append(StartAttempt(a.key))
            elif a.state is AttemptState.RUNNING and a.deadline is not None and a.deadline <= now:
                a.move("fail")
                a.reason = "timed out"
                self._actions.append(Cancel(a.key, "timed out"))
        if self._held and not self.finished and not self._direct_running():
            self._release_held()
        self._check_exhausted()

    def inbound(self, key: Hashable, now: float, label: str = "") -> None:
        """A peer connected to one of our listeners; its handshake is now running."""
        if key in self._attempts:
            raise ValueError(f"attempt {key!r} already exists")
        a = _Attempt(key, label or str(key), now, AttemptState.RUNNING,
                     now + self.config.attempt_timeout)
        self._attempts[key] = a
        if self.finished:
            a.move("cancel")
            self._actions.append(Cancel(key, "transit race already over"))

    def attempt_ready(self, key: Hashable, now: float) -> None:
        """Sender: the handshake is Ready. Receiver: the handshake got go."""
        a = self._attempts[key]
        if a.state is not AttemptState.RUNNING:
            return
        if self.finished:
            if self.role == "sender":
                self._actions.append(SendNevermind(key))
            a.move("cancel")
            self._actions.append(Cancel(key, "another connection won"))
            return
        if self.role == "sender" and a.tier > 0 and self._direct_running():
            if key not in self._held:
                self._held.append(key)
            if self._held_until is None:
                self._held_until = now + self.config.direct_grace
            return
        self._win(a)

    def _direct_running(self) -> bool:
        return any(a.tier == 0 and a.state is AttemptState.RUNNING
                   for a in self._attempts.values())

    def _release_held(self) -> None:
        """The grace is over, or no direct attempt is left: the first held relay wins."""
        self._held_until = None
        held, self._held = self._held, []
        for key in held:
            if self._attempts[key].state is AttemptState.RUNNING:
                self._win(self._attempts[key])
                return

    def _win(self, a: _Attempt) -> None:
        key = a.key
        if self.role == "sender":
            self._actions.append(SendGo(key))
        a.move("win")
        self.winner = key
        self.finished = True
        self._cancel_live("another connection won")
        self._actions.append(Winner(key))

    def attempt_failed(self, key: Hashable, reason: str, now: float) -> None:
        """The dial failed, the connection closed, or the handshake failed (nevermind included)."""
        a = self._attempts[key]
        if a.state is not AttemptState.RUNNING:
            return
        a.move("fail")
        a.reason = reason
        if self._held and not self._direct_running():
            self._release_held()
        self._check_exhausted()

    def cancel_all(self, reason: str) -> None:
        """The caller gives up (e.g. the user pressed ^C): cancel everything running."""
        if not self.finished:
            self._fail_race(reason)

    # -- internals -------------------------------------------------------------------------------
    def _schedule(self, candidates: list[Candidate], now: float) -> None:
        has_direct = any(c.tier == 0 for c in candidates)
        groups = sorted({(c.tier, -c.priority) for c in candidates if c.tier != 0})
        base = now + (self.config.relay_delay if has_direct else 0.0)
        start_of = {g: base + i * self.config.tier_step for i, g in enumerate(groups)}
        for c in candidates:
            if c.key in self._attempts:
                raise ValueError(f"duplicate candidate key {c.key!r}")
            at = (now if c.tier == 0 else start_of[(c.tier, -c.priority)]) + max(0.0, c.delay)
            self._attempts[c.key] = _Attempt(c.key, c.label or str(c.key), at, tier=c.tier)

    def _check_exhausted(self) -> None:
        if self.finished or self.listening:
            return
        if any(a.live for a in self._attempts.values()):
            return
        if any(a.reason for a in self._attempts.values()):
            self._fail_race("no transit connection could be made")
        else:
            self._fail_race("no transit connection could be made: no usable hints")

    def _fail_race(self, reason: str) -> None:
        """End the race; the message lists why each attempt failed, for the user."""
        failures = [f"{a.label}: {a.reason}" for a in self._attempts.values() if a.reason]
        if failures:
            reason = f"{reason} ({'; '.join(failures)})"
        self._cancel_live(reason)
        self.finished = True
        self._actions.append(RaceFailed(reason))

    def _cancel_live(self, reason: str) -> None:
        """Cancel every attempt that may still win; only running ones have anything to undo."""
        for a in self._attempts.values():
            if a.live:
                if a.state is AttemptState.RUNNING:
                    self._actions.append(Cancel(a.key, reason))
                a.move("cancel")
