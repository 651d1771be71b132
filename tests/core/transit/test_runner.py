"""Two TransitRunners (sender and receiver) connect over loopback and move records both ways.

Every test ends by checking that nothing is left behind: no sockets we opened, no timers.
The relay tests live in tests/transports/test_relay.py (they need the official relay).
"""

from __future__ import annotations

import os
import socket

import pytest
import pytest_twisted
from twisted.internet import defer
from twisted.internet.task import deferLater

from hilltop.errors import TransitError
from hilltop.hints import RawHint, direct_tcp_v1, parse_hints
from hilltop.hookspecs import TransportInfo, hookimpl
from hilltop.testing import free_port
from hilltop.transit.connection import TransitConnection
from hilltop.transit.plugins import load_transports
from hilltop.transit.race import RaceConfig
from hilltop.transit.runner import TransitRunner

TK = bytes(range(32))


def open_sockets() -> int:
    fds = os.listdir("/proc/self/fd")
    n = 0
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n


class Leaks:
    """Snapshot sockets and delayed calls before a test; compare after."""

    def __init__(self, reactor) -> None:
        self.reactor = reactor
        self.sockets = open_sockets()
        self.calls = set(reactor.getDelayedCalls())

    async def check(self) -> None:
        for _ in range(50):  # closing sockets needs a reactor turn or two
            if open_sockets() <= self.sockets:
                break
            await deferLater(self.reactor, 0.01, lambda: None)
        assert open_sockets() <= self.sockets, "sockets left open"
        ours = [c for c in self.reactor.getDelayedCalls()
                if c not in self.calls and c.active()]
        assert not ours, f"timers left pending: {ours}"


def runner(reactor, role, names=("direct-tcp",), **kw) -> TransitRunner:
    kw.setdefault("local_addresses", ["127.0.0.1"])
    return TransitRunner(reactor, role, TK, transports=load_transports(list(names)), **kw)


async def pair(s: TransitRunner, r: TransitRunner):
    s_hints, r_hints = await s.our_hints(), await r.our_hints()
    # the hints travel as JSON through the mailbox
    s_wire = [h.to_wire() for h in s_hints]
    r_wire = [h.to_wire() for h in r_hints]
    ws, wr = await defer.gatherResults([s.connect(parse_hints(r_wire)),
                                        r.connect(parse_hints(s_wire))])
    return TransitConnection(ws, "sender", TK), TransitConnection(wr, "receiver", TK)


async def exchange(cs, cr) -> None:
    cs.send_record(b"hello")
    cs.send_record(b"world")
    assert await cr.receive_record() == b"hello"
    assert await cr.receive_record() == b"world"
    cr.send_record(b'{"ack": "ok"}')
    assert await cs.receive_record() == b'{"ack": "ok"}'


async def finish(reactor, leaks, s, r, cs, cr) -> None:
    await cr.close()
    await cs.when_closed()
    with pytest.raises(TransitError):
        await cs.receive_record()
    await s.stop()
    await r.stop()
    await leaks.check()


@pytest_twisted.ensureDeferred
async def test_sender_listens_receiver_dials() -> None:
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    s, r = runner(reactor, "sender"), runner(reactor, "receiver", no_listen=True)
    cs, cr = await pair(s, r)
    assert cs.description.startswith("direct-tcp 127.0.0.1:")
    assert cs.description.endswith("(inbound)")
    assert cr.description == f"direct-tcp 127.0.0.1:{cs.stream.transport.getHost().port}"
    await exchange(cs, cr)
    await finish(reactor, leaks, s, r, cs, cr)


@pytest_twisted.ensureDeferred
async def test_both_listen_losers_closed() -> None:
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    s, r = runner(reactor, "sender"), runner(reactor, "receiver")
    cs, cr = await pair(s, r)
    await exchange(cs, cr)
    await finish(reactor, leaks, s, r, cs, cr)


@pytest_twisted.ensureDeferred
async def test_receiver_listens_sender_dials_ipv6() -> None:
    from twisted.internet import reactor

    try:
        socket.socket(socket.AF_INET6).close()
    except OSError:
        pytest.skip("no IPv6")
    leaks = Leaks(reactor)
    s = runner(reactor, "sender", no_listen=True)
    r = runner(reactor, "receiver", local_addresses=["::1"])
    cs, cr = await pair(s, r)
    assert cs.description.startswith("direct-tcp [::1]:")
    await exchange(cs, cr)
    await finish(reactor, leaks, s, r, cs, cr)


