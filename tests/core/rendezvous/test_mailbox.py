"""The rendezvous engine, driven through an in-memory mailbox server.

The fake server follows the real one's observable rules (echo to the sender, replay on open,
one claim/release/close per connection) so the engine is tested as plain input -> output.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from hilltop.errors import (
    HilltopError,
    ProtocolError,
    ServerError,
    ServerUnreachableError,
    UnwelcomeError,
    WrongCodeError,
)
from hilltop.rendezvous import key, messages
from hilltop.rendezvous import mailbox as mb

APPID = "lothar.com/wormhole/text-or-file-xfer"


@dataclass
class Channel:
    messages: list[dict] = field(default_factory=list)
    listeners: list[Conn] = field(default_factory=list)


class FakeServer:
    def __init__(self, welcome: dict | None = None) -> None:
        self.welcome = welcome or {"motd": "hello"}
        self.nameplates: dict[str, tuple[str, set[str]]] = {}
        self.mailboxes: dict[str, Channel] = {}
        self.log: list[tuple[str, dict]] = []
        self._next = 0

    def connect(self, engine: mb.Mailbox, now: float = 0.0) -> Conn:
        conn = Conn(self, engine)
        engine.connected(now)
        conn.deliver({"type": "welcome", "welcome": self.welcome})
        return conn


class Conn:
    def __init__(self, server: FakeServer, engine: mb.Mailbox) -> None:
        self.server = server
        self.engine = engine
        self.side: str | None = None
        self.channel: Channel | None = None
        self.alive = True
        self.inbox: list[dict] = []

    def deliver(self, msg: dict) -> None:
        if self.alive:
            self.inbox.append(msg)

    def drop(self, now: float = 0.0) -> None:
        self.alive = False
        if self.channel and self in self.channel.listeners:
            self.channel.listeners.remove(self)
        self.engine.connection_lost(now)

    def handle(self, frame: str) -> None:
        if not self.alive:
            return
        msg = json.loads(frame)
        self.server.log.append((self.engine.side, msg))
        self.deliver({"type": "ack", "id": msg["id"]})
        kind = msg["type"]
        srv = self.server
        if kind == "bind":
            self.side = msg["side"]
        elif kind == "list":
            ids = [{"id": n} for n in sorted(srv.nameplates)]
            self.deliver({"type": "nameplates", "nameplates": ids})
        elif kind == "allocate":
            name = str(len(srv.nameplates) + 4)
            self.deliver({"type": "allocated", "nameplate": name})
        elif kind == "claim":
            name = msg["nameplate"]
            mailbox_id, sides = srv.nameplates.setdefault(name, (f"mbx{name}", set()))
            sides.add(self.side)
            if len(sides) > 2:
                self.deliver({"type": "error", "error": "crowded", "orig": msg})
                return
            self.deliver({"type": "claimed", "mailbox": mailbox_id})
        elif kind == "release":
            self.deliver({"type": "released"})
        elif kind == "open":
            self.channel = srv.mailboxes.setdefault(msg["mailbox"], Channel())
            self.channel.listeners.append(self)
            for stored in self.channel.messages:
                self.deliver(stored)
        elif kind == "add":
            assert self.channel is not None, "add before open"
            out = {"type": "message", "side": self.side, "phase": msg["phase"],
                   "body": msg["body"], "id": msg["id"]}
            self.channel.messages.append(out)
            for listener in self.channel.listeners:
                listener.deliver(out)
        elif kind == "close":
            if self.channel and self in self.channel.listeners:
                self.channel.listeners.remove(self)
            self.deliver({"type": "closed"})
        elif kind == "ping":
            self.deliver({"type": "pong", "pong": msg["ping"]})


def pump(*conns: Conn, now: float = 0.0) -> None:
    """Move frames both ways until nothing is left in flight."""
    busy = True
    while busy:
        busy = False
        for conn in conns:
            for frame in conn.engine.frames_to_send():
                busy = True
                conn.handle(frame)
            while conn.inbox:
                busy = True
                conn.engine.frame_received(json.dumps(conn.inbox.pop(0)), now)


def events(engine: mb.Mailbox) -> list[mb.Event]:
    out = []
    while (ev := engine.next_event()) is not None:
        out.append(ev)
    return out


def of(kind: type, evs: list) -> list:
    return [e for e in evs if isinstance(e, kind)]


def engine(seed: int, versions: dict | None = None) -> mb.Mailbox:
    rng = random.Random(seed)
    return mb.Mailbox(APPID, rng.randbytes(5).hex(), rng.randbytes, versions or {})


def test_allocate_then_set_code_gives_both_sides_the_same_key_and_messages() -> None:
    server = FakeServer()
    a, b = engine(1, {"x": 1}), engine(2)
    ca = server.connect(a)
    a.allocate(2)
    pump(ca)
    code = of(mb.CodeReady, events(a))[0].code
    assert code.startswith("4-") and code.count("-") == 2
    a.send(b"first")
    a.send(b"second")
    cb = server.connect(b)
    b.set_code(code)
    b.send(b"reply")
    pump(ca, cb)
    ea, eb = events(a), events(b)
    assert of(mb.KeyEstablished, ea)[0].verifier == of(mb.KeyEstablished, eb)[0].verifier
    assert of(mb.PeerVersions, eb)[0].app_versions == {"x": 1}
    assert of(mb.PeerVersions, ea)[0].app_versions == {}
    assert [e.data for e in of(mb.Received, eb)] == [b"first", b"second"]
    assert [e.data for e in of(mb.Received, ea)] == [b"reply"]
    assert a.stage is mb.Stage.CONFIRMED and b.stage is mb.Stage.CONFIRMED
    a.close()
    b.close()
    pump(ca, cb)
    ea, eb = events(a), events(b)
    assert of(mb.ClosedEvent, ea) == [mb.ClosedEvent("happy", None)]
    assert of(mb.ClosedEvent, eb) == [mb.ClosedEvent("happy", None)]
    assert of(mb.DisconnectNow, ea)


def test_wire_order_is_bind_claim_open_pake_then_version_then_numbered() -> None:
    server = FakeServer()
    a, b = engine(3), engine(4)
    ca, cb = server.connect(a), server.connect(b)
    a.set_code("7-guitarist-revenge")
    a.send(b"early")
    b.set_code("7-guitarist-revenge")
    pump(ca, cb)
    sent = [(m["type"], m.get("phase")) for side, m in server.log if side == a.side]
    assert sent[:4] == [("bind", None), ("claim", None), ("open", None), ("add", "pake")]
    adds = [phase for kind, phase in sent if kind == "add"]
    assert adds == ["pake", "version", "0"]
    assert ("release", None) in sent


def test_wrong_code_closes_both_sides_scared() -> None:
    server = FakeServer()
    a, b = engine(5), engine(6)
    ca, cb = server.connect(a), server.connect(b)
    a.set_code("7-guitarist-revenge")
    b.set_code("7-guitarist-revengf")
    pump(ca, cb)
    for side in (a, b):
        closed = of(mb.ClosedEvent, events(side))
        assert len(closed) == 1
        assert closed[0].mood == "scary"
        assert isinstance(closed[0].error, WrongCodeError)
        assert "wrong code" in str(closed[0].error)


def test_duplicate_and_replayed_messages_are_delivered_once_in_order() -> None:
    server = FakeServer()
    a, b = engine(7), engine(8)
    ca, cb = server.connect(a), server.connect(b)
    a.set_code("5-a-b")
    b.set_code("5-a-b")
    pump(ca, cb)
    events(a), events(b)
    for n in range(3):
        a.send(f"m{n}".encode())
    # hold b's inbox, then deliver it shuffled and doubled
    for frame in a.frames_to_send():
        ca.handle(frame)
    held = [m for m in cb.inbox if m.get("type") == "message"]
    cb.inbox = [m for m in cb.inbox if m.get("type") != "message"]
    cb.inbox.extend(reversed(held + held))
    pump(ca, cb)
    assert [e.data for e in of(mb.Received, events(b))] == [b"m0", b"m1", b"m2"]


def test_reconnect_resends_unechoed_adds_and_loses_nothing() -> None:
    server = FakeServer()
    a, b = engine(9), engine(10)
    ca = server.connect(a, now=0.0)
    a.set_code("8-x-y")
    # a's pake goes out but the connection drops before anything comes back
    frames = a.frames_to_send()
    for frame in frames:
        ca.handle(frame)
    ca.inbox.clear()
    events(a)
    ca.drop(now=10.0)
    assert a.link is mb.Link.WAITING
    assert a.next_deadline() == pytest.approx(11.0)
    assert events(a) == [mb.Reconnecting(retry_in=1.0, give_up_in=120.0, attempt=1)]
    a.handle_timer(10.5)
    assert a.next_event() is None  # not yet
    a.handle_timer(11.0)
    assert isinstance(a.next_event(), mb.ConnectNow)
    ca2 = server.connect(a, now=11.0)
    a.send(b"after-reconnect")
    cb = server.connect(b)
    b.set_code("8-x-y")
    pump(ca2, cb)
    eb = events(b)
    assert [e.data for e in of(mb.Received, eb)] == [b"after-reconnect"]
    ea = events(a)
    assert len(of(mb.KeyEstablished, ea)) == 1
    assert a.stage is mb.Stage.CONFIRMED
    # the second connection re-bound with the same side and claimed again
    binds = [m for side, m in server.log if side == a.side and m["type"] == "bind"]
    assert len(binds) == 2 and binds[0]["side"] == binds[1]["side"]


def test_reconnect_backoff_doubles_up_to_a_cap() -> None:
    rng = random.Random(11)
    a = mb.Mailbox(APPID, "a" * 10, rng.randbytes, {}, timeouts=mb.Timeouts(reconnect=1e6))
    a.connected(0.0)
    now = 0.0
    delays = []
    for _ in range(9):
        a.connection_lost(now)
        deadline = a.next_deadline()
        delays.append(deadline - now)
        a.handle_timer(deadline)
        assert [type(e) for e in events(a)] == [mb.Reconnecting, mb.ConnectNow]
        now = deadline
    assert delays[:4] == [1.0, 2.0, 4.0, 8.0]
    assert max(delays) == mb.RECONNECT_MAX_DELAY


def flap(a: mb.Mailbox, server: FakeServer, now: float, up_for: float) -> Conn:
    """One connection that opens, gets its welcome, and is closed ``up_for`` s later."""
    conn = server.connect(a, now=now)
    pump(conn)
    conn.drop(now=now + up_for)
    return conn


def run_out(a: mb.Mailbox, now: float, on_connect: Callable[[float], None]) -> tuple[
        float, list[mb.Event]]:
    """Drive ``a`` by its deadlines until it closes; ``on_connect(now)`` plays each attempt.
    Returns when it closed and every event it gave."""
    seen = events(a)
    while a.stage is not mb.Stage.CLOSED:
        deadline = a.next_deadline()
        assert deadline is not None and deadline >= now
        now = deadline
        a.handle_timer(now)
        evs = events(a)
        if of(mb.ConnectNow, evs):
            on_connect(now)
            evs += events(a)
        seen += evs
    return now, seen


def test_a_server_that_closes_every_connection_is_backed_off_and_given_up_on() -> None:
    """Issue 27 item 21: each welcome used to count as a recovery, so a server that closed
    every connection right after it was retried once a second for ever, silently."""
    server = FakeServer()
    a = engine(31)
    a.set_code("5-x-y")
    flap(a, server, 0.0, 0.01)
    now, seen = run_out(a, 0.0, lambda t: flap(a, server, t, 0.01))
    retries = of(mb.Reconnecting, seen)
    assert [r.retry_in for r in retries] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0]
    assert [r.attempt for r in retries] == [1, 2, 3, 4, 5, 6, 7]
    assert now == pytest.approx(120.01)  # Timeouts.reconnect after the first loss, not later
    closed = of(mb.ClosedEvent, seen)[0]
    assert isinstance(closed.error, ServerUnreachableError)
    assert "closed our connection right after accepting it, 7 times in a row" in str(
        closed.error)
    assert a.next_deadline() is None


def test_a_server_gone_for_good_is_given_up_on_at_the_reconnect_limit() -> None:
    """Issue 27 item 20: a mailbox that died for good was retried for ever (official too)."""
    rng = random.Random(32)
    a = mb.Mailbox(APPID, "b" * 10, rng.randbytes, {}, timeouts=mb.Timeouts(reconnect=20.0))
    server = FakeServer()
    server.connect(a, now=0.0).drop(now=100.0)
    assert events(a)[-1] == mb.Reconnecting(retry_in=1.0, give_up_in=20.0, attempt=1)
    now, seen = run_out(a, 100.0, lambda t: a.connection_lost(t + 0.5))  # each one refused
    assert now == pytest.approx(120.0)
    closed = of(mb.ClosedEvent, seen)[0]
    assert "could not get it back within 20 s (4 attempts)" in str(closed.error)


def test_a_connection_that_lasted_starts_the_backoff_over() -> None:
    server = FakeServer()
    a = engine(33)
    flap(a, server, 0.0, 0.01)
    a.handle_timer(1.01)
    flap(a, server, 1.01, 0.01)
    assert a.next_deadline() == pytest.approx(1.02 + 2.0)
    a.handle_timer(3.02)
    flap(a, server, 3.02, mb.STABLE_CONNECTION)  # a working connection, lost later
    assert events(a)[-1] == mb.Reconnecting(retry_in=1.0, give_up_in=120.0, attempt=1)
    assert a.next_deadline() == pytest.approx(3.02 + mb.STABLE_CONNECTION + 1.0)


def test_first_connection_failure_is_fatal_and_clear() -> None:
    a = engine(12)
    a.connection_lost(0.0, attempt="ws://example.invalid:4000/v1: DNS lookup failed")
    evs = events(a)
    closed = of(mb.ClosedEvent, evs)
    assert isinstance(closed[0].error, ServerUnreachableError)
    assert str(closed[0].error) == ("cannot reach the mailbox server "
                                    "ws://example.invalid:4000/v1: DNS lookup failed")
    assert a.next_deadline() is None


def test_welcome_error_is_unwelcome() -> None:
    server = FakeServer(welcome={"error": "go away"})
    a = engine(13)
    ca = server.connect(a)
    pump(ca)
    closed = of(mb.ClosedEvent, events(a))[0]
    assert closed.mood == "unwelcome"
    assert isinstance(closed.error, UnwelcomeError)
    assert "go away" in str(closed.error)


def test_motd_is_reported() -> None:
    server = FakeServer(welcome={"motd": "be nice", "current_cli_version": "0.24.0"})
    a = engine(14)
    ca = server.connect(a)
    pump(ca)
    assert of(mb.WelcomeEvent, events(a)) == [mb.WelcomeEvent("be nice", "0.24.0")]


def test_your_address_is_reported_and_replaced_on_reconnect() -> None:
    """Server 0.8's ``your-address`` reaches the event and the engine (the hole punch's
    public address); a reconnect forgets it until the new welcome says it again."""
    server = FakeServer(welcome={"your-address": {"ipv4": "198.19.0.2", "port": 40123}})
    a = engine(15)
    ca = server.connect(a)
    pump(ca)
    seen = messages.SeenAddress("198.19.0.2", 40123)
    assert of(mb.WelcomeEvent, events(a)) == [mb.WelcomeEvent(None, None, seen)]
    assert a.your_address == seen
    ca.drop(1.0)
    a.handle_timer(100.0)  # past the reconnect delay
    a.connected(100.0)
    assert a.your_address is None


@pytest.mark.parametrize(("value", "expected"), [
    ({"ipv6": "2001:db8::7", "port": 5}, messages.SeenAddress("2001:db8::7", 5)),
    ({"ipv6": "::ffff:198.19.0.3", "port": 6}, messages.SeenAddress("198.19.0.3", 6)),
    ({"ipv4": "198.19.0.3", "port": "6"}, messages.SeenAddress("198.19.0.3", 6)),
    ({"ipv4": "2001:db8::7", "port": 5}, None),
    ({"ipv4": "not an address", "port": 5}, None),
    ({"ipv4": "198.19.0.3", "port": 0}, None),
    ({"ipv4": "198.19.0.3", "port": True}, None),
    ({"ipv4": "198.19.0.3"}, None),
    ({"port": 5}, None),
    ("198.19.0.3:5", None),
    (None, None),
])
def test_your_address_is_parsed_leniently(value: object, expected: object) -> None:
    assert messages.parse_your_address(value) == expected


def test_crowded_nameplate_is_a_clear_server_error() -> None:
    server = FakeServer()
    engines = [engine(20 + i) for i in range(3)]
    conns = [server.connect(e) for e in engines]
    for e in engines:
        e.set_code("3-p-q")
    pump(*conns)
    closed = of(mb.ClosedEvent, events(engines[2]))[0]
    assert isinstance(closed.error, ServerError)
    assert "crowded" in str(closed.error)


@pytest.mark.parametrize(
    "frame",
    [b"\xff\xfe not utf-8", "not json", "[1, 2]", '{"no": "type"}',
     '{"type": "message", "side": "x", "phase": "0", "body": "zz"}',
     '{"type": "message", "side": "\u00e9", "phase": "0", "body": "00"}'],
)
def test_garbage_from_the_server_fails_with_a_protocol_error(frame: str | bytes) -> None:
    a = engine(30)
    a.connected(0.0)
    a.frame_received(frame, 0.0)
    closed = of(mb.ClosedEvent, events(a))[0]
    assert isinstance(closed.error, ProtocolError)
    assert closed.mood == "errory"


def test_oversized_frame_is_rejected() -> None:
    a = engine(31)
    a.connected(0.0)
    a.frame_received("x" * (mb.messages.MAX_FRAME_CHARS + 1), 0.0)
    closed = of(mb.ClosedEvent, events(a))[0]
    assert "oversized" in str(closed.error)


def test_an_oversized_message_after_the_key_is_refused_and_the_peer_can_be_told() -> None:
    """Issue 27 item 22: official senders set no limit and wait for an answer to any text;
    a message too big to read leaves the wormhole open, so the receiver answers it."""
    server = FakeServer()
    a, b = engine(41), engine(42)
    ca, cb = server.connect(a), server.connect(b)
    a.set_code("7-x-y")
    b.set_code("7-x-y")
    pump(ca, cb)
    events(a)
    events(b)
    assert a.stage is mb.Stage.CONFIRMED
    a.frame_received("x" * (mb.messages.MAX_FRAME_CHARS + 1), 0.0)
    [refused] = events(a)
    assert isinstance(refused, mb.Refused) and "more than this receiver takes" in str(
        refused.error)
    assert "message too big for this receiver (over 50.3 MB)" in refused.error.reply
    assert a.stage is mb.Stage.CONFIRMED
    a.send(refused.error.reply.encode())
    pump(ca, cb)
    assert [e.data for e in of(mb.Received, events(b))] == [refused.error.reply.encode()]


def test_peer_messages_before_our_code_are_kept_until_we_have_it() -> None:
    server = FakeServer()
    a, b = engine(40), engine(41)
    ca, cb = server.connect(a), server.connect(b)
    a.set_code("6-slow-typist")
    a.send(b"hi")
    pump(ca)
    b.claim_nameplate("6")  # completion claims as soon as "6-" is typed
    pump(ca, cb)
    assert not of(mb.KeyEstablished, events(b))
    b.set_code("6-slow-typist")
    pump(ca, cb)
    assert [e.data for e in of(mb.Received, events(b))] == [b"hi"]


def test_close_before_any_peer_is_lonely_and_releases_the_nameplate() -> None:
    server = FakeServer()
    a = engine(50)
    ca = server.connect(a)
    a.set_code("9-alone-here")
    pump(ca)
    a.close()
    pump(ca)
    evs = events(a)
    assert of(mb.ClosedEvent, evs) == [mb.ClosedEvent("lonely", None)]
    assert not of(mb.CodeConsumed, evs)  # nobody used the code
    kinds = [m["type"] for side, m in server.log if side == a.side]
    assert "release" in kinds and "close" in kinds


def test_illegal_transition_is_a_failed_lookup() -> None:
    with pytest.raises(RuntimeError, match="illegal transition"):
        mb._move(mb.STAGE_MOVES, mb.Stage.CLOSED, "key")


def test_ping_pong() -> None:
    server = FakeServer()
    a = engine(60)
    ca = server.connect(a)
    a.ping(7)
    pump(ca)
    assert of(mb.PongEvent, events(a)) == [mb.PongEvent(7)]


# -- a wormhole-william peer in the 1-in-256 sessions where gospake2 derives another key --------
GO_CASE = (7, 183)  # SPAKE2 entropy bytes whose shared element K ends in a zero byte


class GoStylePake(key.Pake):
    """Stands in for wormhole-william: compact JSON, and the key gospake2 0.2 derives."""

    def start(self) -> bytes:
        return json.dumps(json.loads(super().start()), separators=(",", ":")).encode()

    def finish(self, body: bytes) -> bytes:
        standard = super().finish(body)
        go_key, self.gospake2_key = self.gospake2_key, None
        return go_key or standard


def engine_with_entropy(seed: int, spake_byte: int) -> mb.Mailbox:
    """An engine whose SPAKE2 entropy (the only 64-byte request) is one repeated byte."""
    rng = random.Random(seed)

    def random_bytes(n: int) -> bytes:
        return bytes([spake_byte]) * n if n == 64 else rng.randbytes(n)

    return mb.Mailbox(APPID, rng.randbytes(5).hex(), random_bytes, {})


def set_code_as_go(engine_: mb.Mailbox, code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(mb.key, "Pake", GoStylePake)
        engine_.set_code(code)


def version_adds(server: FakeServer) -> list[str]:
    return [side for side, m in server.log if m["type"] == "add" and m["phase"] == "version"]


@pytest.mark.parametrize("hilltop_first", [True, False], ids=["hilltop_first", "go_first"])
def test_go_peer_with_trailing_zero_k_gets_its_own_key(
        monkeypatch: pytest.MonkeyPatch, hilltop_first: bool) -> None:
    server = FakeServer()
    ours, go = engine_with_entropy(20, GO_CASE[0]), engine_with_entropy(21, GO_CASE[1])
    c_ours, c_go = server.connect(ours), server.connect(go)
    if hilltop_first:
        ours.set_code("7-guitarist-revenge")
        pump(c_ours, c_go)
        set_code_as_go(go, "7-guitarist-revenge", monkeypatch)
    else:  # the Go peer's pake and version are waiting in the mailbox when we join
        set_code_as_go(go, "7-guitarist-revenge", monkeypatch)
        pump(c_go)
        pump(c_ours, c_go)
        ours.set_code("7-guitarist-revenge")
    ours.send(b"to go")
    go.send(b"to hilltop")
    pump(c_ours, c_go)
    e_ours, e_go = events(ours), events(go)
    assert ours.stage is mb.Stage.CONFIRMED and go.stage is mb.Stage.CONFIRMED
    assert ours.shared_key == go.shared_key
    assert [e.data for e in of(mb.Received, e_go)] == [b"to go"]
    assert [e.data for e in of(mb.Received, e_ours)] == [b"to hilltop"]
    assert of(mb.KeyEstablished, e_ours)[0].verifier == of(mb.KeyEstablished, e_go)[0].verifier
    assert version_adds(server) == [go.side, ours.side]  # ours waited for the Go peer's


def test_go_peer_key_differs_from_the_standard_one_in_this_case(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards the test above: without the second candidate the two sides would disagree."""
    a = key.Pake("7-guitarist-revenge", APPID, lambda n: bytes([GO_CASE[0]]) * n)
    b = GoStylePake("7-guitarist-revenge", APPID, lambda n: bytes([GO_CASE[1]]) * n)
    assert a.finish(b.start()) != b.finish(a.start())


