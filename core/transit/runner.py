"""The transit shell: drives :mod:`hilltop.transit.race` with ``callLater`` over the transport
plugins.

Usage by the file-transfer layer (hints must travel through the mailbox before connecting)::

    runner = TransitRunner(reactor, "sender", transit_key, transit_helpers=[helper])
    hints = await runner.our_hints()            # starts listeners; send hints_to_wire(hints)
    conn = await runner.connect(peer_hints)     # parse_hints(peer's "hints-v1")
    conn.send_record(b"...")                    # or conn.registerProducer(...) for big files
    record = await conn.receive_record()        # or conn.set_record_receiver(cb, on_lost)
    await conn.close()

Every attempt runs :class:`hilltop.transit.handshake.Handshake` over whatever stream its transport
returned; the race decides who wins. Losers are closed, pending dials cancelled, listeners
stopped and our timer cancelled as soon as the race ends; :meth:`TransitRunner.stop` waits
until all of that has really happened.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from twisted.internet import defer
from twisted.python.failure import Failure

from hilltop._runtime.awaitable import DualDeferred, Watch
from hilltop.errors import BadRecordError, TransitError
from hilltop.hints import Hint, relay_v1
from hilltop.hookspecs import TransitSession
from hilltop.streams import ByteStream
from hilltop.transit import handshake as hs
from hilltop.transit import race as rc
from hilltop.transit.plugins import HookTimeouts, LoadedTransport, Transports, load_transports
from hilltop.transit.records import (
    SECRETBOX,
    Cipher,
    RecordDecoder,
    RecordEncoder,
    RecordOpener,
    RecordSealer,
    record_keys,
)
from hilltop.transit.settings import TransportSettings

log = logging.getLogger(__name__)

Role = Literal["sender", "receiver"]
# In pull mode (receive_record), stop reading the socket once this many records wait unread.
_PULL_HIGH_WATER = 16
# Undecoded bytes kept before the first consumer arrives; then reading pauses.
_STASH_LIMIT = 1 << 20


@dataclass
class _Attempt:
    key: Hashable
    label: str
    transport: LoadedTransport | None
    hint: Any = None
    dial: defer.Deferred[Any] | None = None
    stream: ByteStream | None = None
    shake: hs.Handshake | None = None
    done: bool = False  # cancelled, failed or handed over


class TransitRunner:
    """One transit session: our hints, the race over the peer's hints, the winning connection."""

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
        record_cipher: Cipher = SECRETBOX,
    ) -> None:
        self.reactor = reactor
        self.role: Role = role
        self._tk = transit_key
        self._cipher: Cipher = record_cipher
        self.transports = transports if transports is not None else load_transports()
        self.session = TransitSession(
            reactor=reactor, role=role, no_listen=no_listen, tor=tor,
            transit_helpers=tuple(transit_helpers), local_addresses=local_addresses,
            offer_inbound=self._offer_inbound, options=dict(options or {}),
            settings=settings if settings is not None else TransportSettings(),
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
        self._result: DualDeferred[TransitConnection] | None = None
        self._pumping = False
        self._stopping: defer.Deferred[None] | None = None
        self._closing: list[defer.Deferred[None]] = []

    # -- public API ------------------------------------------------------------------------------
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

    def connect(self, peer_hints: Sequence[Hint]) -> DualDeferred[TransitConnection]:
        """Race every usable hint (the peer's plus our own relays); fire with the winner.

        Fails with :class:`hilltop.errors.TransitError` naming why each attempt failed.
        Cancelling the returned Deferred abandons the race and cleans up.
        """
        if self._result is not None:
            raise RuntimeError("connect() may only be called once per TransitRunner")
        self._result = DualDeferred(self._cancelled)
        result = self._result
        d = self.our_hints()
        d.addCallback(lambda _hints: self._begin_race(list(peer_hints)))
        d.addErrback(self._fail_result)
        return result

    def _cancelled(self, d: defer.Deferred[Any]) -> None:
        d.errback(defer.CancelledError("transit connect() was cancelled"))
        self._abandon("transit cancelled")

    def stop(self) -> defer.Deferred[None]:
        """Abandon anything still running, stop transports, wait until every loser is closed.

        The winning connection (if any) is not touched; close it with its own ``close()``.
        """
        self._abandon("transit stopped")
        if self._stopping is None:
            self._stopping = defer.ensureDeferred(self._stop_transports())
        d: defer.Deferred[None] = defer.Deferred()
        self._stopping.addBoth(lambda r: (d.callback(None), r)[1])
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
                if not transport.info.relay:
                    self._listening = True
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
        targets: list[Hint] = []
        for hint in peer_hints:
            targets += hint.split() if isinstance(hint, relay_v1.Hint) else [hint]
        for transport, hint in self._own:  # our own relays: we meet the peer there
            if transport.info.relay:
                targets += hint.split() if isinstance(hint, relay_v1.Hint) else [hint]
        for hint in targets:
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
            candidates.append(rc.Candidate(key, tier=info.tier, priority=hint.priority,
                                           label=label, delay=info.start_delay))
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

    def _start_attempt(self, a: _Attempt) -> None:
        assert self._race is not None
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
        a.done = True
        self._race.attempt_failed(a.key, reason, self._now())
        self._pump()

    def _begin_handshake(self, a: _Attempt, via_relay: bool) -> None:
        assert a.stream is not None
        a.shake = hs.Handshake(self.role, self._tk, self._side16 if via_relay else None)
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
        while (ev := a.shake.next_event()) is not None:  # type: ignore[union-attr]
            if isinstance(ev, hs.Ready | hs.Go):
                self._race.attempt_ready(a.key, now)
            elif isinstance(ev, hs.Nevermind):
                self._race.attempt_failed(a.key, "peer chose another connection", now)
                self._close_attempt(a)
            elif isinstance(ev, hs.Failed):
                self._race.attempt_failed(a.key, ev.reason, now)
                self._close_attempt(a)
        self._pump()

    def _cancel_attempt(self, a: _Attempt, reason: str) -> None:
        log.debug("cancelling transit attempt %s: %s", a.label, reason)
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
        self._cancel_timer()
        conn = TransitConnection(self.role, self._tk, a.stream, a.shake.leftover,
                                 self._cipher)
        log.info("transit connected: %s", conn.description)
        self._stop_soon()
        if self._result is not None and not self._result.called:
            self._result.callback(conn)
        else:
            conn.close()

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


class TransitConnection:
    """The winning transit connection: encrypted records over one byte stream.

    Receiving, push style: :meth:`set_record_receiver` with callbacks; pause with
    :meth:`pauseProducing` (this stops reading the socket, so TCP pushes back on the peer) and
    :meth:`resumeProducing`. Pull style: ``await receive_record()``; reading pauses by itself
    while unread records pile up. Sending: :meth:`send_record`; a big sender registers itself
    with :meth:`registerProducer` and gets paused while the socket buffer is full.

    Bulk data path: a sender may seal records itself (on a worker thread) with :attr:`sealer`
    and hand the frames to :meth:`write_sealed`; a receiver may take sealed frames with
    :meth:`set_frame_receiver` and open them with :attr:`opener`. The nonce counters live in
    those two objects, so ordinary records before and after continue the same sequence.
    Over a plain TCP socket a bulk thread may instead borrow the socket itself
    (:meth:`borrow_socket_for_sending`, :meth:`borrow_socket_for_receiving`).
    """

    def __init__(self, role: Role, transit_key: bytes, stream: ByteStream, leftover: bytes,
                 cipher: Cipher = SECRETBOX):
        self.stream = stream
        self.description = stream.description
        send_key, receive_key = record_keys(transit_key, role, cipher)
        self._encoder = RecordEncoder(send_key, cipher)
        self._decoder = RecordDecoder(receive_key, cipher=cipher)
        self._queue: deque[bytes] = deque()
        self._waiters: deque[defer.Deferred[bytes]] = deque()
        self._on_record: Callable[[bytes], None] | None = None
        self._on_lost: Callable[[Exception], None] | None = None
        self._on_frames: Callable[[list[Any]], None] | None = None
        # Bytes that arrive before anyone asked for records or frames wait here undecoded, so
        # a bulk receiver can still choose frame mode (reading pauses once this grows).
        self._stash: list[bytes] | None = []
        self._stashed = 0
        self._paused = False
        self._lost: Exception | None = None
        self._closed_notified = False
        stream.start_receiving(self._data, self._connection_lost)
        if leftover:
            self._data(leftover)

    # sending
    def send_record(self, plaintext: bytes) -> None:
        if self._lost is not None:
            raise TransitError(f"cannot send: {self._lost}")
        self.stream.write(self._encoder.encode(plaintext))

    @property
    def sealer(self) -> RecordSealer:
        """Seals our outgoing records; use it from one thread at a time, in record order."""
        return self._encoder

    @property
    def opener(self) -> RecordOpener:
        """Opens the peer's frames in order (see :meth:`set_frame_receiver`)."""
        return self._decoder.opener

    def write_sealed(self, frame: bytes) -> None:
        """Send a record sealed with :attr:`sealer` (frames must go out in sealing order)."""
        if self._lost is not None:
            raise TransitError(f"cannot send: {self._lost}")
        self.stream.write(frame)

    async def borrow_socket_for_sending(self) -> socket.socket | None:
        """A duplicate of the TCP socket under this connection for a bulk-data thread
        (:mod:`hilltop.transit.bulkpump`), once every record sent so far has left; seal with
        :attr:`sealer`. None when the stream has no plain socket (then use :meth:`write_sealed`).
        The reactor keeps reading: the peer's next record (its ack) arrives as usual."""
        lend = getattr(self.stream, "lend_socket", None)
        if lend is None or self._lost is not None:
            return None
        sock: socket.socket | None = await lend()
        return sock

    async def borrow_socket_for_receiving(self) -> tuple[socket.socket, bytes] | None:
        """Like :meth:`borrow_socket_for_sending`, for a thread that reads the socket itself:
        reading stops here, and the bytes that arrived but were not decoded yet come along
        (the thread opens frames with :attr:`opener`). Call :meth:`end_borrowing` after.
        None when the stream has no plain socket or records were decoded already."""
        lend = getattr(self.stream, "lend_socket", None)
        if lend is None or self._lost is not None or self._stash is None:
            return None
        self.pauseProducing()
        sock: socket.socket | None = await lend()
        if sock is None or self._stash is None or self._lost is not None:
            if sock is not None:
                sock.close()
            self.resumeProducing()
            return None
        leftover = b"".join(self._stash)
        self._stash, self._stashed = None, 0
        return sock, leftover

    def end_borrowing(self) -> None:
        """The receiving thread is gone: the reactor reads again (the sender's hang-up)."""
        self.resumeProducing()

    def registerProducer(self, producer: Any, streaming: bool) -> None:  # noqa: N802
        self.stream.register_producer(producer, streaming)

    def unregisterProducer(self) -> None:  # noqa: N802
        self.stream.unregister_producer()

    # receiving
    def set_record_receiver(
        self, on_record: Callable[[bytes], None], on_lost: Callable[[Exception], None]
    ) -> None:
        """Push mode: every record goes to ``on_record``; the end (an error) to ``on_lost``."""
        self._on_record, self._on_lost = on_record, on_lost
        self._start_consuming()
        self._deliver()

    def set_frame_receiver(
        self, on_frames: Callable[[list[Any]], None] | None,
        on_lost: Callable[[Exception], None] | None,
    ) -> None:
        """Frame mode: hand each batch of *sealed* frames (``nonce || tag || ciphertext``) to
        ``on_frames`` unopened, in order; the caller opens them with :attr:`opener`. Pass
        ``None`` to go back to records. Flow control is the caller's, with pause/resume."""
        if self._queue:
            raise RuntimeError("records already opened; switch to frames before data arrives")
        self._on_frames, self._on_lost = on_frames, on_lost
        self._closed_notified = False
        self._start_consuming()
        if self._lost is not None:
            self._deliver()

    def set_frame_buffers(self, alloc: Callable[[int], bytearray]) -> None:
        """Where frame mode gathers frames that span reads: ``alloc(size)`` returns a buffer
        of at least ``size`` bytes (a pool avoids a fresh zero-filled buffer per record)."""
        self._decoder.framer.alloc = alloc

    def receive_record(self) -> DualDeferred[bytes]:
        """Pull mode: the next record, or a TransitError once the connection is gone."""
        d: DualDeferred[bytes] = DualDeferred()
        self._start_consuming()
        if self._queue:
            d.callback(self._queue.popleft())
            self._update_pull_pressure()
        elif self._lost is not None:
            d.errback(self._lost)
        else:
            self._waiters.append(d)
        return d

    def pauseProducing(self) -> None:  # noqa: N802
        self._paused = True
        self.stream.pause_reading()

    def resumeProducing(self) -> None:  # noqa: N802
        self._paused = False
        self._deliver()
        if not self._paused:
            self.stream.resume_reading()

    def stopProducing(self) -> None:  # noqa: N802
        self.close()

    def close(self) -> defer.Deferred[None]:
        """Close the connection; the Deferred fires once the socket is really gone."""
        self.stream.close()
        return self.stream.when_closed()

    def when_closed(self) -> defer.Deferred[None]:
        return self.stream.when_closed()

    # internals
    def _start_consuming(self) -> None:
        if self._stash is None:
            return
        stash, self._stash = self._stash, None
        if self._stashed >= _STASH_LIMIT and not self._paused and self._lost is None:
            self.stream.resume_reading()
        for data in stash:  # also after the connection closed: these bytes did arrive
            self._decode(data)

    def _data(self, data: bytes) -> None:
        if self._lost is not None:
            return
        if self._stash is not None:
            self._stash.append(data)
            self._stashed += len(data)
            if self._stashed >= _STASH_LIMIT:
                self.stream.pause_reading()
            return
        self._decode(data)

    def _decode(self, data: bytes) -> None:
        if isinstance(self._lost, BadRecordError):
            return
        try:
            if self._on_frames is not None:
                frames = self._decoder.framer.feed(data)
                if frames:
                    self._on_frames(frames)
                return
            records = self._decoder.feed(data)
        except BadRecordError as err:
            self._lost = err  # also replaces "connection closed": this is the real reason
            self.stream.close()
            self._deliver()
            return
        self._queue.extend(records)
        self._deliver()

    def _connection_lost(self, why: str) -> None:
        if self._lost is None:
            self._lost = TransitError(f"transit {why}")
        self._deliver()

    def _deliver(self) -> None:
        while self._queue and not self._paused:
            if self._on_record is not None:
                self._on_record(self._queue.popleft())
            elif self._waiters:
                self._waiters.popleft().callback(self._queue.popleft())
            else:
                break
        self._update_pull_pressure()
        if self._lost is not None and not self._queue:
            while self._waiters:
                self._waiters.popleft().errback(self._lost)
            if self._on_lost is not None and not self._closed_notified:
                self._closed_notified = True
                self._on_lost(self._lost)

    def _update_pull_pressure(self) -> None:
        if (self._on_record is not None or self._on_frames is not None or self._paused
                or self._lost is not None):
            return
        if len(self._queue) >= _PULL_HIGH_WATER:
            self.stream.pause_reading()
        else:
            self.stream.resume_reading()


async def connect_transit(
    reactor: Any,
    role: Role,
    transit_key: bytes,
    peer_hints: Sequence[Hint],
    **kwargs: Any,
) -> tuple[TransitRunner, TransitConnection]:
    """Convenience for callers whose hints are already exchanged (tests, tools)."""
    runner = TransitRunner(reactor, role, transit_key, **kwargs)
    await runner.our_hints()
    return runner, await runner.connect(peer_hints)