@pytest_twisted.ensureDeferred
async def test_big_transfer_push_mode_with_pause() -> None:
    """8 MB in 16 KiB records; the receiver pauses now and then, nothing is lost or reordered."""
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    s, r = runner(reactor, "sender"), runner(reactor, "receiver", no_listen=True)
    cs, cr = await pair(s, r)
    chunk = 16384
    total = 512
    done: defer.Deferred[None] = defer.Deferred()
    got: list[int] = []

    def on_record(data: bytes) -> None:
        got.append(int.from_bytes(data[:4], "big"))
        assert len(data) == chunk
        if len(got) % 64 == 0 and len(got) < total:
            cr.pauseProducing()
            reactor.callLater(0.01, cr.resumeProducing)
        if len(got) == total:
            done.callback(None)

    cr.set_record_receiver(on_record, lambda err: None)

    class Producer:
        """A push producer that stops writing when the socket buffer is full."""

        def __init__(self) -> None:
            self.n = 0
            self.paused = False

        def pauseProducing(self) -> None:  # noqa: N802
            self.paused = True

        def resumeProducing(self) -> None:  # noqa: N802
            self.paused = False
            self.pump()

        def stopProducing(self) -> None:  # noqa: N802
            self.paused = True

        def pump(self) -> None:
            while not self.paused and self.n < total:
                cs.send_record(self.n.to_bytes(4, "big") + bytes(chunk - 4))
                self.n += 1
            if self.n == total:
                cs.unregisterProducer()

    producer = Producer()
    cs.registerProducer(producer, True)
    producer.pump()
    await done
    assert got == list(range(total))
    await finish(reactor, leaks, s, r, cs, cr)


@pytest_twisted.ensureDeferred
async def test_nothing_reachable_fails_cleanly() -> None:
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    r = runner(reactor, "receiver", no_listen=True)
    await r.our_hints()
    with pytest.raises(TransitError, match="refused"):
        await r.connect([direct_tcp_v1.Hint("127.0.0.1", dead)])
    await r.stop()
    await leaks.check()


@pytest_twisted.ensureDeferred
async def test_wrong_key_never_connects() -> None:
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    cfg = RaceConfig(attempt_timeout=1.0, overall_timeout=2.0)
    s = runner(reactor, "sender", config=cfg)
    r = TransitRunner(reactor, "receiver", bytes(32), no_listen=True, config=cfg,
                      transports=load_transports(["direct-tcp"]))
    hints = await s.our_hints()
    await r.our_hints()
    results = await defer.DeferredList([s.connect([]), r.connect(hints)], consumeErrors=True)
    for ok, value in results:
        assert not ok and value.check(TransitError)
    assert "transit handshake" in results[1][1].getErrorMessage()
    await s.stop()
    await r.stop()
    await leaks.check()


@pytest_twisted.ensureDeferred
async def test_cancel_connect_cleans_up() -> None:
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    s = runner(reactor, "sender")
    await s.our_hints()
    d = s.connect([])
    await deferLater(reactor, 0.05, lambda: None)
    d.cancel()
    with pytest.raises(defer.CancelledError):
        await d
    await s.stop()
    await leaks.check()


class Exploding:
    """A third-party transport that raises in every hook: the race must not care."""

    api = 1

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        return TransportInfo(name="boom", hint_types=("direct-tcp-v1",))

    @hookimpl
    def hilltop_transport_start(self, session):
        raise RuntimeError("start exploded")

    @hookimpl
    def hilltop_transport_connect(self, hint, session):
        raise RuntimeError("connect exploded")

    @hookimpl
    def hilltop_transport_stop(self):
        raise RuntimeError("stop exploded")


@pytest_twisted.ensureDeferred
async def test_exploding_plugin_does_not_break_the_race() -> None:
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    s = runner(reactor, "sender")
    ts = load_transports(["direct-tcp"], extra=[Exploding()])
    ts.loaded.insert(0, ts.loaded.pop())  # make it the first one asked
    r = TransitRunner(reactor, "receiver", TK, transports=ts, no_listen=True)
    cs, cr = await pair(s, r)
    await exchange(cs, cr)
    await finish(reactor, leaks, s, r, cs, cr)


class Meet:
    """Like webrtc: both sides contribute a hint that says "dial me the same way" and dial
    the peer's; ``inbound`` says whether a listener stands behind the hint."""

    api = 1

    def __init__(self, inbound: bool) -> None:
        self.inbound = inbound

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        return TransportInfo(name="meet", hint_types=("meet-v1",), inbound=self.inbound)

    @hookimpl
    def hilltop_transport_start(self, session):
        return [RawHint.make("meet-v1", priority=0.0)]

    @hookimpl
    def hilltop_transport_connect(self, hint, session):
        if hint.type != "meet-v1":
            return None

        def give_up() -> None:
            raise TransitError("no working candidate pair")

        return deferLater(session.reactor, 0.2, give_up)


async def race_alone(reactor, inbound: bool) -> tuple[float, str]:
    """The receiver's race over the peer's meet-v1 hint, whose dial fails after 0.2 s:
    how long connect() took to fail, and why."""
    r = TransitRunner(reactor, "receiver", TK, config=RaceConfig(overall_timeout=3.0),
                      transports=load_transports(eps=[], extra=[Meet(inbound)]))
    await r.our_hints()
    began = reactor.seconds()
    with pytest.raises(TransitError) as failed:
        await r.connect([RawHint.make("meet-v1", priority=0.0)])
    await r.stop()
    return reactor.seconds() - began, str(failed.value)


