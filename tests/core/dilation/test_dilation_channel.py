"""DilatedChannel: transit records on a subchannel, and the reconnect grace.

Two :class:`SubchannelStream` objects joined by an in-memory transport pair play the
subchannel (what L3 does under it is tests/core/test_dilation_manager.py's); a stand-in
dilator says when the L2 connection is lost and back; the clock is Twisted's ``task.Clock``.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import task
from twisted.python.failure import Failure

from hilltop.dilation.channel import (
    ABORT_WAIT,
    CLOSE_WAIT,
    DilatedChannel,
    ReconnectGraceExpired,
    SubchannelStream,
)
from hilltop.errors import TransitError
from hilltop.transit.records import SECRETBOX

TK = bytes(range(32))
GRACE = 30.0


class Pipe:
    """One side of an in-memory subchannel: what is written arrives at the other side."""

    def __init__(self, clock: task.Clock) -> None:
        self.clock = clock
        self.peer: Pipe | None = None
        self.protocol: Any = None
        self.producer: Any = None
        self.closed = False

    def write(self, data: bytes) -> None:
        assert self.peer is not None and not self.closed
        self.peer.protocol.dataReceived(data)

    def loseConnection(self) -> None:  # noqa: N802
        self.closed = True

    def registerProducer(self, producer: Any, streaming: bool) -> None:  # noqa: N802
        self.producer = producer

    def unregisterProducer(self) -> None:  # noqa: N802
        self.producer = None

    # the subchannel as a producer: pausing it stops reading the L2 connection
    paused = False

    def pauseProducing(self) -> None:  # noqa: N802
        self.paused = True

    def resumeProducing(self) -> None:  # noqa: N802
        self.paused = False


class FakeL3:
    owes_acks = True  # a record of ours waits for the peer's ACK


class FakeDilator:
    def __init__(self) -> None:
        self.path_watchers: list[Any] = []
        self.description = "relay tcp:127.0.0.1:4001"
        self.connected = True
        self.l3 = FakeL3()

    def is_connected(self) -> bool:
        return self.connected

    def path(self, description: str | None) -> None:
        self.connected = description is not None
        for watcher in list(self.path_watchers):
            watcher(description)


def pair(clock: task.Clock, dilator: FakeDilator, paths: list[str | None] | None = None
         ) -> tuple[DilatedChannel, DilatedChannel]:
    a, b = Pipe(clock), Pipe(clock)
    a.peer, b.peer = b, a
    sa, sb = SubchannelStream(clock), SubchannelStream(clock)
    for pipe, stream in ((a, sa), (b, sb)):
        pipe.protocol = stream
        stream.makeConnection(pipe)
    told = paths.append if paths is not None else None
    sender = DilatedChannel(clock, sa, dilator, "sender", TK, SECRETBOX, grace=GRACE,
                            on_path=told)
    receiver = DilatedChannel(clock, sb, FakeDilator(), "receiver", TK, SECRETBOX,
                              grace=GRACE)
    return sender, receiver


def received(channel: DilatedChannel) -> Any:
    out: list[Any] = []
    channel.receive_record().addBoth(out.append)
    return out[0] if out else None


def test_records_cross_both_ways_and_no_socket_is_lent() -> None:
    clock = task.Clock()
    sender, receiver = pair(clock, FakeDilator())
    sender.send_record(b"offer bytes")
    assert received(receiver) == b"offer bytes"
    receiver.send_record(b'{"ack": "ok"}')
    assert received(sender) == b'{"ack": "ok"}'
    assert sender.bulk() is sender
    assert sender.description == "relay tcp:127.0.0.1:4001 (dilated)"


def test_a_reconnect_within_the_grace_keeps_the_channel() -> None:
    clock, dilator, paths = task.Clock(), FakeDilator(), []
    sender, receiver = pair(clock, dilator, paths)
    dilator.path(None)
    clock.advance(GRACE - 1)
    dilator.path("relay tcp:127.0.0.1:4002")
    dilator.path("relay tcp:127.0.0.1:4002")  # told once per return, not per generation
    clock.advance(GRACE * 2)
    assert paths == [None, "relay tcp:127.0.0.1:4002"]
    assert sender.lost_because is None
    sender.send_record(b"still here")
    assert received(receiver) == b"still here"
    assert sender.description == "relay tcp:127.0.0.1:4002 (dilated)"


def test_the_grace_expires_with_its_own_error() -> None:
    clock, dilator = task.Clock(), FakeDilator()
    sender, _ = pair(clock, dilator)
    waiting = sender.receive_record()
    failures: list[Failure] = []
    waiting.addErrback(failures.append)
    dilator.path(None)
    clock.advance(GRACE - 0.5)
    assert not failures
    clock.advance(1)
    assert len(failures) == 1 and failures[0].check(ReconnectGraceExpired)
    assert "did not come back within 30 s" in str(failures[0].value)
    assert isinstance(sender.lost_because, ReconnectGraceExpired)
    with pytest.raises(TransitError):
        sender.send_record(b"too late")
    assert dilator.path_watchers == []  # a finished channel is no longer told


def test_no_first_connection_within_the_grace_also_expires() -> None:
    clock, dilator = task.Clock(), FakeDilator()
    dilator.connected = False
    sender, _ = pair(clock, dilator)
    clock.advance(GRACE + 1)
    assert isinstance(sender.lost_because, ReconnectGraceExpired)


def test_paused_reading_holds_bytes_until_resumed() -> None:
    clock = task.Clock()
    sa, sb = SubchannelStream(clock), SubchannelStream(clock)
    a, b = Pipe(clock), Pipe(clock)
    a.peer, b.peer, a.protocol, b.protocol = b, a, sa, sb
    sa.makeConnection(a)
    sb.makeConnection(b)
    got: list[bytes] = []
    sb.start_receiving(got.append, lambda _why: None)
    sb.pause_reading()
    assert b.paused  # Dilation stops reading L2: the peer backs up, we do not buffer
    sa.write(b"one")
    sa.write(b"two")
    assert got == []
    sb.resume_reading()
    assert not b.paused
    assert got == [b"one", b"two"]
    sa.write(b"three")
    assert got == [b"one", b"two", b"three"]


def test_close_does_not_wait_for_a_peer_that_never_answers() -> None:
    clock = task.Clock()
    stream = SubchannelStream(clock)
    pipe = Pipe(clock)
    stream.makeConnection(pipe)
    gone: list[Any] = []
    stream.when_closed().addCallback(gone.append)
    stream.close()
    assert pipe.closed and not gone
    clock.advance(CLOSE_WAIT + 0.1)
    assert gone == [None]
    stream.connectionLost(Failure(ConnectionError("late")))  # the peer's CLOSE after all
    assert gone == [None]


@pytest.mark.parametrize("closed_while", ["connected", "lost"])
def test_a_close_waits_for_the_next_path_within_the_grace(closed_while: str) -> None:
    """A receiver whose path broke as its final ack went out: the ack and our CLOSE are still
    owed to the sender, so the close waits for the next generation (and CLOSE_WAIT more
    with it) instead of ending after CLOSE_WAIT; the grace still bounds it."""
    clock, dilator = task.Clock(), FakeDilator()
    sender, _ = pair(clock, dilator)
    gone: list[Any] = []
    if closed_while == "lost":
        dilator.path(None)
        sender.close().addCallback(gone.append)
    else:
        sender.close().addCallback(gone.append)
        clock.advance(CLOSE_WAIT / 2)
        dilator.path(None)
    clock.advance(CLOSE_WAIT * 2)
    assert not gone, "gave up on the peer's CLOSE while no path could carry it"
    dilator.path("relay tcp:127.0.0.1:4002")
    clock.advance(CLOSE_WAIT - 0.1)
    assert not gone
    clock.advance(0.2)
    assert gone == [None]
    assert sender.lost_because is None

    clock, dilator = task.Clock(), FakeDilator()
    sender, _ = pair(clock, dilator)
    dilator.path(None)
    sender.close().addCallback(gone.append)
    clock.advance(GRACE + 0.1)  # the path never came back: the grace ends the wait
    assert gone == [None, None]
    assert isinstance(sender.lost_because, ReconnectGraceExpired)


def test_a_close_waits_for_one_new_path_not_for_ever() -> None:
    """Once a new generation came after our CLOSE (L3 sent our records again on it), a
    later loss does not pause the wait: the peer, its ACKs lost as it ended, may be gone."""
    clock, dilator = task.Clock(), FakeDilator()
    sender, _ = pair(clock, dilator)
    gone: list[Any] = []
    dilator.path(None)
    sender.close().addCallback(gone.append)
    dilator.path("relay tcp:127.0.0.1:4002")
    clock.advance(1)
    dilator.path(None)  # owes_acks still True: the peer's ACKs never came
    clock.advance(CLOSE_WAIT - 1 + 0.1)
    assert gone == [None]
    assert sender.lost_because is None


def test_a_close_with_nothing_owed_does_not_wait_for_a_path() -> None:
    """The peer acknowledged our last records and CLOSE, then the path went (the peer has
    what it needs and may have ended for good): CLOSE_WAIT runs on, not the grace."""
    clock, dilator = task.Clock(), FakeDilator()
    sender, _ = pair(clock, dilator)
    gone: list[Any] = []
    sender.close().addCallback(gone.append)
    clock.advance(1)
    dilator.l3.owes_acks = False
    dilator.path(None)
    clock.advance(CLOSE_WAIT - 1 + 0.1)
    assert gone == [None]


def test_producer_registration_reaches_the_subchannel() -> None:
    """The subchannel's pressure check (8 MiB unacknowledged) pauses the data path's
    producer: registration must reach the subchannel transport."""
    clock = task.Clock()
    stream = SubchannelStream(clock)
    pipe = Pipe(clock)
    stream.makeConnection(pipe)
    producer = object()
    stream.register_producer(producer, True)
    assert pipe.producer is producer
    stream.unregister_producer()
    assert pipe.producer is None


def test_abort_keeps_the_subchannel_until_the_peer_closes_too() -> None:
    """Dropped at once, the L2 connection reset and a relay lost what was queued before our
    CLOSE; the peer then waited its whole grace instead of ending."""
    clock = task.Clock()
    stream = SubchannelStream(clock)
    pipe = Pipe(clock)
    stream.makeConnection(pipe)
    gone: list[Any] = []
    stream.when_closed().addCallback(gone.append)
    stream.abort()
    assert pipe.closed and not gone  # our CLOSE is on its way; the peer's is awaited
    stream.connectionLost(Failure(ConnectionError("the peer's CLOSE")))
    assert gone == [None]
    late = SubchannelStream(clock)
    late.makeConnection(Pipe(clock))
    late.when_closed().addCallback(gone.append)
    late.abort()
    clock.advance(ABORT_WAIT + 0.1)  # a peer that never answers is not waited for long
    assert gone == [None, None]
    clock, dilator = task.Clock(), FakeDilator()
    sender, _ = pair(clock, dilator)
    dilator.path(None)
    sender.abort().addCallback(gone.append)  # Ctrl-C during a reconnect: no path waited for
    clock.advance(ABORT_WAIT + 0.1)
    assert gone == [None, None, None]
