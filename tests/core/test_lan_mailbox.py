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
from twisted.internet.testing import StringTransport
from twisted.python import failure

from hilltop.errors import ServerError
from hilltop.lan.guard import Budget, ConnectionGuard, LanLimits, guarded_protocol


def addr(host: str, port: int = 40000) -> IPv4Address:
    return IPv4Address("TCP", host, port)


def guard(**limits: int) -> ConnectionGuard:
    return ConnectionGuard(protocol.Factory.forProtocol(protocol.Protocol), LanLimits(**limits))


def test_a_fifth_connection_from_one_address_is_refused_until_one_closes() -> None:
    g = guard()
    opened = [g.buildProtocol(addr("10.0.0.7", 40000 + i)) for i in range(4)]
    for p in opened:
        p.makeConnection(StringTransport())
    assert g.buildProtocol(addr("10.0.0.7", 40010)) is None
    assert g.buildProtocol(addr("10.0.0.8")) is not None  # another address is still welcome
    opened[0].connectionLost(failure.Failure(ConnectionDone()))
    assert g.buildProtocol(addr("10.0.0.7", 40011)) is not None


def test_a_seventeenth_connection_is_refused_whoever_makes_it() -> None:
    g = guard()
    for i in range(16):
        assert g.buildProtocol(addr(f"10.0.1.{i}")) is not None
    assert g.buildProtocol(addr("10.0.2.1")) is None
    assert sum(g.by_address.values()) == 16


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


def test_the_session_budget_ends_a_flood_of_big_frames() -> None:
    budget = Budget(LanLimits(total_bytes=1000))
    body = frame("add", phase="0", body="00" * 200)
    assert budget.refusal(body) is None and budget.refusal(body) is None
    assert "all it will take" in str(budget.refusal(body))
    assert "all it will take" in str(budget.refusal(frame("ping", ping=1)))


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

    mailbox = LanMailbox(reactor, ["127.0.0.1"])
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
    finally:
        await mailbox.stop()


@pytest_twisted.ensureDeferred
async def test_a_real_lan_mailbox_closes_the_fifth_connection_from_one_address() -> None:
    from twisted.internet import defer, endpoints, reactor, task

    from hilltop.lan.service import LanMailbox

    class Watch(protocol.Protocol):
        def __init__(self) -> None:
            self.lost: defer.Deferred[None] = defer.Deferred()

        def connectionLost(self, reason: object = None) -> None:
            self.lost.callback(None)

    mailbox = LanMailbox(reactor, ["127.0.0.1"])
    mailbox.start()
    endpoint = endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", mailbox.port)
    try:
        held = [await endpoints.connectProtocol(endpoint, Watch()) for _ in range(4)]
        fifth = await endpoints.connectProtocol(endpoint, Watch())
        await fifth.lost.addTimeout(5, reactor)  # closed by the server at once
        assert not any(w.lost.called for w in held)
        held[0].transport.loseConnection()
        await held[0].lost
        await task.deferLater(reactor, 0.2, lambda: None)  # the server sees the close too
        sixth = await endpoints.connectProtocol(endpoint, Watch())
        await task.deferLater(reactor, 0.2, lambda: None)
        assert not sixth.lost.called  # a place came free
        for w in [*held[1:], sixth]:
            w.transport.loseConnection()
            await w.lost
    finally:
        await mailbox.stop()
