"""The transfer session: the one shell around :class:`hilltop.transfer.engine.TransferEngine`,
used by :class:`hilltop.api.Wormhole` and the CLI alike.

The engine decides; this module does what it says (mailbox messages, the transit race, the
records on the :class:`~hilltop.transit.channel.Channel`, threads that hash a kept prefix,
the data path, the sink) and feeds back what happened with the reactor's time, re-arming one
timer at :meth:`~hilltop.transfer.engine.TransferEngine.next_deadline`, as aioquic's asyncio
shell does. What to do with an offer is decided here too, once (:func:`prepare`): the CLI
shows events and asks the user, the API asks its ``accept`` callback.

Callers::

    digest = await session.send(reactor, w, source, options)       # file, folder, several, stream
    incoming = await session.receive_offer(reactor, w, idle_timeout=...)
    prepared = session.prepare(incoming.offer, choices)             # refuses, or says where to
    result = await incoming.receive(prepared, options)
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from hilltop._values import value
from hilltop.errors import HilltopError, LocalError, RejectedError, TransitError
from hilltop.rendezvous import capabilities
from hilltop.transfer import engine as eng
from hilltop.transfer import inline, offers, resume, targets
from hilltop.transfer.engine import Plan
from hilltop.transfer.manifest import ManifestEntry
from hilltop.transfer.offers import (
    MESSAGE_ACK,
    Answer,
    DirectoryOffer,
    ErrorMsg,
    FileOffer,
    FilesOffer,
    Offer,
    StreamOffer,
    TextOffer,
    parse_app_message,
)
from hilltop.transfer.streamcodec import Trailer
from hilltop.transit import records
from hilltop.transit.options import TransitOptions

if TYPE_CHECKING:
    from hilltop.api import Wormhole
    from hilltop.transfer.filesink import Sink
    from hilltop.transit.channel import Channel
    from hilltop.transit.plugins import Transports
    from hilltop.transit.runner import TransitRunner

__all__ = [
    "Answer", "DirectoryOffer", "ErrorMsg", "FileOffer", "FilesOffer", "Incoming",
    "Listener", "MESSAGE_ACK", "ManifestEntry", "Offer", "Prepared", "ReceiveChoices",
    "StreamOffer", "TextOffer", "Trailer", "TransitOptions",
    "inline_allowed", "inline_eligible", "may_go_inline",
    "open_bundle", "open_source", "parse_app_message", "prepare", "reads_our_stdin",
    "receive_offer", "send", "stream_source", "warm_up_transit", "writer_sink",
]
"""What the CLI may use (and the lazily loaded :data:`_LAZY` classes, for type hints): the
session, its events and the messages it shows; the CLI imports
nothing else from :mod:`hilltop.transfer` (tests/cli/test_cli_boundary.py)."""

Progress = Callable[[int], None]


@value(frozen=False)
class Listener:
    """What the user sees of a transfer: the events, as callbacks (all optional)."""

    on_connected: Callable[[str], None] = lambda _d: None
    progress: Progress = lambda _n: None
    on_resume: Callable[[int, str], None] = lambda _o, _w: None
    on_unacknowledged: Callable[[str], None] = lambda _w: None
    on_path: Callable[[str | None], None] = lambda _d: None
    """A durable transfer (``durable-v1``) lost its path (None) or has a new one."""


# --- plan and transit ---------------------------------------------------------------
async def plan_for(w: Wormhole, options: TransitOptions, *, stream: bool = False) -> Plan:
    """The engine's plan from the features we and the peer advertised."""
    ours = capabilities.from_app_versions(w.app_versions).features
    peer = capabilities.from_app_versions(await w.get_peer_versions())
    record_size = records.record_size(ours, peer)
    return Plan(record_size, records.whole_file_sha256(ours, peer),
                records.record_cipher(ours, peer),
                v1_peer=record_size < records.BIG_RECORD_SIZE, stream=stream,
                resumable=resume.negotiated(ours, peer), idle_timeout=options.idle_timeout,
                inline=capabilities.INLINE in peer.shared_features(ours))


# --- inline: a small file in its offer (hilltop.transfer.inline decides) ---------------------
def inline_allowed(options: TransitOptions) -> bool:
    """Whether these options leave a small file free to ride in its offer; a run whose
    transit the user restricted does not list ``inline-file-v1``
    (:func:`hilltop.transfer.inline.allowed_by`)."""
    return inline.allowed_by(options)


