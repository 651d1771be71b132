"""The webrtc transport through the conformance kit, like direct-tcp and relay.

Two runners in one process, signalling through an in-memory pair of queues instead of the
mailbox, and an explicit empty ICE server list: only host candidates, nothing is contacted.
aioice never offers 127.0.0.1 as a host candidate, so ``lo`` gets a second address
(127.0.0.2); that is done only in the loopback-only namespace of ``integration/netns-run``
(where ``bash .ci/run`` runs every test), never on the machine's own interfaces.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import defer
from twisted.internet.task import deferLater

from hilltop.hints import parse_transit_helper
from hilltop.hookspecs import TransitSession
from hilltop.lan.settings import LanSettings, LanTags
from hilltop.testing import ConformanceSuite, TransportSubject, close_and_stop, exchange, pair
from hilltop.transit.plugins import load_configured
from hilltop.transit.runner import TransitRunner
from hilltop.transit.settings import TransportSettings
from hilltop.webrtc.settings import IceServer, WebRTCSettings
from hilltop.webrtc.signals import Signal

pytest.importorskip("aiortc")

from hilltop.transports.webrtc import WebRTC  # noqa: E402 - only with aiortc


class QueueSignalling:
    """One end of an in-memory signalling pair (the mailbox channel's interface)."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[Signal] = asyncio.Queue()
        self.peer: QueueSignalling | None = None
        self.sent: list[str] = []

    async def both_speak_webrtc(self) -> bool:
        return True

    def send(self, kind: str, sdp: str = "", wide: bool = False) -> None:
        assert self.peer is not None
        self.sent.append(kind)
        self.peer.inbox.put_nowait(Signal(kind, sdp, wide))

    async def receive(self) -> Signal:
        return await self.inbox.get()


def signalling_pair() -> tuple[QueueSignalling, QueueSignalling]:
    a, b = QueueSignalling(), QueueSignalling()
    a.peer, b.peer = b, a
    return a, b


@pytest.fixture(scope="module")
def second_loopback_address() -> Iterator[None]:
    if sorted(os.listdir("/sys/class/net")) != ["lo"] or os.geteuid() != 0:
        pytest.skip("needs the loopback-only test namespace as root (integration/netns-run), "
                    "where lo may get 127.0.0.2 for ICE host candidates")
    added = subprocess.run(["ip", "addr", "add", "127.0.0.2/8", "dev", "lo"],
                           capture_output=True).returncode == 0
    yield
    if added:
        subprocess.run(["ip", "addr", "del", "127.0.0.2/8", "dev", "lo"], capture_output=True)


def side(signalling: QueueSignalling) -> dict[str, Any]:
    # not --no-listen: without a TURN server webrtc would stay out (host candidates are
    # local addresses); only webrtc is loaded, so nothing else listens
    return {"settings": TransportSettings(WebRTCSettings(ice_servers=(), signalling=signalling))}


class TestWebRTC(ConformanceSuite):
    @pytest.fixture
    def transport_subject(self, second_loopback_address: None) -> TransportSubject:
        s, r = signalling_pair()
        return TransportSubject(WebRTC, sender=side(s), receiver=side(r),
                                description="webrtc host->host 127.0.0.")


@pytest_twisted.ensureDeferred
async def test_wide_packets_on_loopback_only_while_connected(
        second_loopback_address: None) -> None:
    """Both sides said "wide" and the pair is host to host on loopback: records go in wide
    SCTP packets while the connection lasts, and aiortc's size is back once it is closed."""
    from twisted.internet import reactor

    from hilltop.transports import aiortc_tuning

    narrow = aiortc_tuning.userdata_size()
    s_sig, r_sig = signalling_pair()
    subject = TransportSubject(WebRTC, sender=side(s_sig), receiver=side(r_sig))
    s, r = subject.runner(reactor, "sender"), subject.runner(reactor, "receiver")
    cs, cr = await pair(s, r)
    if not aiortc_tuning.supported():
        pytest.skip("aiortc version not tuned; the transport runs at aiortc's packet size")
    assert aiortc_tuning.userdata_size() > 10 * narrow
    await exchange(cs, cr)
    await close_and_stop(cs, cr, s, r)
    await cr.close()
    assert aiortc_tuning.userdata_size() == narrow


class Producer:
    """A push producer that only records whether it was told to pause."""

    paused = False

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's IPushProducer
        self.paused = True

    def resumeProducing(self) -> None:  # noqa: N802
        self.paused = False

    def stopProducing(self) -> None:  # noqa: N802
        pass


async def until(condition: Any, what: str, timeout: float = 30.0) -> None:
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    deadline = reactor.seconds() + timeout
    while not condition():
        assert reactor.seconds() < deadline, f"timed out waiting for {what}"
        await deferLater(reactor, 0.02, lambda: None)


@pytest_twisted.ensureDeferred
async def test_a_paused_reader_stops_the_writer(second_loopback_address: None) -> None:
    """aiortc ignores the peer's receive window, so the credits must: with the reader paused,
    the writer's producer is paused once WINDOW bytes are unread, even though its own buffer
    has drained; the reader holds no more than that; reading again resumes the writer."""
    from twisted.internet import reactor

    s_sig, r_sig = signalling_pair()
    subject = TransportSubject(WebRTC, sender=side(s_sig), receiver=side(r_sig))
    s, r = subject.runner(reactor, "sender"), subject.runner(reactor, "receiver")
    cs, cr = await pair(s, r)
    writer, reader = cs.stream, cr.stream
    got = bytearray()
    reader.pause_reading()
    reader.start_receiving(got.extend, lambda _why: None)  # raw bytes now, not records
    producer = Producer()
    writer.register_producer(producer, True)
    block = bytes(range(256)) * 4096  # 1 MiB
    written = 0
    while not producer.paused:
        writer.write(block)
        written += len(block)
        assert written <= 4 * writer.WINDOW, "the producer was never paused"
    await until(lambda: writer.channel.bufferedAmount == 0, "the send buffer to drain")
    await until(lambda: sum(map(len, reader._held)) == written, "all sent bytes to arrive")
    assert producer.paused, "resumed although the peer's reader took nothing"
    assert written <= writer.WINDOW + len(block)
    reader.resume_reading()
    await until(lambda: not producer.paused, "the credit to resume the producer")
    assert len(got) == written and got[:len(block)] == block
    writer.unregister_producer()
    for stream in (writer, reader):
        stream.close()
        await stream.when_closed()
    await s.stop()
    await r.stop()


@pytest_twisted.ensureDeferred
async def test_no_signal_without_a_webrtc_peer() -> None:
    """A peer that did not advertise webrtc (official 0.24, wormhole-william) gets nothing:
    no hint, no offer, no peer connection."""
    from twisted.internet import reactor

    class Official(QueueSignalling):
        async def both_speak_webrtc(self) -> bool:
            return False

    s = Official()
    s.peer = Official()
    session = TransitSession(reactor, "sender",
                             settings=TransportSettings(WebRTCSettings(signalling=s)))
    plugin = WebRTC()
    assert await defer.maybeDeferred(plugin.hilltop_transport_start, session) == []
    assert s.sent == [] and s.peer.inbox.empty()
    assert plugin.hilltop_transport_stop(session) is None


def test_off_under_tor_without_touching_aiortc() -> None:
    """Under --tor the transport declines before anything of aiortc is imported: no UDP
    socket, no candidate gathering, no signal (checked in a fresh interpreter)."""
    script = """
import sys
from hilltop.hints import parse_transit_helper
from hilltop.hookspecs import TransitSession
from hilltop.lan.settings import LanSettings, LanTags
from hilltop.transit.plugins import load_configured
from hilltop.transit.plugins import load_configured
from hilltop.transit.runner import TransitRunner
from hilltop.transit.settings import TransportSettings
from hilltop.webrtc.channel import MailboxSignalling
from hilltop.webrtc.settings import WebRTCSettings

class W:
    app_versions = {}
    def send_message(self, data): raise AssertionError("sent a signal under --tor")

[t] = [t for t in load_configured().loaded if t.name == "webrtc"]
settings = TransportSettings(WebRTCSettings(signalling=MailboxSignalling(W())))
session = TransitSession(None, "sender", tor=True, settings=settings)
assert t.plugin.hilltop_transport_start(session=session) == []
print(t.info.tor_note)
assert not [m for m in sys.modules if m.split(".")[0] in ("aiortc", "aioice", "av")], "imported"
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "off under --tor"


# -- --no-listen: no address of ours reaches the peer --------------------------------------------
UNREACHABLE_TURN = IceServer("turn:127.0.0.1:9?transport=tcp", "user", "password")


@pytest_twisted.ensureDeferred
async def test_no_listen_gives_the_peer_no_address_of_ours(
        second_loopback_address: None) -> None:
    """Every built-in transport under --no-listen, with a relay configured: the hints are the
    relay's alone, and webrtc (no TURN server) sends no signal and no host candidate."""
    from twisted.internet import reactor

    sig = QueueSignalling()
    sig.peer = QueueSignalling()
    settings = TransportSettings(
        WebRTCSettings(ice_servers=(), signalling=sig),
        LanSettings(tags=LanTags.derive(b"k" * 32, "sender"), mailbox_url="ws://198.18.0.1/v1"))
    r = TransitRunner(reactor, "sender", bytes(32), transports=load_configured(["direct-tcp",
                      "relay", "lan", "webrtc"]), no_listen=True, settings=settings,
                      transit_helpers=[parse_transit_helper("tcp:198.18.0.9:4001")])
    hints = await r.our_hints()
    await deferLater(reactor, 1.0, lambda: None)  # a signal would have gone out by now
    await r.stop()
    assert [h.to_wire() for h in hints] == [
        {"type": "relay-v1", "hints": [{"type": "direct-tcp-v1", "hostname": "198.18.0.9",
                                        "port": 4001, "priority": 0.0}]}]
    assert sig.sent == [] and sig.peer.inbox.empty()


@pytest_twisted.ensureDeferred
async def test_no_listen_with_turn_offers_relay_candidates_only(
        second_loopback_address: None) -> None:
    """Under --no-listen with a TURN server the offer carries no host candidate (here the
    TURN server refuses, so it carries no candidate at all), and no local address."""
    from twisted.internet import reactor

    sig = QueueSignalling()
    sig.peer = QueueSignalling()
    session = TransitSession(reactor, "sender", no_listen=True, settings=TransportSettings(
        WebRTCSettings(ice_servers=(UNREACHABLE_TURN,), signalling=sig)))
    plugin = WebRTC()
    [hint] = await defer.maybeDeferred(plugin.hilltop_transport_start, session)
    assert hint.type == "webrtc-v1"
    dial = plugin.hilltop_transport_connect(hint=hint, session=session)  # the race joins it
    dial.addErrback(lambda _: None)
    offer = await defer.Deferred.fromFuture(asyncio.ensure_future(
        asyncio.wait_for(sig.peer.inbox.get(), 20)))
    dial.cancel()
    await defer.maybeDeferred(plugin.hilltop_transport_stop, session)
    candidates = [line for line in offer.sdp.splitlines() if line.startswith("a=candidate")]
    assert not [c for c in candidates if " typ relay" not in c], offer.sdp
    assert "127.0.0.2" not in offer.sdp, offer.sdp


def test_no_listen_settings() -> None:
    """The decision itself: relay candidates only with TURN, else stay out."""
    plain = WebRTCSettings(ice_servers=(IceServer("stun:198.18.0.1:3478"),))
    turn = WebRTCSettings(ice_servers=(UNREACHABLE_TURN,))
    assert plain.under_no_listen(False) is plain
    assert plain.under_no_listen(True) is None
    assert turn.under_no_listen(True) == WebRTCSettings((UNREACHABLE_TURN,), relay_only=True)


@pytest_twisted.ensureDeferred
async def test_a_failed_peer_connection_ends_the_wait_at_once() -> None:
    """When ICE has checked every pair and failed, aiortc never opens the channel: the
    attempt fails then, not after CONNECT_TIMEOUT (30 s)."""
    from hilltop.errors import TransitError
    from hilltop.transports.webrtc import _unless_failed

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        opened, failed = loop.create_future(), loop.create_future()
        loop.call_later(0.05, failed.set_result, None)
        with pytest.raises(TransitError, match="ICE found no working candidate pair"):
            await asyncio.wait_for(_unless_failed(opened, failed), 5)
        opened, failed = loop.create_future(), loop.create_future()
        loop.call_later(0.05, opened.set_result, "channel")
        assert await _unless_failed(opened, failed) == "channel"

    await defer.Deferred.fromFuture(asyncio.ensure_future(scenario()))



@pytest_twisted.ensureDeferred
async def test_a_failed_negotiation_nobody_waited_for_is_not_logged_at_exit() -> None:
    """A race won elsewhere never calls ``connect()``; the attempt's failure must not reach
    asyncio's "Task exception was never retrieved" log (printed at exit with a traceback)."""
    import gc

    from hilltop.transports.webrtc import _mark_retrieved

    loop = asyncio.get_running_loop()
    logged: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: logged.append(context))

    async def fail() -> None:
        raise RuntimeError("no ICE candidate")

    async def run(mark: bool) -> None:
        task = loop.create_task(fail())
        if mark:
            task.add_done_callback(_mark_retrieved)
        await defer.Deferred.fromFuture(asyncio.ensure_future(asyncio.sleep(0.01)))
        del task
        gc.collect()

    try:
        await run(mark=False)
        assert logged, "the check itself is blind: an unread failure should be logged"
        logged.clear()
        await run(mark=True)
        assert not logged
    finally:
        loop.set_exception_handler(previous)


