"""How Dilation ends: a side that stops after a completed transfer gets its last records (the
ACKs of the peer's final data, our answering CLOSE) to the peer before its L2 connection goes.

Written is not delivered: over Tor, what the ending side wrote sat in its local tor process
when the connection closed, and the socket, closed with the peer's next bytes unread, was
reset; the peer never got our CLOSE and waited for it (integration/test_tor_network.py's
durable test). The shell therefore keeps the connection read until the peer acknowledged
our last record, then closes it gracefully, then stops the race (whose transports may carry
the connection); each step within a deadline. As official 0.24's manager, the generations
go CONNECTED -> STOPPING -> STOPPED (on the connection's loss), with no reconnect.

The fake L2 connection below keeps what we write *in flight* until :meth:`Path.deliver`, and
loses it if it is closed first (the worst case of the Tor reset).
"""

from __future__ import annotations

from typing import Any

from dilation_race import InstantRace
from twisted.internet import defer
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock

from hilltop.dilation import l2, wire
from hilltop.dilation import manager as m
from hilltop.dilation import records as r
from hilltop.dilation.shell import NO_HINTS_START, STOP_ACK_WAIT, STOP_CLOSE_WAIT, Dilator


def _encode(rec: r.Record) -> bytes:
    return l2.frame(r.encode(rec))


class PlainCodec:
    """The record codec without Noise (the shell only frames and parses through it)."""

    def __init__(self) -> None:
        self.framer = l2.Framer()

    def encode(self, rec: r.Record) -> bytes:
        return _encode(rec)

    def feed(self, data: bytes) -> list[r.Record]:
        self.framer.feed(data)
        out = []
        while (f := self.framer.take()) is not None:
            out.append(r.parse(f))
        return out


class Path:
    """One L2 connection whose bytes take a while: ours wait in flight until delivered."""

    def __init__(self, peer: m.L3) -> None:
        self.peer = peer
        self.in_flight = bytearray()
        self.closed = self.aborted = False
        self.lost_in_flight = 0
        self.held = b""  # the peer's bytes that came with the handshake
        self.on_data: Any = None
        self.on_lost: Any = None
        self._closed: defer.Deferred[None] = defer.Deferred()

    # the ByteStream the Dilator uses
    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.in_flight += data

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
        self.lost_in_flight += len(self.in_flight)  # reset: what was not forwarded is gone
        self.in_flight.clear()

    def abort(self) -> None:
        self.aborted = True
        self.close()
        self.gone()

    def when_closed(self) -> defer.Deferred[None]:
        d: defer.Deferred[None] = defer.Deferred()
        self._closed.addBoth(lambda x: (d.callback(None), x)[1])
        return d

    # the test's side
    def deliver(self) -> None:
        """What we wrote reaches the peer, and what the peer answers reaches us."""
        codec = PlainCodec()
        data, self.in_flight = bytes(self.in_flight), bytearray()
        for rec in codec.feed(data):
            self.peer.record_received(rec, 0.0)
        answer = b"".join(_encode(rec) for rec in self.peer.records_to_send())
        if answer and not self.closed:
            self.on_data(answer)

    def gone(self) -> None:
        if not self._closed.called:
            self._closed.callback(None)
            self.on_lost("connection lost")


class Won:
    def __init__(self, path: Path) -> None:
        self.stream = path
        self.description = "fake"
        self.shake = self

    def codec(self) -> PlainCodec:
        return PlainCodec()

    def hand_over(self, on_data: Any, on_lost: Any) -> None:
        """As the runner's winning stream: the bytes held since the handshake go first."""
        self.stream.on_data, self.stream.on_lost = on_data, on_lost
        held, self.stream.held = self.stream.held, b""
        if held:
            on_data(held)


class Race(InstantRace):
    def __init__(self, won: Won) -> None:
        super().__init__(won)
        self.stopped_with_path_open: bool | None = None

    def stop(self) -> defer.Deferred[None]:
        # an onion service or a relay session of this race may carry the path
        self.stopped_with_path_open = not self.won.stream.closed
        return defer.succeed(None)


class Sent(list[bytes]):
    def messages(self) -> list[Any]:
        return [wire.parse(data) for data in self]


def assert_stopped_for_good(clock: Clock, dilator: Dilator, sent: Sent) -> None:
    """The stop's end state: STOPPED, no ``reconnect`` sent, no timer left behind."""
    assert dilator.gens.state is m.Gen.STOPPED
    assert not any(isinstance(msg, wire.Reconnect) for msg in sent.messages())
    assert not clock.getDelayedCalls()


def a_finished_transfer() -> tuple[Clock, Dilator, Path, Race, m.L3, Sent]:
    """We (the leader, as a sender) opened a subchannel; the peer wrote its final data and
    closed it; we acked both and answered with our CLOSE, which is still in flight."""
    clock = Clock()
    peer = m.L3(False)
    path = Path(peer)
    race = Race(Won(path))
    sent = Sent()
    dilator = Dilator(clock, sent.append, bytes(32), "ged", lambda *_a: race, side="ff" * 8)
    dilator.got_message(wire.encode(wire.Please("00" * 8)))
    clock.advance(NO_HINTS_START)
    assert dilator.is_connected()
    peer.connection_made(0.0)
    ended: list[str] = []

    class Transfer(Protocol):
        def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
            ended.append("closed")

    dilator.open("transfer", Factory.forProtocol(Transfer))
    path.deliver()  # the peer has our OPEN (and answered our first ping)
    (scid,) = [e.scid for e in peer.events() if isinstance(e, m.Opened)]
    peer.write(scid, b"final ack")
    peer.close(scid)
    path.on_data(b"".join(_encode(rec) for rec in peer.records_to_send()))
    assert ended == ["closed"]  # the peer's CLOSE closed it for us
    assert dilator.l3 is not None and dilator.l3.owes_acks  # our CLOSE: in flight
    assert path.in_flight
    return clock, dilator, path, race, peer, sent