def inline_eligible(source: Any, options: TransitOptions) -> bool:
    """Whether ``source`` may go inline if the peer lists the feature: such a sender
    neither announces ``transit-follows`` nor warms up transit before the peer's version."""
    return inline.eligible(source.offer, source.size, options)


def may_go_inline(path: str | None, options: TransitOptions) -> bool:
    """:func:`inline_eligible` for a path not opened yet (one ``stat``), for the ``version``
    message that leaves before the file is opened; the opened source decides again."""
    if path is None:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and inline.eligible(
        FileOffer(os.path.basename(path) or "-", st.st_size), st.st_size, options)


def read_inline(source: Any) -> bytes:
    """The whole of a small source (at most :data:`hilltop.transfer.offers.INLINE_LIMIT`
    bytes): its reads check, as the bulk's do, that the file did not change meanwhile."""
    chunks: list[bytes] = []
    left = source.size
    while left > 0:
        chunk = source.read(left)
        if not chunk:
            raise LocalError(f"{source.path!r} got shorter while it was being sent")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


async def may_resume(w: Wormhole) -> bool:
    """Both peers list ``resume-v1`` (:mod:`hilltop.transfer.resume`)."""
    ours = capabilities.from_app_versions(w.app_versions).features
    return resume.negotiated(ours, capabilities.from_app_versions(await w.get_peer_versions()))


def make_runner(reactor: Any, w: Wormhole, role: str, options: TransitOptions) -> TransitRunner:
    """The transit runner for this peer: our transports, our settings, and the session's
    services (:class:`hilltop.transit.services.WormholeServices`: side channel, derived keys,
    what the mailbox connection knows), the same for built-in and third-party transports."""
    from hilltop.hints import parse_transit_helper
    from hilltop.transit.plugins import load_configured
    from hilltop.transit.runner import TransitRunner
    from hilltop.transit.services import WormholeServices

    transports = _loaded_ahead.pop(_transport_choice(options), None)
    if transports is None:
        transports = load_configured(list(options.transports) if options.transports else None,
                                     no_plugins=options.no_plugins)
    tk = w.transit_key()
    return TransitRunner(
        reactor,
        role,  # type: ignore[arg-type]
        tk,
        transports=transports,
        transit_helpers=[parse_transit_helper(h) for h in options.transit_helpers if h],
        no_listen=options.no_listen,
        tor=options.tor,
        local_addresses=options.local_addresses,
        settings=options.settings,
        options=dict(options.plugin_options),
        on_attempt=options.on_attempt,
        services=WormholeServices(w, tk),
    )


TRANSIT_MODULES = (
    "hilltop.hints", "hilltop.transit.plugins", "hilltop.transit.runner",
    "hilltop.transit.services", "hilltop.transit.connection", "hilltop.transit.bulkpump",
    "hilltop.transfer.datapath", "hilltop.transfer.filesink", "concurrent.futures.thread",
    "ifaddr", "hilltop.transports.direct_tcp", "hilltop.transports.punch",
    "hilltop.transports.relay", "hilltop.transports.lan", "hilltop.transports.tor",
    "hilltop.transports.webrtc",
)
"""What a receiver imports between an offer and its answer (``-X importtime`` of a 3-byte
receive), every built-in transport's module with it (none of them imports aiortc, zeroconf
or txtorcon before it is used)."""


_loaded_ahead: dict[tuple[tuple[str, ...] | None, bool], Transports] = {}
"""Transports :func:`warm_up_transit` loaded for a choice of them, each taken once by
:func:`make_runner`."""


def _transport_choice(options: TransitOptions) -> tuple[tuple[str, ...] | None, bool]:
    return (tuple(options.transports) if options.transports else None, options.no_plugins)


