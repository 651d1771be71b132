"""Inbound flow control of Dilation: a subchannel whose consumer is full pauses reading the L2
connection (as official's ``Inbound`` does), so what we hold stays bounded, and reading
resumes, in order and complete, once the consumer drains.

Pure half: :class:`hilltop.dilation.manager.L3`. Shell half: a real
:class:`hilltop.dilation.shell.Dilator` on a Clock, its generation's race replaced by one fake
L2 stream that, like TCP, hands over bytes only while it is being read; the peer is a second
pure L3 writing 8 MiB into one subchannel.
"""

from __future__ import annotations

import hashlib
from typing import Any

from dilation_race import InstantRace
from twisted.internet import defer
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock

from hilltop.dilation import l2, wire
from hilltop.dilation import manager as m
from hilltop.dilation import records as r
from hilltop.dilation.shell import HINT_GATHER, NO_HINTS_START, Dilator

# -- the pure half ---------------------------------------------------------------------------------


def test_one_paused_subchannel_pauses_reading_until_all_resume() -> None:
    l3 = m.L3(True)
    l3.connection_made(0)
    a, b = l3.open("a"), l3.open("b")
    assert not l3.reading_paused
    l3.pause(a)
    l3.pause(b)
    assert l3.reading_paused
    l3.resume(a)
    assert l3.reading_paused  # b still holds it
    l3.resume(b)
    assert not l3.reading_paused


def test_closing_a_paused_subchannel_releases_the_connection() -> None:
    l3 = m.L3(True)
    l3.connection_made(0)
    local, remote = l3.open("a"), l3.open("b")
    l3.pause(local)
    l3.close(local)  # our consumer went away: what still comes for it is dropped, not waited on
    assert not l3.reading_paused
    l3.pause(remote)
    l3.record_received(r.Close(0, remote), 1.0)  # the peer closed it
    assert not l3.reading_paused
    l3.pause(99)  # not a subchannel: nothing to wait for
    assert not l3.reading_paused


def test_a_leader_that_does_not_read_does_not_count_missing_pongs() -> None:
    """While we do not read, the peer's pongs sit unread in the connection: no reason to call
    the path dead. Once reading resumes, the usual two intervals apply again."""
    l3 = m.L3(True, ping_interval=10.0)
    l3.connection_made(0)
    scid = l3.open("a")
    l3.pause(scid)
    for now in range(0, 200, 10):
        l3.handle_timer(float(now))
    assert not [e for e in l3.events() if isinstance(e, m.DropConnection)]
    l3.resume(scid)
    for now in range(200, 240, 10):
        l3.handle_timer(float(now))
    assert [e for e in l3.events() if isinstance(e, m.DropConnection)]


# -- the shell half --------------------------------------------------------------------------------
class PlainCodec:
    """The record codec without Noise (the shell only frames and parses through it)."""

    def __init__(self) -> None:
        self.framer = l2.Framer()

    def encode(self, rec: r.Record) -> bytes:
        return l2.frame(r.encode(rec))

    def feed(self, data: bytes) -> list[r.Record]:
        self.framer.feed(data)
        out = []
        while (f := self.framer.take()) is not None:
            out.append(r.parse(f))
        return out


class Wire:
    """One L2 connection: the peer's bytes wait here until our side reads them, a read at a
    time (64 KiB, a TCP read), as a kernel buffer and the peer's own flow control would."""

    READ = 64 * 1024

    def __init__(self, peer: m.L3) -> None:
        self.peer = peer
        self.codec = PlainCodec()
        self.waiting = bytearray()  # written by the peer, not yet read by us
        self.reading = False
        self.pauses = 0
        self.resumes = 0
        self.on_data: Any = None

    # ByteStream, as the Dilator uses it
    def pause_reading(self) -> None:
        self.reading = False
        self.pauses += 1

    def resume_reading(self) -> None:
        self.reading = True
        self.resumes += 1

    def write(self, data: bytes) -> None:  # our records (acks) reach the peer at once
        for rec in PlainCodec().feed(data):
            self.peer.record_received(rec, 0.0)

    def close(self) -> None:
        pass

    def when_closed(self) -> Any:  # the Dilator waits for its stream to close when it stops
        from twisted.internet import defer

        return defer.succeed(None)

    def pump(self) -> None:
        """Carry the peer's records to us for as long as we read."""
        self.waiting += b"".join(self.codec.encode(rec) for rec in self.peer.records_to_send())
        while self.reading and self.waiting:
            chunk = bytes(self.waiting[:self.READ])
            del self.waiting[:self.READ]
            self.on_data(chunk)


