"""The L3 engine and the generation flow, two engines wired in memory."""

from __future__ import annotations

import pytest

from hilltop.dilation import manager as m
from hilltop.dilation import records as r
from hilltop.dilation import wire


def carry(src: m.L3, dst: m.L3, now: float = 0.0, lose: bool = False) -> int:
    """Deliver what ``src`` wants to send (or throw it away, as a dying connection does)."""
    out = src.records_to_send()
    if not lose:
        for rec in out:
            dst.record_received(r.parse(r.encode(rec)), now)
    return len(out)


def settle(a: m.L3, b: m.L3) -> None:
    while carry(a, b) + carry(b, a):
        pass


def received(engine: m.L3) -> bytes:
    return b"".join(e.data for e in engine.events() if isinstance(e, m.Received))


def test_open_write_close_both_ways() -> None:
    a, b = m.L3(True), m.L3(False)
    a.connection_made(0)
    b.connection_made(0)
    scid = a.open("echo")
    assert scid == 1
    a.write(scid, b"x" * (m.CHUNK * 2 + 5))
    settle(a, b)
    events = b.events()
    assert events[0] == m.Opened(1, "echo")
    assert sum(len(e.data) for e in events if isinstance(e, m.Received)) == m.CHUNK * 2 + 5
    assert a.unacked_bytes == 0
    b.write(1, b"back")
    a.close(scid)
    settle(a, b)
    assert received(a) == b"back"
    assert m.Closed(1) in b.events()
    assert not a.is_open(1) and not b.is_open(1)
    assert b.open("other") == 2  # the follower's ids are even


def test_a_close_is_owed_until_the_peer_acknowledges_it() -> None:
    """A subchannel's close waits for a path only while this is true (DilatedChannel)."""
    a, b = m.L3(True), m.L3(False)
    a.connection_made(0)
    b.connection_made(0)
    scid = a.open("echo")
    settle(a, b)
    assert not a.owes_acks
    a.write(scid, b"the final ack")
    a.close(scid)
    assert a.owes_acks
    carry(a, b, lose=True)
    a.connection_lost()
    assert a.owes_acks  # lost with the path: still owed
    a.connection_made(1)
    b.connection_lost()
    b.connection_made(1)
    carry(a, b)
    carry(b, a)  # the peer's ACKs (and its CLOSE) come back
    assert not a.owes_acks


def test_records_lost_with_the_connection_are_resent_once() -> None:
    a, b = m.L3(True), m.L3(False)
    a.connection_made(0)
    b.connection_made(0)
    scid = a.open("stream")
    a.write(scid, b"first ")
    settle(a, b)
    a.write(scid, b"lost in flight ")
    carry(a, b, lose=True)  # the connection died with these on the wire
    a.connection_lost()
    b.connection_lost()
    a.write(scid, b"queued while down")
    a.connection_made(1)
    b.connection_made(1)
    settle(a, b)
    assert received(b) == b"first lost in flight queued while down"
    assert a.unacked_bytes == 0


def test_duplicates_after_reconnect_are_acked_and_dropped() -> None:
    a, b = m.L3(True), m.L3(False)
    a.connection_made(0)
    b.connection_made(0)
    scid = a.open("s")
    a.write(scid, b"once")
    carry(a, b)  # b got them, but its acks are lost
    b.records_to_send()
    a.connection_lost()
    a.connection_made(1)
    settle(a, b)
    assert received(b) == b"once"
    assert a.unacked_bytes == 0


def test_leader_drops_a_silent_connection_after_two_intervals() -> None:
    a = m.L3(True, ping_interval=10)
    a.connection_made(0)
    a.handle_timer(0)
    assert isinstance(a.records_to_send()[0], r.Ping)
    a.handle_timer(10)
    a.handle_timer(20)
    assert any(isinstance(e, m.DropConnection) for e in a.events())


def test_generations_leader_and_follower() -> None:
    lead = m.Generations("ff" * 8, "ged")
    follow = m.Generations("00" * 8, "ged")
    assert lead.actions() == [m.Send(wire.Please("ff" * 8, "ged"))]
    follow.actions()
    lead.message(wire.Please("00" * 8, "ged"))
    follow.message(wire.Please("ff" * 8, "ged"))
    assert lead.leader and not follow.leader
    assert lead.actions() == [m.StartGeneration(0)]
    follow.actions()
    lead.connected()
    follow.connected()
    lead.lost()
    assert lead.actions() == [m.Send(wire.Reconnect())]
    follow.message(wire.Reconnect())  # the follower still thought it was connected
    assert follow.actions() == [m.Drop()]
    follow.lost()
    assert follow.actions() == [m.Send(wire.Reconnecting()), m.StartGeneration(1)]
    lead.message(wire.ConnectionHints([{"type": "x"}]))  # stale: before reconnecting
    assert lead.actions() == []
    lead.message(wire.Reconnecting())
    assert lead.actions() == [m.StartGeneration(1)]


def test_equal_sides_are_refused() -> None:
    g = m.Generations("ab" * 8, "ged")
    with pytest.raises(wire.ProtocolError):
        g.message(wire.Please("ab" * 8, "ged"))


def test_bad_records_and_messages_are_named() -> None:
    with pytest.raises(r.BadDilationRecord):
        r.parse(b"\x09")
    with pytest.raises(r.BadDilationRecord):
        r.parse(b"\x03\x00\x00")
    assert r.parse(bytes.fromhex("03000002010000010070726f746f")) == r.Open(256, 513, "proto")
    with pytest.raises(wire.BadDilationMessage):
        wire.parse(b"[1]")
    assert wire.parse(b'{"type": "future"}') is None


def test_a_sealed_batch_of_a_durable_transfer_is_one_data_record() -> None:
    """A durable transfer writes 256 KiB of sealed records at a time: one DATA record, so one
    ACK (at 32 KiB records L3's work per record came eight times per batch)."""
    a, b = m.L3(True), m.L3(False)
    a.connection_made(0)
    b.connection_made(0)
    scid = a.open("hilltop-transfer-v1")
    settle(a, b)
    b.events()
    batch = bytes(range(256)) * 1024 + b"-" * 32  # 256 KiB of records and their overhead
    a.write(scid, batch)
    out = a.records_to_send()
    assert [type(rec) for rec in out] == [r.Data]
    for rec in out:
        b.record_received(rec, 0.0)
    assert received(b) == batch
    assert b.records_to_send() == [r.Ack(out[0].seqnum)]
    a.write(scid, b"x" * (m.CHUNK + 1))  # a bigger write is still cut
    assert [len(rec.data) for rec in a.records_to_send() if isinstance(rec, r.Data)] == [
        m.CHUNK, 1]