def warm_up_transit(options: TransitOptions | None = None) -> None:
    """Import the transit machinery now, because a transfer that needs it is coming: the
    peer announced its offer will (``capabilities.TRANSIT_FOLLOWS``), or we are that sender.
    The peer is loading its own meanwhile, and ~40-60 ms no longer start only when the offer
    arrives (bench/README.md, "Time budget"). With ``options`` the transports are loaded too
    (entry points, config file, registration: another 10-20 ms), for :func:`make_runner`."""
    import importlib

    from hilltop._runtime.memory import importing

    with importing():  # the collector paused, as for the CLI's start-up
        for name in TRANSIT_MODULES:
            importlib.import_module(name)
        if options is not None and _transport_choice(options) not in _loaded_ahead:
            from hilltop.transit.plugins import load_configured

            try:
                loaded = load_configured(
                    list(options.transports) if options.transports else None,
                    no_plugins=options.no_plugins)
            except HilltopError:  # a broken config file: make_runner reports it, where it did
                return
            _loaded_ahead[_transport_choice(options)] = loaded


async def durable(w: Wormhole, options: TransitOptions, *, choosing: bool = False
                  ) -> TransitOptions | None:
    """``options`` if this transfer runs over Dilation (both peers list ``durable-v1`` and
    can dilate: :mod:`hilltop.dilation.channel`), else None: transit as before. The sender
    (``choosing``) takes it only when asked (``options.durable``); a receiver follows."""
    if choosing and options.durable is not True:
        return None
    from hilltop.dilation import channel

    return options if await channel.negotiated(w, options) else None


def with_grace(plan: Plan, options: TransitOptions) -> Plan:
    """A durable transfer's idle deadline also covers a reconnect's silence."""
    return replace(plan, idle_timeout=options.idle_timeout + options.reconnect_grace)


NO_TRANSIT = offers.TransitMsg().to_wire()
"""Our ``transit`` message when the transfer runs over Dilation: no hints to race."""


def transit_message(runner: TransitRunner, hints: Sequence[Any]) -> bytes:
    """Our ``transit`` message: the abilities of our loaded transports and our hints. A
    transport whose hints invite no inbound connection (``TransportInfo.inbound`` False: both
    sides dial, as ``webrtc`` and ``tcp-punch`` do) is of no use to a peer unless we give it
    hints, so its ability is said only then; the transfer names no transport."""
    from hilltop.hints import hints_to_wire

    given = {h.type for h in hints}
    types = dict.fromkeys(t for lt in runner.transports.loaded for t in lt.info.hint_types
                          if lt.info.inbound or t in given)
    abilities = [{"type": t} for t in types]
    return offers.TransitMsg(tuple(abilities), tuple(hints_to_wire(list(hints)))).to_wire()


async def connect_channel(runner: TransitRunner, peer: offers.TransitMsg,
                          cipher: records.Cipher) -> Channel:
    """Race the peer's hints (keeping third-party hint types a loaded transport claims), then
    speak records over the winner with the cipher both sides agreed on."""
    from hilltop.hints import parse_hints
    from hilltop.transit.connection import TransitConnection

    won = await runner.connect(parse_hints(list(peer.hints), runner.transports.hint_types()))
    return TransitConnection(won, runner.role, runner.transit_key, cipher)