class Won:
    def __init__(self, stream: Wire) -> None:
        self.stream = stream
        self.description = "fake"
        self.shake = self

    def codec(self) -> PlainCodec:
        return PlainCodec()

    def hand_over(self, on_data: Any, on_lost: Any) -> None:
        self.stream.on_data = on_data


Race = InstantRace


class SlowSocket:
    """A local TCP socket's transport as a consumer: above HIGH bytes unwritten it pauses its
    producer (Twisted's FileDescriptor does so above its bufferSize), and resumes it once
    the reader took everything."""

    HIGH = 256 * 1024

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.most = 0
        self.producer: Any = None
        self.paused = False

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        self.producer = producer

    def write(self, data: bytes) -> None:
        self.buffer += data
        self.most = max(self.most, len(self.buffer))
        if len(self.buffer) > self.HIGH and not self.paused:
            self.paused = True
            self.producer.pauseProducing()

    def read_all(self) -> bytes:
        out = bytes(self.buffer)
        self.buffer.clear()
        if self.paused:
            self.paused = False
            self.producer.resumeProducing()
        return out


class Forwarded(Protocol):
    """A subchannel spliced to a local socket whose reader is slow."""

    def __init__(self, socket: SlowSocket) -> None:
        self.socket = socket

    def connectionMade(self) -> None:
        self.socket.registerProducer(self.transport, True)

    def dataReceived(self, data: bytes) -> None:
        self.socket.write(data)