def test_a_race_won_before_webrtc_joins_never_imports_aiortc() -> None:
    """WebRTC joins JOIN_AFTER seconds after the race dialled its hint: a race won before
    that (direct TCP, usually) stops it with no signal sent and aiortc never imported
    (checked in a fresh interpreter)."""
    script = """
import asyncio, sys
from hilltop.hookspecs import TransitSession
from hilltop.transit.settings import TransportSettings
from hilltop.transports.webrtc import WebRTC
from hilltop.webrtc.settings import JOIN_AFTER, WebRTCSettings

class Sig:
    def __init__(self):
        self.sent = []
    async def both_speak_webrtc(self):
        return True
    def send(self, kind, sdp='', wide=False):
        self.sent.append(kind)
    async def receive(self):
        await asyncio.sleep(3600)

async def main():
    sig = Sig()
    session = TransitSession(None, 'sender',
                             settings=TransportSettings(WebRTCSettings(signalling=sig)))
    plugin = WebRTC()
    hints = await plugin.hilltop_transport_start(session=session).asFuture(
        asyncio.get_running_loop())
    dial = plugin.hilltop_transport_connect(hint=hints[0], session=session)
    dial.addErrback(lambda _: None)
    await asyncio.sleep(JOIN_AFTER / 5)  # direct TCP won: the runner cancels and stops
    dial.cancel()
    assert plugin.hilltop_transport_stop(session=session) is None
    await asyncio.sleep(JOIN_AFTER * 1.5)
    print(sig.sent, sorted({m.split('.')[0] for m in sys.modules} & {'aiortc', 'aioice', 'av'}))

asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] []"
