"""``webrtc``: a WebRTC data channel (aiortc: ICE, STUN/TURN, DTLS, SCTP) as a transit stream.

Direct TCP fails when both peers sit behind NAT; ICE punches a UDP hole through them using
server-reflexive candidates learnt from a STUN server, or falls back to a TURN relay. The data
channel then carries exactly what a TCP connection would: the transit handshake and the
encrypted records, so the runner races it against the other transports under the same key.

How the two sides meet:

* Both sides must list ``webrtc`` in their ``app_versions`` advertisement; otherwise the
  transport contributes nothing and sends nothing (official peers never see a signal).
* Then each side contributes one ``webrtc-v1`` hint (it carries no address, only "I am in"),
  and the sender starts gathering candidates at once and sends its SDP offer through the
  encrypted mailbox side channel (:mod:`hilltop.webrtc.signals`); the receiver answers.
* The race dials the peer's ``webrtc-v1`` hint with :meth:`WebRTC.hilltop_transport_connect`,
  which fires with the data channel once it is open (or fails after :data:`CONNECT_TIMEOUT`).
  Cancelling it closes the peer connection.

ICE servers come from :class:`hilltop.webrtc.settings.WebRTCSettings` in ``session.settings``
(``--stun``/``--turn`` or the config file); aiortc is always given an explicit list, so
nothing public is contacted when none is configured. Under ``--tor`` the transport is off:
ICE would reveal our addresses. Under ``--no-listen`` it offers TURN relay candidates only,
or stays off without a TURN server (:meth:`WebRTCSettings.under_no_listen`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
from collections import deque
from collections.abc import Sequence
from typing import Any, TypeVar

from twisted.internet import defer
from twisted.python.failure import Failure

from hilltop.errors import HilltopError, TransitError
from hilltop.hints import RawHint
from hilltop.hookspecs import TransitSession, TransportInfo, hookimpl
from hilltop.webrtc.channel import Signalling
from hilltop.webrtc.settings import IceServer, WebRTCSettings

log = logging.getLogger(__name__)

NAME = "webrtc"
HINT_TYPE = "webrtc-v1"
CONNECT_TIMEOUT = 30.0
"""ICE declares failure only after about a minute; the race should not wait that long."""
LABEL = "hilltop-transit"
T = TypeVar("T")



def _settle(future: asyncio.Future[None]) -> None:
    """Resolve a one-shot event future, once (aiortc may fire an event again)."""
    if not future.done():
        future.set_result(None)

class WebRTC:
    """Built-in transport: a WebRTC data channel, signalled through the mailbox."""

    api = 1

    def __init__(self) -> None:
        self._runs: dict[int, _Run] = {}

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        usable = importlib.util.find_spec("aiortc") is not None
        return TransportInfo(
            name=NAME,
            hint_types=(HINT_TYPE,),
            tier=0,
            inbound=False,  # both sides dial their webrtc-v1 hint; nothing is accepted
            usable=usable,
            why_not="" if usable else "aiortc is not installed",
            description="WebRTC data channel (ICE hole punching, STUN/TURN via --stun/--turn); "
                        "only with hilltop peers; disabled under --tor",
            tor_note="off under --tor",
        )

    @hookimpl
    def hilltop_transport_start(self, session: TransitSession) -> Any:
        settings = session.settings.get(WebRTCSettings)
        if session.services is not None and (settings is None or settings.signalling is None):
            import dataclasses

            from hilltop.webrtc.channel import ServicesSignalling

            settings = dataclasses.replace(settings or WebRTCSettings(),
                                           signalling=ServicesSignalling(session.services))
        if session.tor or settings is None or settings.signalling is None:
            return []
        allowed = settings.under_no_listen(session.no_listen)
        if allowed is None:
            return []  # --no-listen without TURN: host candidates would carry our addresses
        return defer.Deferred.fromFuture(
            asyncio.ensure_future(self._start(session, settings.signalling, allowed)))

    async def _start(self, session: TransitSession, signalling: Signalling,
                     settings: WebRTCSettings) -> list[Any]:
        if not await signalling.both_speak_webrtc():
            return []
        run = _Run(session, signalling, settings.ice_servers, settings.relay_only,
                   _reflexive_host(session, settings), settings.join_after)
        self._runs[id(session)] = run
        run.begin()
        return [RawHint.make(HINT_TYPE, priority=0.0)]

    @hookimpl
    def hilltop_transport_connect(self, hint: Any, session: TransitSession) -> Any:
        if getattr(hint, "type", None) != HINT_TYPE:
            return None
        run = self._runs.get(id(session))
        if run is None:
            return defer.fail(TransitError("webrtc was not started for this session"))
        return run.connect()

    @hookimpl
    def hilltop_transport_stop(self, session: TransitSession) -> Any:
        run = self._runs.pop(id(session), None)
        return run.stop() if run is not None else None


def _reflexive_host(session: TransitSession, settings: WebRTCSettings) -> str | None:
    """Our public IPv4 address as the mailbox server saw it, for a server-reflexive candidate
    (:mod:`hilltop.webrtc.reflexive`) when no STUN server is configured; never under
    ``--no-listen`` (TURN only) or ``--tor`` (no webrtc at all)."""
    from hilltop.transit.punch import advertised

    services = session.services
    if (services is None or settings.relay_only or session.no_listen
            or any(s.urls.startswith("stun:") for s in settings.ice_servers)):
        return None
    public = advertised(services.seen_address)
    return public[0] if public is not None else None


def _rtc_config(servers: Sequence[IceServer], relay_only: bool) -> Any:
    from aiortc import RTCConfiguration, RTCIceServer
    from aiortc.rtcconfiguration import RTCIceTransportPolicy

    ice = [RTCIceServer(urls=s.urls, username=s.username, credential=s.credential)
           for s in servers]
    policy = RTCIceTransportPolicy.RELAY if relay_only else RTCIceTransportPolicy.ALL
    # always an explicit list: with None aiortc would ask a public STUN server
    return RTCConfiguration(iceServers=ice, iceTransportPolicy=policy)


class _Run:
    """One session: one peer connection, one data channel, handed out at most once."""

    def __init__(self, session: TransitSession, signalling: Signalling,
                 servers: Sequence[IceServer], relay_only: bool,
                 reflexive_host: str | None = None, join_after: float = 0.0) -> None:
        self.session = session
        self.join_after = join_after
        self.dialled: asyncio.Future[None] | None = None
        self.signalling = signalling
        self.servers = servers
        self.relay_only = relay_only
        self.reflexive_host = reflexive_host
        self.pc: Any = None
        self.task: asyncio.Task[DataChannelStream] | None = None
        self.handed_out: DataChannelStream | None = None

    def _ours(self, sdp: str) -> str:
        """The SDP we send: with the mailbox-seen reflexive candidates, if any."""
        if self.reflexive_host is None:
            return sdp
        from hilltop.webrtc.reflexive import with_reflexive

        return with_reflexive(sdp, self.reflexive_host)

    def begin(self) -> None:
        self.dialled = asyncio.get_running_loop().create_future()
        self.task = asyncio.ensure_future(self._join())
        self.task.add_done_callback(_mark_retrieved)

    async def _join(self) -> DataChannelStream:
        """Negotiate :attr:`join_after` seconds after the race dialled the peer's hint
        (:data:`hilltop.webrtc.settings.JOIN_AFTER`); a race won before that cancels this,
        and aiortc is never imported."""
        assert self.dialled is not None
        await self.dialled
        if self.join_after > 0:
            await asyncio.sleep(self.join_after)
        return await asyncio.wait_for(self._negotiate(), CONNECT_TIMEOUT)

    def connect(self) -> defer.Deferred[Any]:
        assert self.task is not None and self.dialled is not None
        _settle(self.dialled)
        task = self.task

        async def wait() -> DataChannelStream:
            try:
                stream = await asyncio.shield(task)
            except TimeoutError:
                raise TransitError(f"webrtc: no connection within {CONNECT_TIMEOUT:.0f} s "
                                   "(ICE found no working candidate pair)") from None
            except HilltopError:
                raise
            except asyncio.CancelledError:
                raise
            except Exception as err:  # noqa: BLE001 - aiortc raises all sorts
                raise TransitError(f"webrtc failed: {err}") from err
            self.handed_out = stream
            return stream

        inner = asyncio.ensure_future(wait())

        def cancel(_d: defer.Deferred[Any]) -> None:
            inner.cancel()
            task.cancel()
            self._close_pc()

        d: defer.Deferred[Any] = defer.Deferred(cancel)

        def settle(result: Any) -> None:
            if d.called:  # cancelled: Twisted already failed d with CancelledError
                if isinstance(result, DataChannelStream):
                    result.close()
                return None
            if isinstance(result, Failure):
                d.errback(result)
            else:
                d.callback(result)
            return None

        defer.Deferred.fromFuture(inner).addBoth(settle)
        return d

    async def _negotiate(self) -> DataChannelStream:
        # aiortc (with PyAV) takes 0.3-0.6 s to import; on a thread the loop keeps serving the
        # direct attempts meanwhile, which usually win on a LAN
        await asyncio.to_thread(importlib.import_module, "aiortc")
        from aiortc import RTCPeerConnection, RTCSessionDescription

        from hilltop.transports import aiortc_tuning

        wide = aiortc_tuning.install()  # from now on we read wide packets: we may say so
        self.pc = pc = RTCPeerConnection(_rtc_config(self.servers, self.relay_only))
        loop = asyncio.get_running_loop()
        failed = _failure_of(pc)
        try:
            if self.session.role == "sender":
                channel = pc.createDataChannel(LABEL, ordered=True)
                stream = DataChannelStream(pc, channel)
                opened: asyncio.Future[None] = loop.create_future()
                channel.on("open", lambda: _settle(opened))
                await pc.setLocalDescription(await pc.createOffer())
                self.signalling.send("offer", self._ours(pc.localDescription.sdp), wide=wide)
                _check_gathered(pc.localDescription.sdp)
                answer = await self.signalling.receive()
                if answer.kind != "answer":
                    raise TransitError(f"webrtc: the peer sent {answer.kind}, not an answer")
                peer_wide = answer.wide
                await pc.setRemoteDescription(RTCSessionDescription(answer.sdp, "answer"))
                await _unless_failed(opened, failed)
            else:
                arrived: asyncio.Future[DataChannelStream] = loop.create_future()

                def on_channel(channel: Any) -> None:
                    # wrap at once: the sender's handshake may follow the open immediately
                    if not arrived.done():
                        arrived.set_result(DataChannelStream(pc, channel))

                pc.on("datachannel", on_channel)
                offer = await self.signalling.receive()
                if offer.kind != "offer":
                    raise TransitError(f"webrtc: the peer sent {offer.kind}, not an offer")
                peer_wide = offer.wide
                await pc.setRemoteDescription(RTCSessionDescription(offer.sdp, "offer"))
                await pc.setLocalDescription(await pc.createAnswer())
                self.signalling.send("answer", self._ours(pc.localDescription.sdp), wide=wide)
                _check_gathered(pc.localDescription.sdp)
                stream = await _unless_failed(arrived, failed)
            pair = _nominated(pc)
            stream.description = f"{NAME} {_describe(pair)}"
            if wide and peer_wide and _is_local(pair):
                stream.widen()
            return stream
        except BaseException:
            self._close_pc()
            raise

    def _close_pc(self) -> None:
        pc, self.pc = self.pc, None
        if pc is not None and (self.handed_out is None or self.handed_out.pc is not pc):
            asyncio.ensure_future(pc.close())

    def stop(self) -> defer.Deferred[Any] | None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.handed_out is None and self.pc is not None:
            pc, self.pc = self.pc, None
            return defer.Deferred.fromFuture(asyncio.ensure_future(pc.close()))
        return None


def _mark_retrieved(task: asyncio.Future[Any]) -> None:
    """Read a negotiation's failure even when no ``connect()`` came to wait for it (the race
    was won elsewhere first): otherwise asyncio prints "Task exception was never retrieved"
    with a traceback at exit, as a conformance test showed. ``connect()`` still reports it."""
    if not task.cancelled():
        task.exception()


def _check_gathered(sdp: str) -> None:
    """Fail now if we gathered no ICE candidate: aiortc then never starts ICE, so nothing
    would report the failure before :data:`CONNECT_TIMEOUT`. Called after our description
    went out, so the peer's attempt is not left waiting for it either."""
    if not any(line.startswith("a=candidate:") for line in sdp.splitlines()):
        raise TransitError("webrtc: we have no ICE candidate (no usable address, "
                           "or the TURN server gave none)")