def test_a_slow_local_reader_pauses_l2_and_memory_stays_bounded() -> None:
    clock = Clock()
    peer = m.L3(False)  # the follower: our side "ff..." leads
    wire_ = Wire(peer)
    dilator = Dilator(clock, lambda _data: None, bytes(32), "ged",
                      lambda *_a: Race(Won(wire_)), side="ff" * 8)
    dilator.got_message(wire.encode(wire.Please("00" * 8)))
    clock.advance(NO_HINTS_START)
    assert dilator.l3 is not None and wire_.reading  # connected and read at once
    peer.connection_made(0.0)
    socket = SlowSocket()
    dilator.listen("fwd", Factory.forProtocol(lambda: Forwarded(socket)))

    total = 8 << 20
    sent = bytes(range(256)) * (total // 256)
    scid = peer.open("fwd")
    peer.write(scid, sent)
    wire_.pump()

    # the consumer filled up: we stopped reading, and nearly all of it waits at the peer
    assert wire_.pauses == 1 and not wire_.reading
    held = socket.most
    assert held <= SlowSocket.HIGH + Wire.READ + m.CHUNK, held
    assert len(wire_.waiting) >= total - (SlowSocket.HIGH + Wire.READ + m.CHUNK)
    wire_.pump()  # nothing more is read while paused
    assert socket.most == held

    got = hashlib.sha256()
    taken = 0
    for _ in range(10_000):  # the local reader drains, a little at a time; each resumes L2
        data = socket.read_all()
        got.update(data)
        taken += len(data)
        wire_.pump()
        if taken == total:
            break
    assert taken == total
    assert got.digest() == hashlib.sha256(sent).digest()
    assert socket.most <= SlowSocket.HIGH + Wire.READ + m.CHUNK
    assert wire_.reading and wire_.pauses > 1
    assert peer.unacked_bytes == 0  # every record was acked once read
    dilator.stop()


def test_a_new_connection_is_not_read_while_a_consumer_is_still_full() -> None:
    """As official's ``use_connection``: a generation that starts during a pause starts
    paused, so the re-sent backlog does not pour into the full consumer."""
    clock = Clock()
    peer = m.L3(False)
    first, second = Wire(peer), Wire(peer)
    wires = iter([first, second])
    dilator = Dilator(clock, lambda _data: None, bytes(32), "ged",
                      lambda *_a: Race(Won(next(wires))), side="ff" * 8)
    dilator.got_message(wire.encode(wire.Please("00" * 8)))
    clock.advance(NO_HINTS_START)
    peer.connection_made(0.0)
    socket = SlowSocket()
    dilator.listen("fwd", Factory.forProtocol(lambda: Forwarded(socket)))
    scid = peer.open("fwd")
    peer.write(scid, b"x" * (1 << 20))
    first.pump()
    assert not first.reading
    # the path breaks; the next generation comes up while the consumer is still full
    peer.connection_lost()
    dilator._lost(first, "test")
    dilator.got_message(wire.encode(wire.Reconnecting()))
    clock.advance(NO_HINTS_START)
    assert dilator.generation_count == 2
    assert not second.reading and second.resumes == 0  # never read, not even for a moment
    peer.connection_made(0.0)
    second.pump()
    assert socket.most <= SlowSocket.HIGH + Wire.READ + m.CHUNK
    socket.read_all()
    assert second.reading
    dilator.stop()


class SlowHintsRace(Race):
    """A race whose own hints take a while (listening sockets, STUN) and that counts its
    starts."""

    def __init__(self, won: Won) -> None:
        super().__init__(won)
        self.hints: defer.Deferred[list[Any]] = defer.Deferred()
        self.started = 0

    def our_hints(self) -> defer.Deferred[list[Any]]:
        return self.hints

    def connect(self, hints: Any) -> defer.Deferred[Won]:
        self.started += 1
        return super().connect(hints)


def test_peer_hints_before_ours_start_the_race_after_the_short_gather() -> None:
    """The peer's hints came before ours were ready (the usual order on a fast peer): the race
    starts HINT_GATHER after ours, not NO_HINTS_START (every direct durable transfer waited
    5 s that way)."""
    clock = Clock()
    race = SlowHintsRace(Won(Wire(m.L3(False))))
    dilator = Dilator(clock, lambda _data: None, bytes(32), "ged", lambda *_a: race,
                      side="ff" * 8)
    dilator.got_message(wire.encode(wire.Please("00" * 8)))
    hint = {"type": "direct-tcp-v1", "hostname": "127.0.0.1", "port": 4001, "priority": 0.0}
    dilator.got_message(wire.encode(wire.ConnectionHints([hint])))
    clock.advance(1.0)
    race.hints.callback([])
    clock.advance(HINT_GATHER + 0.01)
    assert race.started == 1
    assert dilator.is_connected()
    dilator.stop()


def test_flushes_keep_the_ping_timer_while_its_deadline_stays() -> None:
    """Every flush asked for L3's next deadline and re-armed the timer (a cancel and a
    callLater twice per record of a transfer); the timer now stays while the deadline does,
    and still fires the ping."""
    clock = Clock()
    peer = m.L3(False)
    wire_ = Wire(peer)
    dilator = Dilator(clock, lambda _data: None, bytes(32), "ged",
                      lambda *_a: Race(Won(wire_)), side="ff" * 8, ping_interval=10.0)
    dilator.got_message(wire.encode(wire.Please("00" * 8)))
    clock.advance(NO_HINTS_START)
    peer.connection_made(0.0)
    first = list(clock.getDelayedCalls())  # a copy: Clock hands out its live list
    for _ in range(5):
        dilator.flush()
    assert clock.getDelayedCalls() == first
    assert len(first) == 1
    clock.advance(10.0)  # the second ping goes out (the peer answers it), the next is armed
    assert r.Pong((2).to_bytes(4, "big")) in peer.records_to_send()
    later = clock.getDelayedCalls()
    assert len(later) == 1 and later[0] is not first[0]
    dilator.stop()
