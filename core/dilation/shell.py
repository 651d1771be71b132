"""The Twisted shell of Dilation: feeds :mod:`.manager` and carries out what it returns.

Each generation is one :class:`hilltop.transit.runner.TransitRunner` race with the Dilation
handshake (:class:`hilltop.dilation.l2.L2Shake`) in place of the transit one, so every
transport hilltop races for a file transfer (direct TCP, relays, punch, Tor, LAN, WebRTC,
plugins) also carries L2 connections; each race gets side channels scoped to its generation
(:mod:`hilltop.dilation.services`). Subchannels are Twisted transports; programs reach them through
:class:`DilatedWormhole` endpoints, the shape official 0.24 offers (``connector_for`` /
``listener_for``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

from twisted.internet import defer, error
from twisted.internet.interfaces import IAddress, IStreamClientEndpoint, IStreamServerEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from zope.interface import implementer

from hilltop._runtime.awaitable import DualDeferred, Watch, once_fired
from hilltop.dilation import l2, wire
from hilltop.dilation import manager as m
from hilltop.dilation import takeover as tk
from hilltop.errors import HilltopError, ProtocolError

log = logging.getLogger(__name__)

HINT_GATHER = 0.5
"""Seconds to wait after the peer's first ``connection-hints`` of a generation before racing:
official sends its relay hints and its listener hints in two messages, moments apart."""
NO_HINTS_START = 5.0
"""Race anyway (inbound connections only) if the peer sent no hints within this time."""
RETRY_DELAY = 1.0
"""Seconds between a generation's failed race and the leader's next ``reconnect``."""
PAUSE_ABOVE = 8 << 20
"""Stop reading local producers while this many bytes wait for the peer's ACK. The peer acks
a record once it reads it, so the socket buffers on both sides (megabytes on loopback) count
as unacknowledged: at 4 MiB (resume below 1 MiB) the sender waited for acks while the buffers
drained. 256 MiB direct, 3 alternated runs each: 4/1 MiB 5.5-5.7 s and 69-72 MB sender RSS,
8/6 MiB 4.0-4.2 s and 82-83 MB, 16/12 MiB 3.7-4.6 s and 108-118 MB (the unacked records,
and Twisted's write buffer, hold about three times the window)."""
RESUME_BELOW = 6 << 20
STOP_ACK_WAIT = 2.0
"""Seconds :meth:`Dilator.stop` keeps the L2 connection, read and acking, until the peer has
acknowledged every record we sent (a sender's CLOSE, which follows its last ACKs): written is
not delivered. Over Tor the bytes sat in the local tor process when the connection was
closed and the runner's stop removed the onion service that carried it, so the peer's last
CLOSE never came (integration/test_tor_network.py's durable test)."""
STOP_CLOSE_WAIT = 1.0
"""Then seconds for the graceful close (what is still buffered is written) before an abort."""

Prober = Callable[[list[tuple[str, int]], float], "defer.Deferred[bool]"]
"""Dials ``(host, port)`` targets for a path takeover probe (:func:`direct_prober`)."""


@implementer(IAddress)
class SubchannelAddress:
    def __init__(self, subprotocol: str) -> None:
        self.subprotocol = subprotocol

    def __repr__(self) -> str:
        return f"SubchannelAddress({self.subprotocol!r})"


class SubchannelTransport:
    """The transport a subchannel's Protocol writes to (write, loseConnection, producers)."""

    def __init__(self, dilator: Dilator, scid: int, subprotocol: str) -> None:
        self._d = dilator
        self.scid = scid
        self.subprotocol = subprotocol
        self.protocol: Protocol | None = None
        self.producer: Any = None
        self.disconnecting = False

    def write(self, data: bytes) -> None:
        if self.disconnecting or not data:
            return
        l3 = self._d.l3
        assert l3 is not None  # a subchannel exists only once L3 does
        l3.write(self.scid, bytes(data))
        self._d.flush()

    def writeSequence(self, seq: list[bytes]) -> None:
        self.write(b"".join(seq))

    def loseConnection(self) -> None:
        if not self.disconnecting:
            self.disconnecting = True
            if self._d.l3 is not None:
                self._d.l3.close(self.scid)
            self._d.flush()

    abortConnection = loseConnection

    def getPeer(self) -> SubchannelAddress:
        return SubchannelAddress(self.subprotocol)

    def getHost(self) -> SubchannelAddress:
        return SubchannelAddress(self.subprotocol)

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        self.producer = producer
        self._d.check_pressure()

    def unregisterProducer(self) -> None:
        self.producer = None

    # inbound flow control (IPushProducer, as official's subchannel): a consumer that cannot
    # keep up pauses reading the L2 connection itself (L3.pause), not just this subchannel
    def pauseProducing(self) -> None:
        self._d.pause_reading(self.scid)

    def resumeProducing(self) -> None:
        self._d.resume_reading(self.scid)

    def stopProducing(self) -> None:
        self._d.resume_reading(self.scid)
        self.loseConnection()


class Dilator:
    """One dilated wormhole: generations of L2 connections and the L3 engine over them."""

    def __init__(self, reactor: Any, send_dilate: Callable[[bytes], None], wormhole_key: bytes,
                 version: str, make_runner: Callable[[bool, bytes, str, int], Any],
                 ping_interval: float = 30.0, side: str | None = None,
                 prober: Prober | None = None, punchover: Any = None) -> None:
        self.reactor = reactor
        self._send = send_dilate
        self.key = wire.dilation_key(wormhole_key)
        self.side = side or os.urandom(8).hex()
        self._make_runner = make_runner
        self._ping_interval = ping_interval
        self.gens = m.Generations(self.side, version)
        self.l3: m.L3 | None = None
        self._runner: Any = None
        self._peer_hints: list[dict[str, Any]] = []
        self._race_call: Any = None
        self._stream: Any = None
        self._codec: l2.RecordCodec | None = None
        self._timer: Any = None
        self._timer_deadline: float | None = None  # what _timer was armed for
        self._subs: dict[int, SubchannelTransport] = {}
        self._listeners: dict[str, Factory] = {}
        self._pending_opens: dict[str, list[SubchannelTransport]] = {}
        self._connected = Watch()
        self._failed: HilltopError | None = None
        self.generation_count = 0
        self.description = ""
        self.on_status: Callable[[str], None] | None = None
        self.path_watchers: list[Callable[[str | None], None]] = []
        """Told each new L2 connection's description, and None when it is lost."""
        self._paused = False
        self._reading = False  # whether the current stream is being read
        # path takeover (leader only): probe the follower's direct hints while on a relay
        self._prober = prober
        self._takeover = tk.Takeover()
        self._take_timer: Any = None
        self._probe: defer.Deferred[bool] | None = None
        self._probe_targets: list[tuple[str, int]] = []
        # a punched path's takeover between hilltop peers (hilltop.dilation.punchover)
        self._punchover = punchover
        self._we_punch = False  # this generation's hints of ours include a punch hint
        if punchover is not None:
            punchover.listen(self._punch_requested)
        self._stopping: defer.Deferred[None] | None = None
        self._acked: defer.Deferred[None] | None = None  # stop waits: the peer has it all
        self._act()

    # -- from the wormhole -----------------------------------------------------------------------
    def got_message(self, data: bytes) -> None:
        try:
            msg = wire.parse(data)
            if msg is not None:
                self.gens.message(msg)
        except ProtocolError as err:
            self._fail(err)
            return
        self._act()

    def when_connected(self) -> DualDeferred[None]:
        return self._connected.when()

    # -- generations -----------------------------------------------------------------------------
    def _act(self) -> None:
        for action in self.gens.actions():
            match action:
                case m.Send(message):
                    self._send(wire.encode(message))
                case m.StartGeneration(number):
                    self._start_generation(number)
                case m.UseHints(hints):
                    self._use_hints(hints)
                case m.Drop():
                    self.drop_connection()

    def _start_generation(self, number: int) -> None:
        assert self.gens.leader is not None
        if self.l3 is None:
            self.l3 = m.L3(self.gens.leader, self._ping_interval)
        self._stop_runner()
        self._peer_hints = []
        self._we_punch = False
        self._takeover.leader = bool(self.gens.leader)
        runner = self._runner = self._make_runner(self.gens.leader, self.key, self.side, number)
        self._status(f"connecting (generation {number})")
        d = runner.our_hints()

        def publish(hints: list[Any]) -> None:
            from hilltop.hints import hints_to_wire

            if runner is self._runner:
                self._we_punch = any(getattr(h, "type", None) == "tcp-punch-v1" for h in hints)
                self._send(wire.encode(wire.ConnectionHints(hints_to_wire(hints))))
                # the peer's hints may have come while our listeners started (a reconnect:
                # the follower sends them right after its reconnecting)
                wait = HINT_GATHER if self._peer_hints else NO_HINTS_START
                self._race_call = self.reactor.callLater(wait, self._race, runner)

        d.addCallbacks(publish, lambda f: log.warning("dilation hints failed: %s", f.value))

    def _use_hints(self, hints: list[dict[str, Any]]) -> None:
        first = not self._peer_hints
        self._peer_hints.extend(hints)
        if first and self._race_call is not None and self._race_call.active():
            self._race_call.reset(HINT_GATHER)

    def _race(self, runner: Any) -> None:
        self._race_call = None
        if runner is not self._runner:
            return
        from hilltop.hints import parse_hints

        hints = parse_hints(self._peer_hints, claimed=runner.transports.hint_types())
        d = runner.connect(hints)
        d.addCallbacks(lambda won: self._won(runner, won), lambda f: self._race_failed(runner, f))

    def _race_failed(self, runner: Any, failure: Failure) -> None:
        if runner is not self._runner:
            return None
        log.info("dilation generation failed: %s", failure.getErrorMessage())
        self._status(f"no connection: {failure.getErrorMessage()}")
        # the leader starts again through reconnect; the follower waits for it
        # a pause before the next round, so a relay that is down is not dialled in a tight loop
        self.reactor.callLater(RETRY_DELAY, self._retry)
        return None

    def _retry(self) -> None:
        if self.gens.state is m.Gen.STOPPED:
            return
        self.gens.race_failed()
        self._act()

    def _won(self, runner: Any, won: Any) -> None:
        if runner is not self._runner:
            won.stream.close()
            return
        assert self.l3 is not None
        shake: l2.L2Shake = won.shake
        self._codec = shake.codec()
        stream = self._stream = won.stream
        self.description = won.description
        self.generation_count += 1
        # connected before the first record is read: the bytes held since the handshake
        # (the peer's re-sent records) may end the transfer, and stop us, within hand_over
        self.gens.connected()
        self.l3.connection_made(self._now())
        self._status(f"connected: {won.description}")
        self._connected.fire(None)
        self._tell_path(won.description)
        self._reading = self.l3.reading_paused  # the opposite of what we want: apply it
        won.hand_over(lambda data: self._data(stream, data), lambda why: self._lost(stream, why))
        self._apply_reading()  # read it at once, unless a subchannel's consumer is full
        self.flush()
        if stream is self._stream and self._stopping is None:
            self._look_for_better_path(won)

    def _data(self, stream: Any, data: bytes) -> None:
        if stream is not self._stream or self._codec is None or self.l3 is None:
            return
        try:
            recs = self._codec.feed(data)
        except ProtocolError as err:
            log.warning("dropping the dilation connection: %s", err)
            stream.close()
            return
        now = self._now()
        for rec in recs:
            self.l3.record_received(rec, now)
        self.flush()

    def _lost(self, stream: Any, why: str) -> None:
        if stream is not self._stream:
            return
        self._stream = None
        self._codec = None
        assert self.l3 is not None
        self.l3.connection_lost()
        if self.gens.state is not m.Gen.STOPPING:
            self._status(f"reconnecting ({why})")
        self._takeover.lost()
        self._cancel_probe()
        self._arm_takeover()
        self.gens.lost()
        self._act()
        self._tell_path(None)
        self._check_acked()

    def is_connected(self) -> bool:
        """Whether an L2 connection carries L3 now."""
        return self._stream is not None

    def _tell_path(self, description: str | None) -> None:
        for watcher in list(self.path_watchers):
            watcher(description)

    def drop_connection(self) -> None:
        """Drop the current L2 connection now (a silent peer, the leader's ``reconnect``,
        tests). Aborted, not closed: a close first flushes what waits to be sent, which on a
        dead path (an address that went away) never leaves, so the connection was never
        counted lost and the next generation never started; L3 re-sends it anyway."""
        stream = self._stream
        if stream is not None:
            abort = getattr(stream, "abort", None)
            if abort is None:
                stream.close()
            else:
                abort()

    # -- path takeover (hilltop.dilation.takeover) ----------------------------------------------
    def _look_for_better_path(self, won: Any) -> None:
        """The leader, on a relayed generation, probes the follower's direct hints (and,
        with a hilltop follower, punches with it); the follower learns whether to answer."""
        relayed = bool(getattr(won.shake, "via_relay", False))
        punchable = self._peer_punch_hint() is not None
        if not self.gens.leader:
            self._takeover.connected(self._now(), relayed, 0, punchable)
            return
        if self._prober is None and not punchable:
            return
        from hilltop.hints import direct_tcp_v1, parse_hints

        hints = parse_hints(self._peer_hints)
        self._probe_targets = [(h.hostname, h.port) for h in hints
                               if isinstance(h, direct_tcp_v1.Hint)][:PROBE_TARGETS]
        if self._prober is None:
            self._probe_targets = []
        switches = self._takeover.switches
        self._takeover.connected(self._now(), relayed, len(self._probe_targets), punchable)
        if self._takeover.switches > switches:
            self._status(f"took over from the relay: {won.description}")
        self._arm_takeover()

    def _arm_takeover(self) -> None:
        if self._take_timer is not None and self._take_timer.active():
            self._take_timer.cancel()
        self._take_timer = None
        deadline = self._takeover.next_deadline()
        if deadline is not None:
            self._take_timer = self.reactor.callLater(max(0.0, deadline - self._now()),
                                                      self._take_tick)

    def _take_tick(self) -> None:
        self._take_timer = None
        self._take_actions(self._takeover.handle_timer(self._now()))

    def _take_actions(self, actions: list[tk.TakeAction]) -> None:
        for action in actions:
            match action:
                case tk.Probe(punch):
                    self._start_probe(punch)
                case tk.Punch():
                    hint = self._peer_punch_hint()
                    assert hint is not None and self._punchover is not None
                    self._watch_probe(self._punchover.dial(hint, tk.PUNCH_TIMEOUT, hold=True))
                case tk.CancelProbe():
                    self._cancel_probe()
                case tk.Switch():
                    self._status("a direct path answers: leaving the relay for it")
                    self.drop_connection()
        self._arm_takeover()

    def _start_probe(self, punch: bool) -> None:
        from hilltop.dilation.punchover import any_answer

        dials = []
        if self._prober is not None and self._probe_targets:
            dials.append(self._prober(self._probe_targets, tk.PROBE_TIMEOUT))
        hint = self._peer_punch_hint() if punch else None
        if hint is not None and self._punchover is not None:
            self._punchover.ask(self.gens.generation)
            dials.append(self._punchover.dial(hint, tk.PUNCH_TIMEOUT))
        self._watch_probe(dials[0] if len(dials) == 1 else any_answer(dials))

    def _watch_probe(self, probe: defer.Deferred[bool]) -> None:
        self._probe = probe
        probe.addCallbacks(lambda ok, p=probe: self._probe_done(p, ok), lambda _f: None)

    def _peer_punch_hint(self) -> Any:
        """The peer's punch hint of this generation, if both of us punch (else None)."""
        if self._punchover is None or not self._we_punch:
            return None
        from hilltop.hints import parse_hints, tcp_punch_v1

        return next((h for h in parse_hints(self._peer_hints)
                     if isinstance(h, tcp_punch_v1.Hint)), None)

    def _punch_requested(self, generation: int) -> None:
        """Follower: the leader's probe asks us to punch back (ignored unless it names the
        generation that runs now: a late request finds another one)."""
        if generation != self.gens.generation or self._stream is None:
            return
        punchable = self._peer_punch_hint() is not None
        self._take_actions(self._takeover.asked(self._now(), punchable))

    def _probe_done(self, probe: defer.Deferred[bool], reachable: bool) -> None:
        if probe is not self._probe:
            return
        self._probe = None
        self._take_actions(self._takeover.probe_answered(self._now(), reachable))

    def _cancel_probe(self) -> None:
        probe, self._probe = self._probe, None
        if probe is not None and not probe.called:
            probe.cancel()

    # -- L3 --------------------------------------------------------------------------------------
    def flush(self) -> None:
        l3 = self.l3
        if l3 is None:
            return
        out = l3.records_to_send()
        if out and self._stream is not None and self._codec is not None:
            # one write: a message stream (WebSocket relay, WebRTC) sends a message per write
            self._stream.write(b"".join(self._codec.encode(rec) for rec in out))
        for event in l3.events():
            self._event(event)
        self._arm_timer()
        self.check_pressure()
        self._apply_reading()
        self._check_acked()

    def _check_acked(self) -> None:
        """Wake :meth:`stop` once the peer acknowledged all we sent, or the path is gone."""
        acked = self._acked
        if acked is not None and (self._stream is None or self.l3 is None
                                  or not self.l3.owes_acks):
            self._acked = None
            acked.callback(None)

    # -- inbound flow control ----------------------------------------------------------------------
    def pause_reading(self, scid: int) -> None:
        if self.l3 is not None:
            self.l3.pause(scid)
            self._apply_reading()

    def resume_reading(self, scid: int) -> None:
        if self.l3 is not None:
            self.l3.resume(scid)
            self._apply_reading()

    def _apply_reading(self) -> None:
        """Read the L2 connection exactly while no subchannel's consumer is paused."""
        stream = self._stream
        if stream is None or self.l3 is None:
            return
        want = not self.l3.reading_paused
        if want != self._reading:
            self._reading = want
            if want:
                stream.resume_reading()
            else:
                stream.pause_reading()

    def check_pressure(self) -> None:
        if self.l3 is None:
            return
        if not self._paused and self.l3.unacked_bytes > PAUSE_ABOVE:
            self._paused = True
            for sub in list(self._subs.values()):
                if sub.producer is not None:
                    sub.producer.pauseProducing()
        elif self._paused and self.l3.unacked_bytes < RESUME_BELOW:
            self._paused = False
            for sub in list(self._subs.values()):
                if sub.producer is not None:
                    sub.producer.resumeProducing()

    def _event(self, event: m.L3Event) -> None:
        match event:
            case m.Opened(scid, _) if self._stopping is not None:
                assert self.l3 is not None
                self.l3.refuse(scid)  # we are ending: nobody will read it
            case m.Opened(scid, subprotocol):
                sub = self._subs[scid] = SubchannelTransport(self, scid, subprotocol)
                factory = self._listeners.get(subprotocol)
                if factory is None:
                    self._pending_opens.setdefault(subprotocol, []).append(sub)
                else:
                    self._attach(sub, factory)
            case m.Received(scid, data):
                target = self._subs.get(scid)
                if target is not None and target.protocol is not None:
                    target.protocol.dataReceived(data)
            case m.Closed(scid):
                gone = self._subs.pop(scid, None)
                if gone is not None and gone.protocol is not None:
                    gone.disconnecting = True
                    gone.protocol.connectionLost(Failure(error.ConnectionDone()))
            case m.DropConnection(reason):
                log.info("dilation: %s; dropping the connection", reason)
                self.drop_connection()

    def _attach(self, sub: SubchannelTransport, factory: Factory) -> None:
        proto: Any = factory.buildProtocol(sub.getPeer())
        if proto is None:
            sub.loseConnection()
            return
        sub.protocol = proto
        proto.makeConnection(sub)

    def listen(self, subprotocol: str, factory: Factory) -> None:
        if subprotocol in self._listeners:
            raise ValueError(f"already listening for subprotocol {subprotocol!r}")
        self._listeners[subprotocol] = factory
        for sub in self._pending_opens.pop(subprotocol, []):
            self._attach(sub, factory)

    def open(self, subprotocol: str, factory: Factory) -> Protocol:
        if self.l3 is None:
            raise ProtocolError("not dilated yet")
        scid = self.l3.open(subprotocol)
        sub = self._subs[scid] = SubchannelTransport(self, scid, subprotocol)
        self._attach(sub, factory)
        self.flush()
        assert sub.protocol is not None
        return sub.protocol

    # -- timers and the end ----------------------------------------------------------------------
    def _arm_timer(self) -> None:
        """Keep one timer for L3's next deadline. Every flush asks (twice per record of a
        transfer), and the deadline (the next ping) rarely moves: the armed timer stays."""
        deadline = self.l3.next_deadline() if self.l3 is not None else None
        if self._timer is not None and self._timer.active():
            if deadline == self._timer_deadline:
                return
            self._timer.cancel()
        self._timer = None
        self._timer_deadline = deadline
        if deadline is not None:
            self._timer = self.reactor.callLater(max(0.0, deadline - self._now()), self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self.l3 is not None:
            self.l3.handle_timer(self._now())
            self.flush()

    def stop(self) -> defer.Deferred[None]:
        """End Dilation; fires once the L2 connection is closed and the race stopped.

        As official 0.24's manager (``CONNECTED`` -> ``STOPPING`` -> ``STOPPED``): the
        connection is closed, not dropped, and the stop ends with its loss. Before the close,
        the connection is still read (records acked, nothing delivered) until the peer has
        acknowledged our last records (:data:`STOP_ACK_WAIT`); the race, whose transports
        may carry the connection (an onion service), stops only after it."""
        if self._stopping is None:
            if self.gens.state is not m.Gen.STOPPED:
                self.gens.stop()
            self._takeover.stop()
            self._cancel_probe()
            self._arm_takeover()
            if self._timer is not None and self._timer.active():
                self._timer.cancel()
            for sub in list(self._subs.values()):
                if sub.protocol is not None:
                    sub.protocol.connectionLost(Failure(error.ConnectionLost("dilation stopped")))
            self._subs.clear()
            self._stopping = defer.ensureDeferred(self._wind_down())
            self._stopping.addErrback(lambda f: log.warning("dilation stop: %s", f.value))
        return once_fired(self._stopping)

    async def _wind_down(self) -> None:
        stream = self._stream
        if stream is not None and self.l3 is not None and self.l3.owes_acks:
            self._acked = acked = defer.Deferred[None]()
            acked.addTimeout(STOP_ACK_WAIT, self.reactor)
            with contextlib.suppress(defer.TimeoutError):
                await acked
            self._acked = None
        if stream is not None and stream is self._stream:
            closed = once_fired(stream.when_closed())
            stream.close()  # after what L3 wrote (our last ACKs, a subchannel's CLOSE)
            closed.addTimeout(STOP_CLOSE_WAIT, self.reactor)
            try:
                await closed
            except defer.TimeoutError:
                abort = getattr(stream, "abort", None)
                if abort is not None:
                    abort()
            if stream is self._stream:  # no word of its loss: it is gone for us all the same
                self._lost(stream, "dilation stopped")
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        await self._stop_runner()

    def _stop_runner(self) -> defer.Deferred[None]:
        if self._race_call is not None and self._race_call.active():
            self._race_call.cancel()
        self._race_call = None
        runner, self._runner = self._runner, None
        if runner is None:
            return defer.succeed(None)
        d: defer.Deferred[None] = runner.stop()
        return d

    def _fail(self, err: HilltopError) -> None:
        self._failed = err
        self._connected.fail(err)
        self.stop()

    def _status(self, text: str) -> None:
        log.info("dilation: %s", text)
        if self.on_status is not None:
            self.on_status(text)

    def _now(self) -> float:
        return float(self.reactor.seconds())


@implementer(IStreamClientEndpoint)
class SubchannelConnector:
    def __init__(self, dilated: DilatedWormhole, subprotocol: str) -> None:
        self._dilated = dilated
        self._subprotocol = subprotocol

    def connect(self, factory: Any) -> defer.Deferred[Any]:
        async def go() -> Any:
            dilator = await self._dilated.dilator()
            return dilator.open(self._subprotocol, factory)

        return defer.ensureDeferred(go())


class _ListeningPort:
    def stopListening(self) -> None:
        return None


@implementer(IStreamServerEndpoint)
class SubchannelListener:
    def __init__(self, dilated: DilatedWormhole, subprotocol: str) -> None:
        self._dilated = dilated
        self._subprotocol = subprotocol

    def listen(self, factory: Any) -> defer.Deferred[Any]:
        async def go() -> Any:
            dilator = await self._dilated.dilator()
            dilator.listen(self._subprotocol, factory)
            return _ListeningPort()

        return defer.ensureDeferred(go())


class DilatedWormhole:
    """What ``await w.dilate()`` returns: endpoints for subchannels by subprotocol name.

    ``connector_for(name).connect(factory)`` opens a subchannel (the peer must listen for
    ``name``); ``listener_for(name).listen(factory)`` accepts the peer's. Opens that arrive
    before we listen wait for the listener, as official's do.
    """

    def __init__(self, started: DualDeferred[Dilator]) -> None:
        self._watch = Watch()
        started.addCallbacks(self._watch.fire, lambda f: self._watch.fail(f.value))

    async def dilator(self) -> Dilator:
        d: Dilator = await self._watch.when()
        return d

    def when_dilated(self) -> DualDeferred[None]:
        async def go() -> None:
            d = await self.dilator()
            await d.when_connected()

        from hilltop.api import _dual

        result: DualDeferred[None] = _dual(go())
        return result

    def connector_for(self, subprotocol: str) -> SubchannelConnector:
        if not subprotocol:
            raise ValueError("subprotocol must be a non-empty string")
        return SubchannelConnector(self, subprotocol)

    def listener_for(self, subprotocol: str) -> SubchannelListener:
        return SubchannelListener(self, subprotocol)


PROBE_TARGETS = 8
"""At most this many of the follower's direct hints are probed (one SYN each per probe)."""


def direct_prober(reactor: Any, options: Any) -> Prober | None:
    """The takeover probe (:mod:`hilltop.dilation.takeover`): TCP connects to the targets at
    once; fires True as soon as one is accepted or refused (the path carries packets both
    ways), False once all failed otherwise. None when the next race would not dial a direct
    hint anyway (``--tor``: no clear-net dial; ``direct-tcp`` not among the transports)."""
    if options.tor or (options.transports and "direct-tcp" not in options.transports):
        return None

    def probe(targets: list[tuple[str, int]], timeout: float) -> defer.Deferred[bool]:
        from hilltop.streams import dial_tcp

        dials: list[defer.Deferred[Any]] = []

        def cancel_dials(_d: object) -> None:
            for d in dials:
                if not d.called:
                    d.cancel()

        result: defer.Deferred[bool] = defer.Deferred(cancel_dials)
        left = [len(targets)]

        def settle(reachable: bool) -> None:
            result.callback(reachable)
            cancel_dials(result)

        def answered(stream: Any) -> None:
            stream.close()
            if not result.called:
                settle(True)

        def failed(f: Failure) -> None:
            left[0] -= 1
            if result.called:
                return
            if f.check(error.ConnectionRefusedError):
                settle(True)
            elif left[0] == 0:
                settle(False)

        for host, port in targets:
            d = dial_tcp(reactor, host, port, "takeover probe", timeout)
            dials.append(d)
            d.addCallbacks(answered, failed)
        if not targets:
            result.callback(False)
        return result

    return probe


def runner_factory(reactor: Any, w: Any, options: Any) -> Callable[[bool, bytes, str, int], Any]:
    """How each generation's race is built: the transports and settings a file transfer of
    this wormhole would use (``hilltop.transfer.session.make_runner``: ``--tor``, relays,
    third-party plugins alike), running :class:`~hilltop.dilation.l2.L2Shake`, with the
    session's services keyed by the Dilation key and scoped to the generation
    (:class:`~hilltop.dilation.services.GenerationServices`), so ``webrtc``'s signalling of
    one generation never meets another's."""
    from hilltop.dilation.services import GenerationServices
    from hilltop.hints import parse_transit_helper
    from hilltop.transit.plugins import load_configured
    from hilltop.transit.runner import TransitRunner

    def make(leader: bool, key: bytes, side: str, generation: int) -> TransitRunner:
        role = "sender" if leader else "receiver"
        transports = load_configured(list(options.transports) if options.transports else None,
                                     no_plugins=options.no_plugins)
        return TransitRunner(
            reactor, role, key,  # type: ignore[arg-type]
            transports=transports,
            transit_helpers=[parse_transit_helper(h) for h in options.transit_helpers if h],
            no_listen=options.no_listen, tor=options.tor,
            local_addresses=options.local_addresses, settings=options.settings,
            options=dict(options.plugin_options), on_attempt=options.on_attempt,
            relay_side16=side,
            handshake=lambda side16: l2.L2Shake(leader, key, side16),
            services=GenerationServices(w, key, generation),
        )

    return make