def _failure_of(pc: Any) -> asyncio.Future[None]:
    """A future that resolves once the peer connection has failed (ICE checked every pair,
    or DTLS broke). aiortc then never opens the channel; without this the attempt sat out
    :data:`CONNECT_TIMEOUT` although aioice had given up at once (no pair at all)."""
    failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def check() -> None:
        if pc.connectionState == "failed":
            _settle(failed)

    pc.on("connectionstatechange", check)
    return failed


async def _unless_failed(waiting: asyncio.Future[T], failed: asyncio.Future[None]) -> T:
    """``waiting``'s result, or a :class:`TransitError` as soon as ``failed`` resolves."""
    either: list[asyncio.Future[Any]] = [waiting, failed]
    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    if waiting.done():
        return waiting.result()
    raise TransitError("webrtc: ICE found no working candidate pair")


def _nominated(pc: Any) -> Any:
    """The nominated ICE candidate pair (aioice internals), or None if it cannot be found."""
    try:
        return pc.sctp.transport.transport._connection._nominated[1]
    except Exception:  # noqa: BLE001 - only used for a label and a tuning decision
        return None


def _describe(pair: Any) -> str:
    """``local->remote type host:port`` of the pair, for the status line."""
    if pair is None:
        return "data channel"
    local, remote = pair.local_candidate, pair.remote_candidate
    return f"{local.type}->{remote.type} {remote.host}:{remote.port}"