@pytest_twisted.ensureDeferred
async def test_a_hint_without_a_listener_does_not_keep_a_failed_race_open() -> None:
    """--transports webrtc: once its one attempt failed nothing can come in, so the race
    fails then, with the attempt's reason, not at the overall time-out."""
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    took, why = await race_alone(reactor, inbound=False)
    assert took < 1.5, why
    assert "no working candidate pair" in why and "within" not in why
    await leaks.check()


@pytest_twisted.ensureDeferred
async def test_a_hint_with_a_listener_keeps_the_race_open_for_the_peer() -> None:
    """The peer may still dial a hint with a listener behind it: wait the whole race."""
    from twisted.internet import reactor

    took, why = await race_alone(reactor, inbound=True)
    assert took >= 2.9 and "within 3 s" in why


@pytest_twisted.ensureDeferred
async def test_each_attempt_is_reported_to_the_watcher() -> None:
    """``on_attempt`` (the CLI's --json events) hears the dial, the inbound side and the
    winner, and a failing dial with its reason; a watcher that raises changes nothing."""
    from twisted.internet import reactor

    from hilltop.transit.options import AttemptNote

    leaks = Leaks(reactor)
    heard: dict[str, list[AttemptNote]] = {"sender": [], "receiver": []}

    def broken(_note: AttemptNote) -> None:
        raise RuntimeError("a watcher bug")

    s = runner(reactor, "sender", on_attempt=heard["sender"].append)
    r = runner(reactor, "receiver", no_listen=True, on_attempt=heard["receiver"].append)
    cs, cr = await pair(s, r)
    assert [(n.transport, n.state) for n in heard["receiver"]] == [
        ("direct-tcp", "dialling"), ("direct-tcp", "won")]
    assert heard["receiver"][-1].target == str(cr.description).split(" ", 1)[1]
    assert [(n.transport, n.state) for n in heard["sender"]] == [
        ("inbound", "inbound"), ("inbound", "won")]
    await exchange(cs, cr)
    await finish(reactor, leaks, s, r, cs, cr)

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    failing: list[AttemptNote] = []
    lonely = runner(reactor, "receiver", no_listen=True, on_attempt=failing.append)
    await lonely.our_hints()
    with pytest.raises(TransitError):
        await lonely.connect([direct_tcp_v1.Hint("127.0.0.1", dead)])
    await lonely.stop()
    assert [n.state for n in failing] == ["dialling", "failed"]
    assert "refused" in failing[-1].reason
    quiet = runner(reactor, "receiver", no_listen=True, on_attempt=broken)
    await quiet.our_hints()
    with pytest.raises(TransitError, match="refused"):  # the race's own outcome, not the bug
        await quiet.connect([direct_tcp_v1.Hint("127.0.0.1", dead)])
    await quiet.stop()
    await leaks.check()


@pytest_twisted.ensureDeferred
async def test_a_second_race_for_the_same_transfer_gets_fresh_hints_and_connects() -> None:
    """Issue 28: the runner was one-shot ("connect() may only be called once"), so a
    reconnecting channel had nowhere to go. After the first race, next_race() makes room for
    another: same key and role, fresh hints (a new listening port), and both connections
    work side by side, the first one still the caller's."""
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    s, r = runner(reactor, "sender"), runner(reactor, "receiver", no_listen=True)
    first_hints = await s.our_hints()
    cs1, cr1 = await pair(s, r)
    with pytest.raises(RuntimeError, match="next_race"):
        s.connect([])  # one race at a time, still
    await defer.gatherResults([defer.ensureDeferred(s.next_race()),
                               defer.ensureDeferred(r.next_race())])
    second_hints = await s.our_hints()
    assert {h.port for h in second_hints}.isdisjoint({h.port for h in first_hints})
    cs2, cr2 = await pair(s, r)
    await exchange(cs2, cr2)
    await exchange(cs1, cr1)  # the first race's connection was left alone
    await cr2.close()
    await cs2.when_closed()
    await finish(reactor, leaks, s, r, cs1, cr1)


@pytest_twisted.ensureDeferred
async def test_no_second_race_while_one_runs() -> None:
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    s = runner(reactor, "sender")
    racing = s.connect(parse_hints([{"type": "direct-tcp-v1", "hostname": "127.0.0.1",
                                     "port": free_port(), "priority": 0.0}]))
    await s.our_hints()
    with pytest.raises(RuntimeError, match="still running"):
        await s.next_race()
    racing.addErrback(lambda _f: None)
    racing.cancel()
    await s.next_race()  # once cancelled, there is room
    assert await s.our_hints()
    await s.stop()
    await leaks.check()