def test_two_hilltops_with_trailing_zero_k_do_not_wait_for_each_other() -> None:
    server = FakeServer()
    a, b = engine_with_entropy(22, GO_CASE[0]), engine_with_entropy(23, GO_CASE[1])
    ca, cb = server.connect(a), server.connect(b)
    a.set_code("7-guitarist-revenge")
    b.set_code("7-guitarist-revenge")
    pump(ca, cb)
    assert a.stage is mb.Stage.CONFIRMED and b.stage is mb.Stage.CONFIRMED
    assert a._pake is not None and a._pake.gospake2_key is not None  # the case is the real one


def test_go_style_peer_with_wrong_code_is_a_wrong_code(monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeServer()
    ours, go = engine_with_entropy(24, GO_CASE[0]), engine_with_entropy(25, GO_CASE[1])
    c_ours, c_go = server.connect(ours), server.connect(go)
    ours.set_code("7-guitarist-revenge")
    set_code_as_go(go, "7-guitarist-revengf", monkeypatch)
    pump(c_ours, c_go)
    closed = of(mb.ClosedEvent, events(ours))
    assert len(closed) == 1 and isinstance(closed[0].error, WrongCodeError)


def test_code_is_consumed_once_the_peer_came_and_the_server_released_it() -> None:
    """Both sides learn the nameplate is spent (the CLI's sender says so, as official does)."""
    server = FakeServer()
    a, b = engine(60), engine(61)
    ca = server.connect(a)
    a.allocate(2)
    pump(ca)
    code = of(mb.CodeReady, events(a))[0].code
    assert not of(mb.CodeConsumed, events(a))
    cb = server.connect(b)
    b.set_code(code)
    pump(ca, cb)
    assert of(mb.CodeConsumed, events(a)) == [mb.CodeConsumed()]
    assert of(mb.CodeConsumed, events(b)) == [mb.CodeConsumed()]
    a.close()
    b.close()
    pump(ca, cb)
    assert not of(mb.CodeConsumed, events(a) + events(b))


# --- a server that stops answering (issue 20, point 4) ------------------------------------------
def closed_error(a: mb.Mailbox) -> HilltopError | None:
    [closed] = of(mb.ClosedEvent, events(a))
    return closed.error


def test_no_welcome_is_fatal_after_the_welcome_timeout() -> None:
    a = engine(30)
    a.connected(5.0)
    a.set_code("4-x-y")
    a.frames_to_send()
    assert a.next_deadline() == pytest.approx(5.0 + mb.Timeouts().welcome)
    a.handle_timer(34.9)
    assert a.stage is not mb.Stage.CLOSED
    a.handle_timer(35.0)
    err = closed_error(a)
    assert isinstance(err, ServerError) and "sent no welcome within 30 s" in str(err)
    assert a.frames_to_send() == []  # nothing more for a server that does not listen
    assert a.next_deadline() is None


def test_a_claim_never_answered_is_fatal_and_its_clock_starts_when_asked() -> None:
    """The claim goes out at t=100 from set_code (an input without a time); the shell's next
    handle_timer(100) starts its 30 s, not the connection's t=0."""
    a = engine(31)
    a.connected(0.0)
    a.frame_received(json.dumps({"type": "welcome", "welcome": {}}), 0.0)
    assert a.next_deadline() is None
    a.set_code("4-x-y")
    a.handle_timer(100.0)
    assert a.next_deadline() == pytest.approx(130.0)
    a.frame_received(json.dumps({"type": "ack", "id": "abcd"}), 101.0)  # acks are not answers
    a.handle_timer(130.0)
    err = closed_error(a)
    assert isinstance(err, ServerError) and "did not answer our claim" in str(err)


def test_an_allocation_never_answered_is_fatal() -> None:
    a = mb.Mailbox(APPID, "abcdef0123", random.Random(32).randbytes,
                   timeouts=mb.Timeouts(welcome=1.0, reply=2.0, close=0.5))
    a.connected(0.0)
    a.allocate(2)
    a.frame_received(json.dumps({"type": "welcome", "welcome": {}}), 0.5)
    a.handle_timer(0.5)
    a.handle_timer(2.5)
    err = closed_error(a)
    assert isinstance(err, ServerError) and "within 2 s" in str(err)


def test_answers_in_time_leave_no_deadline() -> None:
    server = FakeServer()
    a = engine(33)
    ca = server.connect(a, now=0.0)
    a.set_code("4-x-y")
    a.handle_timer(0.0)
    pump(ca)
    assert a.next_deadline() is None
    a.handle_timer(1000.0)
    assert a.stage is mb.Stage.HAVE_CODE


def test_a_close_never_confirmed_ends_after_the_close_timeout_keeping_the_mood() -> None:
    server = FakeServer()
    a = engine(34)
    ca = server.connect(a, now=0.0)
    a.set_code("4-x-y")
    pump(ca)
    events(a)
    a.close("happy")
    a.handle_timer(50.0)
    assert a.frames_to_send()  # release and close went out; the server never answers
    assert a.next_deadline() == pytest.approx(60.0)
    a.handle_timer(60.0)
    [closed] = of(mb.ClosedEvent, events(a))
    assert closed.mood == "happy" and closed.error is None


def test_a_connection_the_server_broke_is_fatal_not_retried() -> None:
    server = FakeServer()
    a = engine(35)
    server.connect(a, now=0.0)
    a.set_code("4-x-y")
    broke = ProtocolError("the mailbox server sent a message over 16.8 MB")
    a.connection_lost(3.0, broke)
    [closed] = of(mb.ClosedEvent, events(a))
    assert closed.error is broke and closed.mood == "errory"  # the shell's reason, unchanged
    assert a.link is mb.Link.GONE and a.next_deadline() is None
    a.handle_timer(100.0)  # no reconnection however long we wait
    assert of(mb.ConnectNow, events(a)) == [] and a.link is mb.Link.GONE
    told = {json.loads(frame)["type"] for frame in a.frames_to_send()}
    assert told.isdisjoint({"release", "close"})  # nothing more for the server that broke