# --- the shell ---------------------------------------------------------------
class _Shell:
    """Runs one engine: executes its actions, feeds back results, one timer."""

    def __init__(self, reactor: Any, w: Wormhole, engine: eng.TransferEngine,
                 listener: Listener) -> None:
        self.reactor = reactor
        self.w = w
        self.engine = engine
        self.listener = listener
        self.runner: TransitRunner | None = None
        self.durable: TransitOptions | None = None  # set: the channel is a Dilation subchannel
        self.channel: Channel | None = None
        self.source: Any = None
        self.sink: Any = None
        self._timer: Any = None
        self._draining = False
        self._waiter: defer.Deferred[Any] = defer.Deferred()
        self._outcome: eng.Done | eng.Failed | None = None
        self._pending: list[defer.Deferred[Any]] = []  # connect, bulk, record read
        self._proving: defer.Deferred[Any] | None = None
        self._cleaned = False
        self._ending: defer.Deferred[None] | None = None
        self._after: list[Callable[[], None]] = []

    # feeding the engine
    def feed(self, event: Callable[[float], None]) -> None:
        event(self.reactor.seconds())
        self.drain()

    def drain(self) -> None:
        """Carry out every action; what wakes the caller runs only after the last one, so
        its code (a refusal, a close) never runs in the middle of the engine's outputs."""
        if self._draining:
            return
        self._draining = True
        try:
            while actions := self.engine.actions():
                for action in actions:
                    try:
                        self._do(action)
                    except Exception as err:  # noqa: BLE001 - a sink or a send that failed
                        self.engine.failed(err)
        finally:
            self._draining = False
        self._arm()
        after, self._after = self._after, []
        for wake in after:
            wake()

    def _arm(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        deadline = self.engine.next_deadline()
        if deadline is not None:
            delay = max(0.0, deadline - self.reactor.seconds())
            self._timer = self.reactor.callLater(delay, self.feed, self.engine.handle_timer)

    def _track(self, d: Any, ok: Callable[[Any, float], None]) -> None:
        """Run ``d``; its result goes to ``ok``, its error to the engine."""
        d = defer.ensureDeferred(d) if not isinstance(d, defer.Deferred) else d
        self._pending.append(d)

        def done(result: Any) -> None:
            if d in self._pending:
                self._pending.remove(d)
            self.feed(lambda now: ok(result, now))

        def failed(failure: Any) -> None:
            if d in self._pending:
                self._pending.remove(d)
            if not isinstance(failure.value, defer.CancelledError):
                self.feed(lambda now: self.engine.failed(failure.value, now))

        d.addCallbacks(done, failed)

    def _do(self, action: eng.Action) -> None:
        e = self.engine
        match action:
            case eng.SendMessage(data):
                self.w.send_message(data)
            case eng.ReadMessage():
                d = self.w.get_message()
                d.addCallbacks(lambda data: self.feed(lambda now: e.message(data, now)),
                               lambda f: self.feed(lambda _n: e.message_failed(f.value)))
            case eng.Connect(peer) if self.durable is not None:
                from hilltop.dilation import channel as dilated

                self._track(dilated.open_channel(self.reactor, self.w, e.role, self.durable,
                                                 e.plan.cipher, self.listener.on_path),
                            self._up)
            case eng.Connect(peer):
                assert self.runner is not None
                self._track(connect_channel(self.runner, peer, e.plan.cipher), self._up)
            case eng.ProvePrefix(offset, salt):
                from twisted.internet import threads

                if e.role == "sender":
                    proving = threads.deferToThread(self.source.prove_prefix, offset, salt)
                else:
                    proving = threads.deferToThread(self.sink.prove_prefix, salt)
                self._proving = proving
                self._track(proving, e.proof_ready)
            case eng.SendRecord(data, final):
                assert self.channel is not None
                try:
                    self.channel.send_record(data)
                except TransitError as err:
                    if final:
                        e.ack_unsent(str(err))
                    else:
                        e.failed(err)
            case eng.ReadRecord():
                assert self.channel is not None
                d = self.channel.receive_record()
                self._pending.append(d)

                def got(data: bytes, d: Any = d) -> None:
                    self._pending.remove(d)
                    self.feed(lambda now: e.record(data, now))

                def lost(failure: Any, d: Any = d) -> None:
                    if d in self._pending:
                        self._pending.remove(d)
                    if isinstance(failure.value, defer.CancelledError):
                        return
                    why = _lost_because(self.channel)
                    if why is not None:
                        self.feed(lambda _n: e.failed(why))
                    else:
                        self.feed(lambda _n: e.channel_lost(failure.value))

                d.addCallbacks(got, lost)
            case eng.PrepareSink(skip_hash, direct_io):
                if skip_hash:
                    self.sink.skip_hash()
                if not direct_io:  # paced by a single-threaded sender: see without_direct_io
                    self.sink.without_direct_io()
            case eng.ResumeSinkAt(offset, hashed):
                self.sink.resume_at(offset, hashed)
            case eng.StartBulk():
                self._track(self._bulk(action), e.bulk_done)
            case eng.WriteSink(data):
                if not e.finished:  # a sink that failed before: nothing more goes in
                    self.sink.write(data)
                    self._moved(len(data))
            case eng.FinishSink(length, sha256) if e.finished:
                pass
            case eng.FinishSink(length, sha256):
                try:
                    if length is not None:
                        self.sink.end_at(length)
                        digest = self.sink.finish(sha256)
                    else:
                        digest = self.sink.finish()
                except BaseException as err:  # noqa: BLE001 - the engine reports it
                    e.failed(err)
                else:
                    e.sink_done(digest)
            case eng.Connected(description):
                self.listener.on_connected(description)
            case eng.Resumed(offset, why):
                self.listener.on_resume(offset, why)
            case eng.Unacknowledged(why):
                self.listener.on_unacknowledged(why)
            case eng.OfferArrived():
                self._after.append(lambda: self._wake(action.offer))
            case eng.Done() | eng.Failed():
                if self._outcome is None:
                    self._outcome = action
                    self._after.append(self._start_ending)

    def _up(self, channel: Channel, now: float) -> None:
        self.channel = channel
        cancel = getattr(self.source, "cancel", None)
        if cancel is not None:  # a pipe read waiting for input gives up once the channel goes
            channel.when_closed().addCallback(lambda _: cancel())
        self.engine.channel_up(channel.description, now)

    def _moved(self, nbytes: int) -> None:
        """The receiver's progress: bytes in from the sender. (A sender's progress counts
        bytes handed to the connection, which may hold them: its pace says when it waits.)"""
        self.engine.moved(self.reactor.seconds())
        self.listener.progress(nbytes)

    # the data path's Pace (hilltop.transfer.datapath.Pace): the engine keeps the idle clock
    def moved(self) -> None:
        self.engine.moved(self.reactor.seconds())

    def held(self) -> None:
        self.engine.held(self.reactor.seconds())
        if self._timer is None or not self._timer.active():
            self._arm()  # a sender's clock starts now; a later deadline waits for the timer

    async def _bulk(self, start: eng.StartBulk) -> Any:
        try:
            return await self._move_bulk(start)
        except TransitError:
            why = _lost_because(self.channel)
            if why is None:
                raise
            raise why from None

    async def _move_bulk(self, start: eng.StartBulk) -> Any:
        from hilltop.transfer import datapath

        plan, channel = self.engine.plan, self.channel
        assert channel is not None
        if self.engine.role == "sender":
            if plan.stream:
                digest = await datapath.send_until_end(
                    self.reactor, channel, self.source, self.listener.progress,
                    plan.record_size, plan.hashed, pace=self)
                return (self.source.position, digest)
            if start.offset:
                self.source.skip_to(start.offset)
            return await datapath.send(self.reactor, channel, self.source,
                                       self.listener.progress, plan.record_size, plan.hashed,
                                       hasher=start.hasher, pace=self)
        if start.size is None:
            return await datapath.receive_until_end(self.reactor, channel, self.sink,
                                                    self._moved, pace=self)
        await datapath.receive(self.reactor, channel, self.sink, start.size, self._moved,
                               inline=plan.v1_peer, pace=self)
        return None

    def _wake(self, offer: Offer) -> None:
        if not self._waiter.called:
            self._waiter.callback(offer)

    # the end
    def _start_ending(self) -> None:
        self._ending = defer.ensureDeferred(self._end())

    async def _end(self) -> None:
        outcome = self._outcome
        try:
            await self._cleanup(ok=isinstance(outcome, eng.Done))
        finally:
            if not self._waiter.called:
                if isinstance(outcome, eng.Done):
                    self._waiter.callback(outcome.result)
                elif isinstance(outcome, eng.Failed):
                    self._waiter.errback(outcome.error)

    async def _cleanup(self, *, ok: bool) -> None:
        if self._cleaned:
            return
        self._cleaned = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        try:
            if self.channel is not None:
                await (self.channel.close() if ok else self.channel.abort())
            for d in list(self._pending):
                d.cancel()
                with contextlib.suppress(BaseException):
                    await d
            if self._proving is not None:  # before the sink closes the file it reads
                with contextlib.suppress(BaseException):
                    await self._proving
            if not ok and self.sink is not None:
                self.sink.abort()
        finally:
            if self.runner is not None:
                await self.runner.stop()

    async def wait(self) -> Any:
        """The next outcome: an offer (the receiver's first phase), or the end."""
        self._waiter = waiter = defer.Deferred[Any]()
        self.drain()
        try:
            return await waiter
        except defer.CancelledError:
            # Ctrl-C: end as a failure would; the receiver sees the connection go (and keeps
            # what it has, to resume)
            self.engine.failed(defer.CancelledError(), tell_peer=False)
            self.drain()
            if self._ending is not None:
                with contextlib.suppress(BaseException):
                    await self._ending
            raise


def _lost_because(channel: Channel | None) -> BaseException | None:
    """Why a channel that knows it ended (a durable transfer's expired grace), else None:
    the data path's own words ("the connection closed while sending") would hide it."""
    why = getattr(channel, "lost_because", None)
    return why if isinstance(why, BaseException) else None


# --- sending ---------------------------------------------------------------
async def send(reactor: Any, w: Wormhole, source: Any, options: TransitOptions, *,
               listener: Listener | None = None) -> Any:
    """Offer ``source`` (a :class:`~hilltop.transfer.source.Source`, or a
    :class:`~hilltop.transfer.pipesource.StreamSource`) and send it.

    Returns the SHA-256 (hex) both sides agreed on, or None when both are hilltop and agreed
    to skip it (:data:`capabilities.UNHASHED_ACK`); for a stream, its :class:`Trailer`.
    """
    stream = isinstance(source.offer, StreamOffer)
    plan = await plan_for(w, options, stream=stream)
    # a stream of unknown length stays on transit: without Dilation's inbound flow control a
    # receiver whose consumer stops reading would hold the stream in memory
    dilated = None if stream else await durable(w, options, choosing=True)
    if dilated is not None:
        plan = with_grace(plan, dilated)
    engine = eng.TransferEngine.sender(
        plan, source.offer, size=None if stream else source.size,
        source_resumable=hasattr(source, "prove_prefix"))
    shell = _Shell(reactor, w, engine, listener or Listener())
    shell.source = source
    peer = capabilities.from_app_versions(await w.get_peer_versions())
    ours = capabilities.from_app_versions(w.app_versions).features
    features = frozenset(peer.shared_features(ours))
    if stream and capabilities.STREAM not in features:
        engine.start_offer(b"", features, peer.is_v1_only)
        return await shell.wait()
    if inline.chosen(source.offer, None if stream else source.size, options, features):
        try:
            data = read_inline(source)
        except HilltopError as err:  # the receiver waits for an offer: tell it why none comes
            w.send_message(ErrorMsg(eng.reason_for_peer(err)).to_wire())
            raise
        engine.start_inline(data)
        return await shell.wait()
    if dilated is not None:
        shell.durable = dilated
        engine.start_offer(NO_TRANSIT, features, peer.is_v1_only)
        return await shell.wait()
    shell.runner = make_runner(reactor, w, "sender", options)
    try:
        hints = await shell.runner.our_hints()
    except BaseException:
        await shell.runner.stop()
        raise
    engine.start_offer(transit_message(shell.runner, hints), features, peer.is_v1_only)
    return await shell.wait()


# --- receiving ---------------------------------------------------------------
class Incoming:
    """An offer that arrived; :meth:`receive` takes it (once :func:`prepare` allowed it),
    :meth:`reject` refuses it."""

    def __init__(self, shell: _Shell, offer: Offer) -> None:
        self._shell = shell
        self.offer = offer

    @property
    def peer_transit(self) -> offers.TransitMsg | None:
        return self._shell.engine.peer_transit

    def accept_text(self) -> str:
        """A text message: acknowledged as official receivers do; returns it."""
        assert isinstance(self.offer, TextOffer)
        self._shell.engine.accept_text()
        self._shell.drain()
        return self.offer.message

    def reject(self, error: BaseException) -> None:
        """Refuse the offer; the sender hears the official words (``transfer rejected``)."""
        self._shell.engine.reject(error)
        self._shell.drain()

    async def receive(self, sink: Sink, options: TransitOptions, *,
                      listener: Listener | None = None) -> Any:
        """Receive into ``sink``: returns the SHA-256 of what arrived (or None when both
        skip it), for a stream its :class:`Trailer`. Once every byte is in and the sink
        committed, the transfer succeeded for this side: if the sender hangs up before our
        ack reaches it, ``on_unacknowledged`` hears why. A
        :class:`~hilltop.transfer.filesink.ResumableFileSink` holding kept bytes asks the
        sender to continue after them (``resume-v1``)."""
        shell = self._shell
        shell.sink = sink
        shell.listener = listener or Listener()
        engine = shell.engine
        engine.plan = replace(engine.plan, stream=isinstance(self.offer, StreamOffer),
                              idle_timeout=options.idle_timeout)
        if engine.inline:  # the bytes came in the offer: no transit, no race
            engine.accept_inline(resume_offset=getattr(sink, "resume_offset", 0))
            return await shell.wait()
        try:
            if engine.peer_transit == offers.TransitMsg():  # the sender chose Dilation
                shell.durable = await durable(shell.w, options)
            if shell.durable is not None:
                engine.plan = with_grace(engine.plan, options)
                our_transit = NO_TRANSIT
            else:
                shell.runner = make_runner(shell.reactor, shell.w, "receiver", options)
                our_transit = transit_message(shell.runner, await shell.runner.our_hints())
        except BaseException:
            sink.abort()
            if shell.runner is not None:
                await shell.runner.stop()
            raise
        offset = getattr(sink, "resume_offset", 0)
        offer = self.offer
        assert not isinstance(offer, TextOffer)
        size = None if isinstance(offer, StreamOffer) else wire_size(offer)
        engine.accept(our_transit, size=size, resume_offset=offset,
                      salt=os.urandom(resume.SALT_SIZE) if offset else b"")
        shell.w.when_closed().addErrback(
            lambda f: shell.feed(lambda _n: engine.mailbox_lost(f.value)))
        return await shell.wait()


async def receive_offer(reactor: Any, w: Wormhole, *, idle_timeout: float | None = None,
                        transit: TransitOptions | None = None) -> Incoming:
    """Read app messages until the sender's offer.

    A garbled or unknown offer is answered with the ``error`` text official receivers send,
    so the sender sees why, and raised here. With ``idle_timeout``, a sender silent that long
    fails with :class:`~hilltop.errors.SilentPeerError`: call this once the key is confirmed
    (unless the user was asked to compare verifiers, which it must then allow for).
    ``transit``: the options :meth:`Incoming.receive` will get, to load the transports
    ahead when the sender announced it needs them (:func:`warm_up_transit`).
    """
    plan = await plan_for(w, TransitOptions())
    peer = capabilities.from_app_versions(await w.get_peer_versions())
    if capabilities.TRANSIT_FOLLOWS in peer.features:
        warm_up_transit(transit)
    engine = eng.TransferEngine.receiver(plan, reactor.seconds(), offer_timeout=idle_timeout)
    shell = _Shell(reactor, w, engine, Listener())
    offer = await shell.wait()
    return Incoming(shell, offer)


def wire_size(offer: FileOffer | DirectoryOffer | FilesOffer) -> int:
    """Bytes that will cross the transit connection for this offer."""
    if isinstance(offer, FileOffer):
        return offer.filesize
    if isinstance(offer, FilesOffer):
        return offer.numbytes
    return offer.zipsize


# --- what to do with an offer: decided here, once ---------------------------------------------
@value
class ReceiveChoices:
    """What the user chose: ``output`` (``-o``; ``"-"`` writes to ``stdout``), the
    ``directory`` a relative target lands in, text only, and whether to drop a kept partial
    (``--no-resume``)."""

    directory: str
    output: str | None = None
    to_stdout: bool = False
    only_text: bool = False
    no_resume: bool = False
    single_stream_only: bool = False  # api.receive_stream: one file's bytes, nothing else


@value(frozen=False)
class Prepared:
    """An offer the session allows: ``where`` to tell the user (a path, or None for stdout),
    ``size`` on the wire (None: a stream), and the sink to open once the user said yes."""

    offer: Offer
    where: str | None
    size: int | None
    open_sink: Callable[[], Any]
    result: Any = None
    """What :meth:`Incoming.receive` returned, once it did."""


def prepare(offer: Offer, choices: ReceiveChoices, *, resumable: bool = False,
            stdout_sink: Callable[[int], Any] | None = None) -> Prepared:
    """Every check that can refuse a file, folder, files or stream offer, before a byte
    is accepted: :class:`~hilltop.errors.RejectedError` (or a target error) says why."""
    from hilltop.transfer.filesink import UNKNOWN_SIZE

    kind = {FileOffer: "a file", DirectoryOffer: "a file", StreamOffer: "a stream",
            FilesOffer: "files"}.get(type(offer), "a file")
    if choices.only_text:
        raise RejectedError(f"the sender offered {kind}, but --only-text was given")
    if choices.single_stream_only and not isinstance(offer, FileOffer | StreamOffer):
        raise LocalError("the peer offered a directory or several files, not a single stream")
    if isinstance(offer, FilesOffer):
        if choices.to_stdout:
            raise RejectedError("the sender offered several files, which cannot go to "
                                "stdout (-o -); receive them into a folder")
        directory = targets.plan_files(offer, choices.output, choices.directory)

        def files_sink() -> Any:
            from hilltop.transfer.manysink import FilesSink

            return FilesSink(directory, offer)

        return Prepared(offer, directory, offer.numbytes, files_sink)
    if isinstance(offer, StreamOffer):
        if choices.to_stdout:
            assert stdout_sink is not None
            return Prepared(offer, None, None, lambda: stdout_sink(UNKNOWN_SIZE))
        target = targets.target_path(offer.name, choices.output, choices.directory)

        def stream_file() -> Any:
            from hilltop.transfer.filesink import FileSink

            return FileSink(target, UNKNOWN_SIZE)

        return Prepared(offer, target, None, stream_file)
    if not isinstance(offer, FileOffer | DirectoryOffer):
        raise RejectedError("the sender offered something that is not a file")
    size = wire_size(offer)
    if choices.to_stdout:
        assert stdout_sink is not None
        return Prepared(offer, None, size, lambda: stdout_sink(size))
    target = targets.plan_target(offer, choices.output, choices.directory)
    return Prepared(offer, target, size, lambda: open_sink(
        offer, target, resumable=resumable, drop_kept=choices.no_resume))


def open_sink(offer: FileOffer | DirectoryOffer, target: str, *, resumable: bool = False,
              drop_kept: bool = False) -> Any:
    """The sink for ``offer``. ``resumable`` (both peers list ``resume-v1``): a file's
    partial is kept if interrupted, and one kept before is continued. ``drop_kept``
    (``--no-resume``): a kept partial of that name is removed instead."""
    if isinstance(offer, FileOffer):
        from hilltop.transfer.filesink import FileSink, ResumableFileSink

        if resumable and not drop_kept:
            return ResumableFileSink(target, offer.filename, offer.filesize)
        return FileSink(target, offer.filesize, drop_kept=drop_kept)
    from hilltop.transfer.foldersink import DirectorySink  # imports the zip reader: folders only

    return DirectorySink(target, offer)


def refuse(incoming: Incoming, err: BaseException) -> None:
    """Tell the sender we refuse (the official words), keeping ``err`` for our side."""
    with contextlib.suppress(HilltopError):
        incoming.reject(err)


# --- what a command opens: the modules load only when a transfer needs them --------------------
def open_source(path: str, *, skip_unsendable: bool = False) -> Any:
    """A file or folder to send (:func:`hilltop.transfer.source.open_source`)."""
    from hilltop.transfer.source import open_source as opened

    return opened(path, skip_unsendable=skip_unsendable)


def open_bundle(paths: list[str], *, skip_unsendable: bool = False) -> Any:
    """Several paths under one code (:func:`hilltop.transfer.manysource.open_bundle`)."""
    from hilltop.transfer.manysource import open_bundle as opened

    return opened(paths, skip_unsendable=skip_unsendable)


def stream_source(path: str, name: str | None = None) -> Any:
    """A pipe or FIFO to stream (:class:`hilltop.transfer.pipesource.StreamSource`)."""
    from hilltop.transfer.pipesource import StreamSource

    return StreamSource(path, name)


def reads_our_stdin(path: str) -> bool:
    """Whether streaming ``path`` reads our own stdin."""
    from hilltop.transfer.pipesource import reads_our_stdin as ours

    return ours(path)


def writer_sink(fd: int, size: int) -> Any:
    """A sink writing exactly ``size`` bytes (``UNKNOWN_SIZE``: a stream) to descriptor
    ``fd``, which we do not own (stdout)."""
    from hilltop.transfer.filesink import StreamSink
    from hilltop.transfer.pipesource import FdWriter

    return StreamSink(FdWriter(fd), size)


_LAZY = {"Bundle": "manysource", "Source": "source", "StreamSink": "filesink",
         "StreamSource": "pipesource"}
"""Classes the CLI names, loaded on first use: a text message needs none of their modules."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"hilltop.transfer.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