def _is_local(pair: Any) -> bool:
    """A path where wide SCTP packets are safe: host to host, and the peer's address is on
    this machine or a private LAN (no NAT, no TURN, no Internet path that may drop IP
    fragments). See :mod:`hilltop.transports.aiortc_tuning`."""
    import ipaddress

    if pair is None:
        return False
    local, remote = pair.local_candidate, pair.remote_candidate
    if local.type != "host" or remote.type != "host":
        return False
    try:
        address = ipaddress.ip_address(remote.host)
    except ValueError:  # an mDNS name or something odd: not known to be local
        return False
    return address.is_loopback or address.is_private or address.is_link_local


class DataChannelStream:
    """:class:`hilltop.streams.ByteStream` over an ordered, reliable RTCDataChannel.

    Writes are cut into binary messages of :data:`CHUNK` bytes. A registered producer is
    paused while more than :data:`HIGH` bytes wait in the channel's buffer, or while more than
    :data:`WINDOW` bytes we sent have not been taken by the peer's reader; it is resumed once
    both are low again (the ``bufferedamountlow`` event at :data:`LOW`, and half the window).

    Why the window: aiortc's SCTP ignores the receive window the peer advertises, so nothing
    below us stops a fast sender from filling a slow reader's memory (:meth:`pause_reading`
    can only hold messages back). So each reader reports, every :data:`CREDIT_EVERY` bytes it
    has taken, the total so far as a *string* message (``"1048576"``); transit bytes are always
    binary messages, so the two never mix. :meth:`close` lets the buffer drain, resets the
    stream (SCTP delivers what was sent before the reset) and closes the peer connection.
    """

    CHUNK = 64 * 1024
    HIGH = 4 * 1024 * 1024
    LOW = 1024 * 1024
    WINDOW = 8 * 1024 * 1024
    CREDIT_EVERY = 1024 * 1024

    def __init__(self, pc: Any, channel: Any, description: str = NAME) -> None:
        self.pc = pc
        self.channel = channel
        self.description = description
        self._on_data: Any = None
        self._on_lost: Any = None
        self._held: deque[bytes] = deque()
        self._paused = False
        self._lost_reason: str | None = None
        self._closing = False
        self._waiters: list[defer.Deferred[None]] = []
        self._producer: Any = None
        self._producer_paused = False
        self._low_waiters: list[asyncio.Future[None]] = []
        self._shut = False
        self._wide = False
        self._written = 0  # bytes we sent
        self._taken_by_peer = 0  # of those, what the peer's reader reported taking
        self._taken = 0  # bytes our reader took
        self._reported = 0  # what we last told the peer
        channel.bufferedAmountLowThreshold = self.LOW
        channel.on("message", self._message)
        channel.on("close", lambda: self._gone("connection closed"))
        channel.on("bufferedamountlow", self._low)

        @pc.on("connectionstatechange")
        def _state() -> None:
            if pc.connectionState in ("failed", "closed"):
                self._gone(f"webrtc connection {pc.connectionState}")

    def widen(self) -> None:
        """Send wide SCTP packets from now on (both peers agreed, the path is local); undone
        when the stream shuts down."""
        from hilltop.transports import aiortc_tuning

        if not self._wide and not self._closing:
            self._wide = aiortc_tuning.widen()

    # events from aiortc
    def _message(self, message: Any) -> None:
        if isinstance(message, str):
            self._credit(message)
        elif self._on_data is None or self._paused:
            self._held.append(message)
        else:
            self._hand_over(message)

    def _credit(self, text: str) -> None:
        """The peer's reader has taken ``text`` bytes in all."""
        if not text.isdigit() or not self._taken_by_peer <= int(text) <= self._written:
            log.debug("webrtc: ignoring a malformed credit %r", text[:40])
            return
        self._taken_by_peer = int(text)
        self._resume_producer()

    def _hand_over(self, message: bytes) -> None:
        """Give one message to our reader and, every CREDIT_EVERY bytes, tell the peer."""
        self._taken += len(message)
        if self._taken - self._reported >= self.CREDIT_EVERY and self._lost_reason is None:
            self._reported = self._taken
            try:
                self.channel.send(str(self._taken))
            except Exception as err:  # noqa: BLE001 - InvalidStateError once closing
                log.debug("webrtc credit not sent: %s", err)
        self._on_data(message)

    def _congested(self) -> bool:
        return (self.channel.bufferedAmount > self.HIGH
                or self._written - self._taken_by_peer > self.WINDOW)

    def _resume_producer(self, force: bool = False) -> None:
        if self._producer is None or not self._producer_paused:
            return
        if force or (self.channel.bufferedAmount <= self.LOW
                     and self._written - self._taken_by_peer <= self.WINDOW // 2):
            self._producer_paused = False
            self._producer.resumeProducing()

    def _low(self, force: bool = False) -> None:
        self._resume_producer(force)
        waiters, self._low_waiters = self._low_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def _gone(self, why: str) -> None:
        if self._lost_reason is not None:
            return
        self._lost_reason = why
        if not self._held and self._on_lost is not None:
            lost, self._on_lost = self._on_lost, None
            lost(why)
        self._low(force=True)
        if not self._closing:
            self._closing = True
            asyncio.ensure_future(self._shutdown(drain=False))

    # ByteStream
    def write(self, data: Any) -> None:
        if not data or self._lost_reason is not None or self._closing:
            return
        view = memoryview(data).cast("B")
        try:
            for i in range(0, len(view), self.CHUNK):
                self.channel.send(bytes(view[i:i + self.CHUNK]))
        except Exception as err:  # noqa: BLE001 - InvalidStateError once closing
            log.debug("webrtc write failed: %s", err)
            return
        self._written += len(view)
        if self._producer is not None and not self._producer_paused and self._congested():
            self._producer_paused = True
            self._producer.pauseProducing()

    def start_receiving(self, on_data: Any, on_lost: Any) -> None:
        self._on_data, self._on_lost = on_data, on_lost
        self._deliver()

    def _deliver(self) -> None:
        on_data = self._on_data
        while self._held and not self._paused and self._on_data is on_data:
            self._hand_over(self._held.popleft())
        if not self._held and self._lost_reason is not None and self._on_lost is not None:
            lost, self._on_lost = self._on_lost, None
            lost(self._lost_reason)

    def pause_reading(self) -> None:
        self._paused = True

    def resume_reading(self) -> None:
        if self._paused:
            self._paused = False
            self._deliver()

    def register_producer(self, producer: Any, streaming: bool) -> None:
        self._producer = producer
        self._producer_paused = False
        if not streaming:  # a pull producer: ask it for data now and whenever the buffer drains
            producer.resumeProducing()

    def unregister_producer(self) -> None:
        self._producer = None

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        asyncio.ensure_future(self._shutdown(drain=self._lost_reason is None))

    def abort(self) -> None:
        if not self._closing:
            self._closing = True
            asyncio.ensure_future(self._shutdown(drain=False))

    async def _shutdown(self, drain: bool) -> None:
        loop = asyncio.get_running_loop()
        try:
            if drain:
                deadline = loop.time() + 30.0
                while self.channel.bufferedAmount > 0 and self._lost_reason is None:
                    self.channel.bufferedAmountLowThreshold = 0
                    waiter = loop.create_future()
                    self._low_waiters.append(waiter)
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(waiter, max(0.1, deadline - loop.time()))
                    if loop.time() > deadline:
                        break
                if self.channel.readyState == "open":
                    closed: asyncio.Future[None] = loop.create_future()
                    self.channel.once("close", lambda: _settle(closed))
                    self.channel.close()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(closed, 5.0)
            await self.pc.close()
        except Exception as err:  # noqa: BLE001
            log.debug("webrtc close: %s", err)
        finally:
            if self._wide:
                from hilltop.transports import aiortc_tuning

                self._wide = False
                aiortc_tuning.narrow()
            self._shut = True
            if self._lost_reason is None:
                self._lost_reason = "connection closed"
            if self._on_lost is not None and not self._held:
                lost, self._on_lost = self._on_lost, None
                lost(self._lost_reason)
            waiters, self._waiters = self._waiters, []
            for d in waiters:
                d.callback(None)

    def when_closed(self) -> defer.Deferred[None]:
        d: defer.Deferred[None] = defer.Deferred()
        if self._shut:
            d.callback(None)
        else:
            self._waiters.append(d)
        return d
