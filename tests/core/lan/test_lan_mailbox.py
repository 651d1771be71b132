"""hilltop.lan.guard: the in-process LAN mailbox refuses floods (issue 20, point 6).

The limits are checked one by one on the guard objects (no network), then once end to end on
a real :class:`~hilltop.lan.service.LanMailbox` on 127.0.0.1 with two hilltop clients: the
announced nameplate works, anything else is refused with a clear error.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import protocol
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python import failure

from hilltop.errors import ServerError
from hilltop.lan.guard import Budget, ConnectionGuard, LanLimits, guarded_protocol


def addr(host: str, port: int = 40000) -> IPv4Address:
    return IPv4Address("TCP", host, port)


def guard(clock: Clock | None = None, budget: Budget | None = None,
          **limits: Any) -> ConnectionGuard:
    return ConnectionGuard(protocol.Factory.forProtocol(protocol.Protocol), LanLimits(**limits),
                           clock or Clock(), budget)


class Session(protocol.Protocol):
    """Stands in for a WebSocket that has opened the mailbox (or not: ``holds_mailbox``)."""

    holds_mailbox = False


def connect(g: ConnectionGuard, host: str, port: int = 40000, *,
            holding: bool = False) -> tuple[Any, StringTransport]:
    wrapper = g.buildProtocol(addr(host, port))
    assert wrapper is not None, f"a connection from {host} was refused"
    if holding:
        wrapper.wrappedProtocol = Session()
        wrapper.wrappedProtocol.holds_mailbox = True
    transport = StringTransport()
    wrapper.makeConnection(transport)
    return wrapper, transport


def aborted(transport: StringTransport) -> bool:
    return bool(transport.disconnecting)


def test_a_fifth_connection_from_one_address_replaces_its_oldest_idle_one() -> None:
    """Issue 27, item 15: idle connections used to keep a place until they closed."""
    told: list[str] = []
    g = guard(budget=Budget(LanLimits(), told.append))
    opened = [connect(g, "10.0.0.7", 40000 + i) for i in range(4)]
    other, other_t = connect(g, "10.0.0.8")
    fifth, _ = connect(g, "10.0.0.7", 40010)
    assert aborted(opened[0][1]) and not any(aborted(t) for _, t in opened[1:])
    assert not aborted(other_t)
    assert g.by_address == {"10.0.0.7": 4, "10.0.0.8": 1}
    assert len(told) == 1 and "10.0.0.7" in told[0] and "flooding" in told[0]


def test_seventeen_idle_connections_make_room_for_the_receiver() -> None:
    told: list[str] = []
    g = guard(budget=Budget(LanLimits(), told.append))
    flood = [connect(g, f"10.0.1.{i % 4}", 40000 + i) for i in range(15)]
    sender, sender_t = connect(g, "10.0.0.1", holding=True)
    receiver, receiver_t = connect(g, "10.0.0.2")  # the seventeenth
    assert aborted(flood[0][1]) and not aborted(sender_t) and not aborted(receiver_t)
    assert sum(g.by_address.values()) == 16
    assert len(told) == 1  # told once, however long the flood goes on
    for i in range(20):
        connect(g, f"10.0.1.{i % 4}", 41000 + i)
    assert not aborted(sender_t) and len(told) == 1


def test_connections_in_a_session_are_never_dropped_to_make_room() -> None:
    g = guard(connections=3)
    held = [connect(g, f"10.0.2.{i}", holding=True) for i in range(3)]
    assert g.buildProtocol(addr("10.0.3.1")) is None
    assert not any(aborted(t) for _, t in held)
    held[0][0].connectionLost(failure.Failure(ConnectionDone()))
    assert g.buildProtocol(addr("10.0.3.1")) is not None


def test_a_connection_that_opens_no_mailbox_is_dropped_after_the_idle_time() -> None:
    clock = Clock()
    g = guard(clock, idle_seconds=10)
    idle, idle_t = connect(g, "10.0.4.1")
    busy, busy_t = connect(g, "10.0.4.2", holding=True)
    clock.advance(9.9)
    assert not aborted(idle_t)
    clock.advance(0.2)
    assert aborted(idle_t) and not aborted(busy_t)
    clock.pump([5.0] * 20)  # a session is held for as long as it lasts
    assert not aborted(busy_t)
    busy.wrappedProtocol.holds_mailbox = False  # it closed its mailbox: finished
    clock.pump([5.0] * 4)
    assert aborted(busy_t)


def frame(kind: str, **fields: Any) -> bytes:
    return json.dumps({"type": kind, "id": "abcd", **fields}).encode()


def test_only_the_announced_nameplate_may_be_claimed_and_nothing_allocated() -> None:
    budget = Budget(LanLimits())
    budget.nameplate = "4"
    assert budget.refusal(frame("claim", nameplate="4")) is None
    assert budget.refusal(frame("bind", appid="x", side="s")) is None
    assert "only the nameplate it announced" in str(budget.refusal(frame("allocate")))
    assert "only the nameplate it announced" in str(
        budget.refusal(frame("claim", nameplate="5")))
    assert budget.refusal(b"[" * 100_000) is None  # garbage is the server's to refuse


def test_one_address_spends_its_own_budget_not_everyones() -> None:
    """Issue 27, item 15: nine 8 MB pings from one connection spent a session-wide budget."""
    budget = Budget(LanLimits(address_bytes=1000))
    body = frame("add", phase="0", body="00" * 200)
    assert budget.refusal(body, "10.0.5.1") is None and budget.refusal(body, "10.0.5.1") is None
    assert "all it will take" in str(budget.refusal(body, "10.0.5.1"))
    assert "all it will take" in str(budget.refusal(frame("ping", ping=1), "10.0.5.1"))
    assert budget.refusal(body, "10.0.5.2") is None  # the receiver is still served


def test_a_refused_claim_and_a_flood_are_each_told_to_the_sender_once() -> None:
    told: list[str] = []
    budget = Budget(LanLimits(address_bytes=300), told.append)
    budget.nameplate = "4"
    for _ in range(3):
        assert budget.refusal(frame("claim", nameplate="5"), "10.0.6.1") is not None
    [line] = told
    assert "'5'" in line and "'4'" in line and "10.0.6.1" in line
    for _ in range(3):
        budget.refusal(frame("ping", ping=1, pad="x" * 100), "10.0.6.2")
    assert len(told) == 2 and "flooding" in told[1] and "10.0.6.2" in told[1]


def test_only_the_announced_nameplates_mailbox_may_be_opened() -> None:
    budget = Budget(LanLimits())
    budget.nameplate = "4"
    assert "only the nameplate" in str(budget.refusal(frame("open", mailbox="m1")))
    budget.mailbox = "m1"
    assert budget.refusal(frame("open", mailbox="m1")) is None
    assert "only the nameplate" in str(budget.refusal(frame("open", mailbox="other")))


class Recording:
    """Stands in for the official server's protocol: records what reached it."""

    def __init__(self) -> None:
        self.served: list[bytes] = []
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.dropped = False

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        self.served.append(payload)

    def send(self, mtype: str, **fields: Any) -> None:
        self.sent.append((mtype, fields))

    def dropConnection(self, abort: bool = False) -> None:
        self.dropped = True


