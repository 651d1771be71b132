"""The relay transport and two runners meeting at the official transit relay (loopback only)."""

from __future__ import annotations

import contextlib
import os
import socket

import pytest_twisted
from twisted.internet import defer
from twisted.internet.task import deferLater

from hilltop.hints import direct_tcp_v1, parse_hints, parse_transit_helper, relay_v1
from hilltop.hookspecs import TransitSession
from hilltop.transit.connection import TransitConnection
from hilltop.transit.handshake import relay_handshake
from hilltop.transit.plugins import load_transports
from hilltop.transit.runner import TransitRunner
from hilltop.transports.relay import Relay

TK = bytes(range(32))


def open_sockets() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return n


async def settle(reactor, baseline: int, calls_before: set) -> None:
    for _ in range(100):
        if open_sockets() <= baseline:
            break
        await deferLater(reactor, 0.01, lambda: None)
    assert open_sockets() <= baseline, "sockets left open"
    ours = [c for c in reactor.getDelayedCalls() if c not in calls_before and c.active()]
    assert not ours, f"timers left pending: {ours}"


def test_contributes_configured_helper() -> None:
    from twisted.internet import reactor

    helper = parse_transit_helper("tcp:127.0.0.1:4001:priority=1.5")
    sess = TransitSession(reactor=reactor, role="sender", transit_helpers=[helper])
    t = Relay()
    assert t.hilltop_transport_start(sess) == [helper]
    assert t.hilltop_transport_info().relay is True
    assert t.hilltop_transport_connect(direct_tcp_v1.Hint("h", 1), sess) is None


@pytest_twisted.ensureDeferred
async def test_relay_pairs_two_streams(transit_relay: int) -> None:
    from twisted.internet import reactor

    t = Relay()
    sess = TransitSession(reactor=reactor, role="sender")
    hint = relay_v1.Hint((direct_tcp_v1.Hint("127.0.0.1", transit_relay),))
    a = await t.hilltop_transport_connect(hint, sess)
    b = await t.hilltop_transport_connect(hint, sess)
    assert a.description == f"relay 127.0.0.1:{transit_relay}"
    got_a: list[bytes] = []
    got_b: list[bytes] = []
    a.start_receiving(got_a.append, lambda why: None)
    b.start_receiving(got_b.append, lambda why: None)
    a.write(relay_handshake(TK, "00000000000000aa"))
    b.write(relay_handshake(TK, "00000000000000bb"))
    while b"".join(got_a) != b"ok\n" or b"".join(got_b) != b"ok\n":
        await deferLater(reactor, 0.01, lambda: None)
    a.write(b"through the relay")
    while b"".join(got_b) != b"ok\nthrough the relay":
        await deferLater(reactor, 0.01, lambda: None)
    a.close()
    await b.when_closed()  # the relay closes the other side too


async def meet(reactor, port: int, s_kw: dict, r_kw: dict, peer_extra=()) -> None:
    baseline, calls = open_sockets(), set(reactor.getDelayedCalls())
    helper = parse_transit_helper(f"tcp:127.0.0.1:{port}")
    runners = []
    for role, kw in (("sender", s_kw), ("receiver", r_kw)):
        kw = dict(kw)
        kw.setdefault("local_addresses", ["127.0.0.1"])
        runners.append(TransitRunner(reactor, role, TK, transit_helpers=[helper],
                                     transports=load_transports(["direct-tcp", "relay"]),
                                     **kw))
    s, r = runners
    s_wire = [h.to_wire() for h in await s.our_hints()] + list(peer_extra)
    r_wire = [h.to_wire() for h in await r.our_hints()]
    assert {"type": "relay-v1", "hints": [{"type": "direct-tcp-v1", "hostname": "127.0.0.1",
                                          "port": port, "priority": 0.0}]} in s_wire
    ws, wr = await defer.gatherResults([s.connect(parse_hints(r_wire)),
                                        r.connect(parse_hints(s_wire))])
    cs, cr = TransitConnection(ws, "sender", TK), TransitConnection(wr, "receiver", TK)
    assert cs.description == f"relay 127.0.0.1:{port}"
    assert cr.description == f"relay 127.0.0.1:{port}"
    for i in range(50):
        cs.send_record(b"s%d" % i)
    for i in range(50):
        assert await cr.receive_record() == b"s%d" % i
    cr.send_record(b"ack")
    assert await cs.receive_record() == b"ack"
    await cr.close()
    await cs.when_closed()
    await s.stop()
    await r.stop()
    await settle(reactor, baseline, calls)


@pytest_twisted.ensureDeferred
async def test_runners_meet_at_relay_no_listen(transit_relay: int) -> None:
    from twisted.internet import reactor

    await meet(reactor, transit_relay, {"no_listen": True}, {"no_listen": True})


@pytest_twisted.ensureDeferred
async def test_relay_wins_when_direct_hint_is_dead(transit_relay: int) -> None:
    from twisted.internet import reactor

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    dead_hint = {"type": "direct-tcp-v1", "hostname": "127.0.0.1", "port": dead,
                 "priority": 0.0, "hints": None}
    await meet(reactor, transit_relay, {"no_listen": True}, {"no_listen": True},
               peer_extra=[dead_hint])
