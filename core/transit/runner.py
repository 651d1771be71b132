"""The race driver: runs :mod:`hilltop.transit.race` with ``callLater`` over the transport
plugins and hands back the stream that won.

Usage by the file-transfer layer (hints must travel through the mailbox before connecting)::

    runner = TransitRunner(reactor, "sender", transit_key, transit_helpers=[helper])
    hints = await runner.our_hints()            # starts listeners; send hints_to_wire(hints)
    won = await runner.connect(peer_hints)      # parse_hints(peer's "hints-v1")
    conn = TransitConnection(won, "sender", transit_key, cipher)   # hilltop.transit.connection
    ...
    await conn.close()
    await runner.stop()

Every attempt runs :class:`hilltop.transit.handshake.Handshake` over whatever stream its transport
returned; the race decides who wins. Relay hints, ours and the peer's, first go through
:func:`hilltop.transit.relayplan.plan` (merged, capped, ordered): the race sees them as one
priority group whose members carry their stagger as a start delay. Losers are closed,
pending dials cancelled, listeners stopped and our timer cancelled as soon as the race ends;
:meth:`TransitRunner.stop` waits until all of that has really happened. The runner never sees
a record: the transit key only makes the handshake lines, and the record cipher is the
caller's choice (:mod:`hilltop.transit.connection`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from hilltop._runtime.awaitable import DualDeferred, Watch
from hilltop._values import value
from hilltop.errors import TransitError
from hilltop.hints import Hint, relay_v1
from hilltop.hookspecs import Role, SessionServices, TransitSession
from hilltop.streams import ByteStream, OnData, OnLost
from hilltop.transit import handshake as hs
from hilltop.transit import race as rc
from hilltop.transit import relayplan
from hilltop.transit.options import AttemptNote
from hilltop.transit.plugins import HookTimeouts, LoadedTransport, Transports, load_transports
from hilltop.transit.settings import TransportSettings

log = logging.getLogger(__name__)


class WinningStream:
    """The stream that won the race, with the bytes that came after the handshake.

    Its new owner (a :class:`~hilltop.transit.connection.TransitConnection`) takes it with
    :meth:`hand_over`. Until then reading is paused and whatever still arrives waits here: an
    asyncio caller resumes a loop turn after the race fires, and the peer's first records may
    already be on their way by then.
    """

    def __init__(self, stream: ByteStream, leftover: bytes, shake: Any = None) -> None:
        self.stream = stream
        self.shake = shake
        """The handshake engine that won (Dilation reads its Noise session from it)."""
        self.description = stream.description
        self._held: list[bytes] = [leftover] if leftover else []
        self._lost: str | None = None
        self._taken = False
        stream.start_receiving(self._held.append, self._note_lost)
        stream.pause_reading()

    def _note_lost(self, why: str) -> None:
        self._lost = why

    def hand_over(self, on_data: OnData, on_lost: OnLost) -> None:
        """From now on the stream's bytes go to ``on_data`` (the held ones first) and its end
        to ``on_lost``. Reading stays paused until the new owner calls ``resume_reading``, so
        it decides its own flow control. Only one owner may take the stream."""
        if self._taken:
            raise RuntimeError("the winning stream was already handed over")
        self._taken = True
        held, self._held = self._held, []
        for data in held:
            on_data(data)
        if self._lost is not None:
            on_lost(self._lost)
            return
        self.stream.start_receiving(on_data, on_lost)


@value(frozen=False)
class _Attempt:
    """What the runner holds for one attempt: its dial, its stream and its handshake."""

    key: Hashable
    label: str
    transport: LoadedTransport | None
    hint: Any = None
    dial: defer.Deferred[Any] | None = None
    stream: ByteStream | None = None
    shake: hs.ShakeEngine[Any] | None = None
    done: bool = False  # cancelled, failed or handed over


class TransitRunner:
    """One transfer's transit: our hints, the race over the peer's hints, the winning stream.

    One race at a time. Once it ended (won, failed, cancelled), :meth:`next_race` makes room
    for another for the same transfer (the same key and role; fresh hints, a new transit
    session for the transports): where a reconnecting channel, a better path found later or
    another relay goes. The streams already won stay the caller's."""

    def __init__(
        self,
        reactor: Any,
        role: Role,
        transit_key: bytes,
        *,
        transports: Transports | None = None,
        transit_helpers: Sequence[relay_v1.Hint] = (),
        no_listen: bool = False,
        tor: bool = False,
        local_addresses: Sequence[str] | None = None,
        config: rc.RaceConfig | None = None,
        relay_side16: str | None = None,
        options: dict[str, Any] | None = None,
        settings: TransportSettings | None = None,
        hook_timeouts: HookTimeouts | None = None,
        on_attempt: Callable[[AttemptNote], None] | None = None,
        handshake: Callable[[str | None], hs.ShakeEngine[Any]] | None = None,
        services: SessionServices | None = None,
    ) -> None:
        self.reactor = reactor
        # Dilation races its own L2 handshake (hilltop.dilation.l2.L2Shake) through this same
        # race: called with the relay side (or None for a direct stream), it returns an engine
        # that is an hs.ShakeEngine like hs.Handshake.
        self._handshake = handshake
        self._on_attempt = on_attempt
        self.role: Role = role
        self._tk = transit_key
        self.transports = transports if transports is not None else load_transports()
        self.session = TransitSession(
            reactor=reactor, role=role, no_listen=no_listen, tor=tor,
            transit_helpers=tuple(transit_helpers), local_addresses=local_addresses,
            offer_inbound=self._offer_inbound, options=dict(options or {}),
            settings=settings if settings is not None else TransportSettings(),
            services=services,
        )
        self.config = config or rc.RaceConfig()
        self.hook_timeouts = hook_timeouts or HookTimeouts()
        self._side16 = relay_side16 or os.urandom(8).hex()
        self._started: Watch | None = None
        self._own: list[tuple[LoadedTransport, Hint]] = []
        self._listening = False
        self._race: rc.Race | None = None
        self._attempts: dict[Hashable, _Attempt] = {}
        self._early_inbound: list[ByteStream] = []
        self._next_key = 0
        self._timer: Any = None
        self._result: DualDeferred[WinningStream] | None = None
        self._pumping = False
        self._stopping: defer.Deferred[None] | None = None
        self._closing: list[defer.Deferred[None]] = []

    # -- public API ------------------------------------------------------------------------------
    @property
    def transit_key(self) -> bytes:
        """The key the handshake proves; the caller derives the record keys from it too."""
        return self._tk

    def our_hints(self) -> DualDeferred[list[Hint]]:
        """Start every transport (listeners, relay contributions) and return our hints.

        Idempotent: later calls give the same hints. Send them to the peer (``hints-v1``)
        before calling :meth:`connect`.
        """
        if self._started is None:
            watch = self._started = Watch()
            d = defer.ensureDeferred(self._start_all())
            d.addCallbacks(watch.fire, lambda f: watch.fail(f.value))
        return self._started.when()

    def connect(self, peer_hints: Sequence[Hint]) -> DualDeferred[WinningStream]:
        """Race every usable hint (the peer's plus our own relays); fire with the winning stream
        (build a :class:`~hilltop.transit.connection.TransitConnection` on it).

        Fails with :class:`hilltop.errors.TransitError` naming why each attempt failed.
        Cancelling the returned Deferred abandons the race and cleans up.
        """
        if self._result is not None:
            raise RuntimeError("connect() may be called once per race: call next_race() first")
        self._result = DualDeferred(self._cancelled)
        result = self._result
        d = self.our_hints()
        d.addCallback(lambda _hints: self._begin_race(list(peer_hints)))
        d.addErrback(self._fail_result)
        return result

    async def next_race(self) -> None:
        """End this race (as :meth:`stop`: losers closed, transports stopped) and make room
        for another: then :meth:`our_hints` starts the transports again in a new
        :class:`TransitSession` (fresh hints: new listening ports, a new relay side) and
        :meth:`connect` races them. Raises RuntimeError while a race is still running
        (cancel its :meth:`connect` first)."""
        if self._result is not None and not self._result.called:
            raise RuntimeError("a transit race is still running: cancel it first")
        await self.stop()
        self.session = replace(self.session)
        self._side16 = os.urandom(8).hex()
        self._started = None
        self._own = []
        self._listening = False
        self._race = None
        self._attempts = {}
        self._early_inbound = []
        self._result = None
        self._stopping = None

    def _cancelled(self, d: defer.Deferred[Any]) -> None:
        d.errback(defer.CancelledError("transit connect() was cancelled"))
        self._abandon("transit cancelled")

    def stop(self) -> defer.Deferred[None]:
        """Abandon anything still running, stop transports, wait until every loser is closed.

        The winning stream (if any) is not touched: it belongs to the caller.
        """
        self._abandon("transit stopped")
        if self._stopping is None:
            self._stopping = defer.ensureDeferred(self._stop_transports())
        d: defer.Deferred[None] = defer.Deferred()

        def stopped(result: object) -> object:
            d.callback(None)
            return result  # the shared Deferred keeps its own result for later callers

        self._stopping.addBoth(stopped)
        return d

    # -- starting --------------------------------------------------------------------------------
    async def _start_all(self) -> list[Hint]:
        hints: list[Hint] = []
        for transport, got in await self.transports.start_all(
            self.session, self.reactor, self.hook_timeouts.start
        ):
            for hint in got:
                hints.append(hint)
                self._own.append((transport, hint))
                if transport.info.inbound and not transport.info.relay:
                    self._listening = True  # the peer may dial this hint: keep the race open
        log.debug("our transit hints: %s", [str(h) for h in hints])
        return hints

    def _offer_inbound(self, stream: ByteStream) -> None:
        if self._race is None:
            if self._result is None and self._stopping is None:
                self._early_inbound.append(stream)
            else:
                stream.close()
            return
        self._add_inbound(stream)

    def _add_inbound(self, stream: ByteStream) -> None:
        key = self._new_key("in")
        attempt = _Attempt(key, stream.description, None, stream=stream)
        self._attempts[key] = attempt
        assert self._race is not None
        self._note(attempt, "inbound")
        self._race.inbound(key, self._now(), stream.description)
        if not self._race.finished:
            self._begin_handshake(attempt, via_relay=False)
        self._pump()

    # -- the race --------------------------------------------------------------------------------
    def _begin_race(self, peer_hints: list[Hint]) -> None:
        if self._result is None or self._result.called:
            return
        candidates: list[rc.Candidate] = []
        seen: set[Any] = set()
        targets: list[tuple[Hint, float | None]] = []  # (hint, relay plan offset)
        peer_relays = [h for h in peer_hints if isinstance(h, relay_v1.Hint)]
        targets += [(h, None) for h in peer_hints if not isinstance(h, relay_v1.Hint)]
        own_relays: list[relay_v1.Hint] = []
        for transport, hint in self._own:  # our own relays: we meet the peer there
            if transport.info.relay and isinstance(hint, relay_v1.Hint):
                own_relays.append(hint)
            elif transport.info.relay:
                targets.append((hint, None))
        sender, receiver = ((own_relays, peer_relays) if self.role == "sender"
                            else (peer_relays, own_relays))
        targets += [(d.hint, d.offset) for d in relayplan.plan(sender, receiver)]
        for hint, offset in targets:
            ident = (hint.type, str(hint))
            if ident in seen:
                continue
            seen.add(ident)
            owners = self.transports.for_hint_type(hint.type)
            if not owners:
                log.debug("no transport dials %s hints; skipping %s", hint.type, hint)
                continue
            key = self._new_key("out")
            label = f"{owners[0].name} {hint}"
            self._attempts[key] = _Attempt(key, label, None, hint=hint)
            info = owners[0].info
            if offset is None:
                candidates.append(rc.Candidate(key, tier=info.tier, priority=hint.priority,
                                               label=label, delay=info.start_delay))
            else:  # the relay plan already ordered relays by priority: one group, staggered
                candidates.append(rc.Candidate(key, tier=info.tier, priority=0.0, label=label,
                                               delay=info.start_delay + offset))
        now = self._now()
        self._race = rc.Race(self.role, candidates, now, listening=self._listening,
                             config=self.config)
        early, self._early_inbound = self._early_inbound, []
        for stream in early:
            self._add_inbound(stream)
        self._pump()

    def _pump(self) -> None:
        """Carry out the race's decisions and re-arm the single timer (re-entrancy safe)."""
        if self._pumping or self._race is None:
            return
        self._pumping = True
        try:
            while actions := self._race.actions():
                for action in actions:
                    self._do(action)
        finally:
            self._pumping = False
        self._rearm()

    def _rearm(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        deadline = self._race.next_deadline() if self._race is not None else None
        if deadline is not None:
            delay = max(0.0, deadline - self._now())
            self._timer = self.reactor.callLater(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._race is not None:
            self._race.handle_timer(self._now())
            self._pump()

    def _do(self, action: rc.Action) -> None:
        if isinstance(action, rc.StartAttempt):
            self._start_attempt(self._attempts[action.key])
        elif isinstance(action, rc.SendGo | rc.SendNevermind):
            a = self._attempts[action.key]
            assert a.shake is not None and a.stream is not None
            if isinstance(action, rc.SendGo):
                a.shake.send_go()
            else:
                a.shake.send_nevermind()
            a.stream.write(a.shake.data_to_send())
        elif isinstance(action, rc.Cancel):
            self._cancel_attempt(self._attempts[action.key], action.reason)
        elif isinstance(action, rc.Winner):
            self._win(self._attempts[action.key])
        elif isinstance(action, rc.RaceFailed):
            self._fail_result(TransitError(action.reason))

    def _note(self, a: _Attempt, state: str, reason: str = "") -> None:
        """Tell the watcher (if any) about ``a``; a watcher that raises never breaks the race."""
        if self._on_attempt is None:
            return
        if a.hint is None:
            note = AttemptNote("inbound", a.label, state, reason)
        else:
            name = a.transport.name if a.transport is not None else a.label.split(" ", 1)[0]
            note = AttemptNote(name, str(a.hint), state, reason)
        try:
            self._on_attempt(note)
        except Exception:  # noqa: BLE001 - watching must not change the outcome
            log.exception("the transit attempt watcher failed")

    def _start_attempt(self, a: _Attempt) -> None:
        assert self._race is not None
        self._note(a, "dialling")
        dial = defer.ensureDeferred(self.transports.dial(
            a.hint, self.session, self.reactor, self.hook_timeouts.connect))
        a.dial = dial
        dial.addCallbacks(lambda got: self._dialled(a, *got), lambda f: self._dial_failed(a, f))

    def _dialled(self, a: _Attempt, transport: LoadedTransport, stream: ByteStream) -> None:
        a.dial = None
        a.transport = transport
        if a.done:
            stream.close()
            self._track_closing(stream)
            return
        a.stream = stream
        via_relay = a.transport is not None and a.transport.info.relay
        self._begin_handshake(a, via_relay)
        self._pump()

    def _dial_failed(self, a: _Attempt, failure: Failure) -> None:
        a.dial = None
        if a.done or self._race is None:
            return  # we cancelled it
        reason = failure.getErrorMessage() or type(failure.value).__name__
        log.debug("transit attempt %s failed: %s", a.label, reason)
        self._note(a, "failed", reason)
        a.done = True
        self._race.attempt_failed(a.key, reason, self._now())
        self._pump()

    def _begin_handshake(self, a: _Attempt, via_relay: bool) -> None:
        assert a.stream is not None
        side16 = self._side16 if via_relay else None
        a.shake = (self._handshake(side16) if self._handshake is not None
                   else hs.Handshake(self.role, self._tk, side16))
        a.stream.start_receiving(lambda data: self._shake_data(a, data),
                                 lambda why: self._shake_lost(a, why))
        a.stream.write(a.shake.data_to_send())

    def _shake_data(self, a: _Attempt, data: bytes) -> None:
        if a.done or a.shake is None or a.stream is None:
            return
        a.shake.receive_data(data)
        a.stream.write(a.shake.data_to_send())
        self._shake_events(a)

    def _shake_lost(self, a: _Attempt, why: str) -> None:
        if a.done or a.shake is None:
            return
        a.shake.connection_lost(why)
        self._shake_events(a)

    def _shake_events(self, a: _Attempt) -> None:
        assert self._race is not None
        now = self._now()
        assert a.shake is not None
        while (ev := a.shake.next_event()) is not None:
            if isinstance(ev, hs.Ready | hs.Go):
                self._race.attempt_ready(a.key, now)
            elif isinstance(ev, hs.Nevermind):
                self._note(a, "failed", "peer chose another connection")
                self._race.attempt_failed(a.key, "peer chose another connection", now)
                self._close_attempt(a)
            elif isinstance(ev, hs.Failed):
                self._note(a, "failed", ev.reason)
                self._race.attempt_failed(a.key, ev.reason, now)
                self._close_attempt(a)
        self._pump()

    def _cancel_attempt(self, a: _Attempt, reason: str) -> None:
        log.debug("cancelling transit attempt %s: %s", a.label, reason)
        if not a.done:
            self._note(a, "cancelled", reason)
        if a.dial is not None:
            a.done = True
            dial, a.dial = a.dial, None
            dial.addErrback(lambda _f: None)
            dial.cancel()
        self._close_attempt(a)

    def _close_attempt(self, a: _Attempt) -> None:
        a.done = True
        if a.stream is not None:
            a.stream.close()
            self._track_closing(a.stream)

    def _track_closing(self, stream: ByteStream) -> None:
        self._closing.append(stream.when_closed())

    def _win(self, a: _Attempt) -> None:
        assert a.stream is not None and a.shake is not None
        a.done = True
        self._note(a, "won")
        self._cancel_timer()
        won = WinningStream(a.stream, a.shake.leftover, a.shake)
        log.info("transit connected: %s", won.description)
        self._stop_soon()
        if self._result is not None and not self._result.called:
            self._result.callback(won)
        else:
            won.stream.close()

    def _fail_result(self, error: Any) -> None:
        self._cancel_timer()
        self._stop_soon()
        if self._result is not None and not self._result.called:
            self._result.errback(error)

    def _abandon(self, reason: str) -> None:
        if self._race is not None and not self._race.finished:
            self._race.cancel_all(reason)
            self._pump()
        for stream in self._early_inbound:
            stream.close()
            self._track_closing(stream)
        self._early_inbound = []
        self._cancel_timer()

    def _stop_soon(self) -> None:
        if self._stopping is None:
            self._stopping = defer.ensureDeferred(self._stop_transports())

    async def _stop_transports(self) -> None:
        if self._started is not None:
            with contextlib.suppress(Exception):
                await self._started.when()
        await self.transports.stop_all(self.session, self.reactor, self.hook_timeouts.stop)
        # losers (and late dials) may still be closing: wait for every one
        while self._closing:
            pending, self._closing = self._closing, []
            await defer.gatherResults(pending)

    def _cancel_timer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _new_key(self, prefix: str) -> str:
        self._next_key += 1
        return f"{prefix}{self._next_key}"

    def _now(self) -> float:
        return float(self.reactor.seconds())