def test_a_connection_is_dropped_after_its_thousandth_frame() -> None:
    budget = Budget(LanLimits())
    budget.nameplate = "4"
    conn = guarded_protocol(Recording, budget)()
    for n in range(1000):
        conn.onMessage(frame("ping", ping=n), False)
    assert len(conn.served) == 1000 and not conn.dropped
    conn.onMessage(frame("ping", ping=1000), False)
    assert conn.dropped and len(conn.served) == 1000


def test_a_refused_command_gets_an_error_and_never_reaches_the_server() -> None:
    budget = Budget(LanLimits())
    budget.nameplate = "4"
    conn = guarded_protocol(Recording, budget)()
    conn.onMessage(frame("allocate"), False)
    assert conn.served == []
    [(kind, fields)] = conn.sent
    assert kind == "error" and fields["orig"]["type"] == "allocate"


@pytest_twisted.ensureDeferred
async def test_a_real_lan_mailbox_serves_its_nameplate_and_refuses_others() -> None:
    from twisted.internet import reactor

    from hilltop.api import Wormhole
    from hilltop.lan.service import LanMailbox

    told: list[str] = []
    mailbox = LanMailbox(reactor, ["127.0.0.1"], notice=told.append)
    mailbox.start()  # its URLs leave loopback out: LAN peers never use it
    url = f"ws://127.0.0.1:{mailbox.port}/v1"
    mailbox.serve_only("4")
    try:
        a, b = Wormhole(relay_url=url, reactor=reactor), Wormhole(relay_url=url, reactor=reactor)
        a.set_code("4-purple-sausages")
        b.set_code("4-purple-sausages")
        a.send_message(b"through the guarded mailbox")
        assert await b.get_message() == b"through the guarded mailbox"
        await a.close()
        await b.close()
        stranger = Wormhole(relay_url=url, reactor=reactor)
        stranger.allocate_code()
        with pytest.raises(ServerError, match="only the nameplate it announced"):
            await stranger.get_code()
        with pytest.raises(ServerError):
            await stranger.when_closed()
        assert told == []  # an allocate is nobody's receiver: nothing to tell the sender
        lost = Wormhole(relay_url=url, reactor=reactor)
        lost.set_code("5-purple-sausages")  # a receiver typing another code: the sender hears
        with pytest.raises(ServerError, match="only the nameplate it announced"):
            await lost.when_closed()
        [line] = told
        assert "asked for nameplate '5'" in line and "'4' only" in line
    finally:
        await mailbox.stop()


class Watch(protocol.Protocol):
    """A raw TCP client: what it received, and when the server closed it."""

    def __init__(self) -> None:
        from twisted.internet import defer

        self.lost: defer.Deferred[None] = defer.Deferred()
        self.received = b""

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: object = None) -> None:
        self.lost.callback(None)