def test_stop_closes_the_path_once_the_peer_acknowledged_our_last_records() -> None:
    clock, dilator, path, race, peer, sent = a_finished_transfer()
    stopped = dilator.stop()
    assert not path.closed and race.stopped_with_path_open is None  # still waiting
    assert dilator.gens.state is m.Gen.STOPPING
    path.deliver()  # the peer gets our ACKs and CLOSE and acks the CLOSE
    assert [e for e in peer.events() if isinstance(e, m.Closed)]
    assert not peer.owes_acks  # our ACKs reached it: it waits for nothing
    assert path.closed and not path.aborted and path.lost_in_flight == 0
    path.gone()  # the graceful close completes
    assert stopped.called
    assert race.stopped_with_path_open is False  # the race stopped after the path closed
    assert_stopped_for_good(clock, dilator, sent)


def test_a_silent_peer_holds_the_stop_only_until_its_deadlines() -> None:
    clock, dilator, path, race, _peer, sent = a_finished_transfer()
    stopped = dilator.stop()
    clock.advance(STOP_ACK_WAIT - 0.1)
    assert not path.closed
    clock.advance(0.1)  # no ACK in time: close anyway, gracefully
    assert path.closed and not path.aborted and not stopped.called
    clock.advance(STOP_CLOSE_WAIT)  # the close does not finish: abort
    assert path.aborted and stopped.called
    assert_stopped_for_good(clock, dilator, sent)


def test_a_path_lost_while_stopping_ends_the_stop_without_a_reconnect() -> None:
    clock, dilator, path, race, _peer, sent = a_finished_transfer()
    stopped = dilator.stop()
    path.gone()
    assert stopped.called and race.stopped_with_path_open is True  # nothing left to carry
    assert_stopped_for_good(clock, dilator, sent)


def test_stop_with_nothing_owed_closes_at_once() -> None:
    clock, dilator, path, race, peer, _sent = a_finished_transfer()
    path.deliver()  # the peer acked our CLOSE while the transfer was ending
    stopped = dilator.stop()
    assert path.closed and path.lost_in_flight == 0
    path.gone()
    assert stopped.called


def test_generations_stop_through_stopping_when_connected() -> None:
    gens = m.Generations("ff" * 8, "ged")
    gens.message(wire.Please("00" * 8))
    gens.connected()
    gens.actions()
    gens.stop()
    assert gens.state is m.Gen.STOPPING
    gens.message(wire.Reconnect())  # too late to reconnect
    gens.lost()
    assert gens.state is m.Gen.STOPPED and gens.actions() == []
    connecting = m.Generations("ff" * 8, "ged")
    connecting.message(wire.Please("00" * 8))
    connecting.stop()  # nothing to close: stopped at once
    assert connecting.state is m.Gen.STOPPED


def test_records_held_since_the_handshake_meet_a_connected_l3() -> None:
    """The peer's records re-sent on a new generation can arrive with its handshake: the
    runner hands them over at once. Read before the generation counted as connected, the
    peer's CLOSE was acked but our answering CLOSE, queued by an L3 not yet connected, was
    never written, and the transfer, ended by those records, stopped Dilation at once (seen
    in the durable Tor test: the sender's second generation never said "connected", its
    receiver waited for a CLOSE that never came)."""
    clock = Clock()
    peer = m.L3(True)  # the peer leads; we follow, as the sender in the Tor test
    first, second = Path(peer), Path(peer)
    races = [Race(Won(first)), Race(Won(second))]
    sent = Sent()
    dilator = Dilator(clock, sent.append, bytes(32), "ged", lambda *_a: races.pop(0),
                      side="00" * 8)
    dilator.got_message(wire.encode(wire.Please("ff" * 8)))
    clock.advance(NO_HINTS_START)
    peer.connection_made(0.0)
    stops: list[defer.Deferred[None]] = []

    class Transfer(Protocol):
        def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
            stops.append(dilator.stop())  # the transfer is done: the session closes

    dilator.open("transfer", Factory.forProtocol(Transfer))
    first.deliver()
    (scid,) = [e.scid for e in peer.events() if isinstance(e, m.Opened)]
    peer.write(scid, b"final ack")
    peer.close(scid)
    peer.records_to_send()  # written on the first path as it broke: lost
    first.gone()
    peer.connection_lost()
    dilator.got_message(wire.encode(wire.Reconnect()))  # the leader starts generation 1
    peer.connection_made(1.0)  # it re-sends its DATA and CLOSE with the handshake
    second.held = b"".join(_encode(rec) for rec in peer.records_to_send())
    clock.advance(NO_HINTS_START)
    assert dilator.generation_count == 2 and stops  # the held records ended the transfer
    second.deliver()
    assert [e for e in peer.events() if isinstance(e, m.Closed)]  # our CLOSE came
    assert not peer.owes_acks
    assert second.lost_in_flight == 0
    second.gone()
    assert stops[0].called and dilator.gens.state is m.Gen.STOPPED