async def pause(seconds: float) -> None:
    from twisted.internet import reactor, task

    await task.deferLater(reactor, seconds, lambda: None)


@pytest_twisted.ensureDeferred
async def test_a_real_lan_mailbox_serves_a_session_past_idle_connections() -> None:
    """Issue 27, item 15: idle TCP connections filled every place and the receiver got
    "cannot reach the mailbox server". Now the idle ones go (at the limit, or after
    ``idle_seconds``) and a session is held however long it lasts."""
    from twisted.internet import endpoints, reactor

    from hilltop.api import Wormhole
    from hilltop.lan.service import LanMailbox

    told: list[str] = []
    mailbox = LanMailbox(reactor, ["127.0.0.1"], LanLimits(idle_seconds=1.0), told.append)
    mailbox.start()
    mailbox.serve_only("4")
    url = f"ws://127.0.0.1:{mailbox.port}/v1"
    endpoint = endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", mailbox.port)
    try:
        idle = [await endpoints.connectProtocol(endpoint, Watch()) for _ in range(4)]
        a, b = Wormhole(relay_url=url, reactor=reactor), Wormhole(relay_url=url, reactor=reactor)
        a.set_code("4-purple-sausages")
        b.set_code("4-purple-sausages")
        a.send_message(b"first")
        assert await b.get_message() == b"first"
        for w in idle:  # two made room at once, the others timed out
            await w.lost.addTimeout(5, reactor)
        assert told and "flooding" in told[0]
        await pause(2.5)  # longer than idle_seconds: the session's connections stay
        b.send_message(b"second, after the idle time")
        assert await a.get_message() == b"second, after the idle time"
        await a.close()
        await b.close()
    finally:
        await mailbox.stop()


@pytest_twisted.ensureDeferred
async def test_a_real_lan_mailbox_drops_a_connection_that_pings_too_much() -> None:
    """Issue 27, item 15: big ``ping`` frames from one connection spent the session's budget
    and the receiver got "has received all it will take"."""
    from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
    from twisted.internet import defer, reactor

    from hilltop.api import Wormhole
    from hilltop.lan.service import LanMailbox

    mailbox = LanMailbox(reactor, ["127.0.0.1"], LanLimits(connection_bytes=3_000_000))
    mailbox.start()
    mailbox.serve_only("4")
    url = f"ws://127.0.0.1:{mailbox.port}/v1"
    closed: defer.Deferred[None] = defer.Deferred()

    class Pinger(WebSocketClientProtocol):
        def onOpen(self) -> None:
            for n in range(3):
                self.sendMessage(json.dumps({"type": "ping", "ping": n,
                                             "pad": "x" * 1_400_000}).encode())

        def onClose(self, wasClean: bool, code: Any, reason: Any) -> None:
            closed.callback(None)

    factory = WebSocketClientFactory(url)
    factory.protocol = Pinger
    factory.setProtocolOptions(maxMessagePayloadSize=0, maxFramePayloadSize=0)
    try:
        reactor.connectTCP("127.0.0.1", mailbox.port, factory)
        await closed.addTimeout(10, reactor)
        a, b = Wormhole(relay_url=url, reactor=reactor), Wormhole(relay_url=url, reactor=reactor)
        a.set_code("4-purple-sausages")
        b.set_code("4-purple-sausages")
        a.send_message(b"the pinger spent only its own budget")
        assert await b.get_message() == b"the pinger spent only its own budget"
        await a.close()
        await b.close()
    finally:
        await mailbox.stop()


@pytest_twisted.ensureDeferred
async def test_a_real_lan_mailbox_refuses_a_request_body_before_reading_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27, item 14: a ``POST`` with a 1.5 GB ``Content-Length`` (or chunked) was spooled
    to ``TMPDIR`` whatever its size. Now: 413 and the connection closed, nothing spooled."""
    from twisted.internet import endpoints, reactor
    from twisted.web import http

    from hilltop.lan.service import LanMailbox

    spooled: list[object] = []
    real = http._getContentFile
    monkeypatch.setattr(http, "_getContentFile", lambda n: spooled.append(n) or real(n))
    mailbox = LanMailbox(reactor, ["127.0.0.1"])
    mailbox.start()
    endpoint = endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", mailbox.port)
    try:
        for head in (b"Content-Length: 1500000000\r\n", b"Transfer-Encoding: chunked\r\n"):
            w = await endpoints.connectProtocol(endpoint, Watch())
            w.transport.write(b"POST /v1 HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n")
            w.transport.write(b"1000\r\n" + b"x" * 100_000)
            await w.lost.addTimeout(5, reactor)
            assert w.received.startswith(b"HTTP/1.1 413 "), w.received
        assert spooled == []
        w = await endpoints.connectProtocol(endpoint, Watch())  # a GET is still served
        w.transport.write(b"GET /v1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await w.lost.addTimeout(5, reactor)
        assert w.received.startswith(b"HTTP/1.1 "), w.received
        assert not w.received.startswith(b"HTTP/1.1 413 ")
    finally:
        await mailbox.stop()
