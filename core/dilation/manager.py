"""The L3 engine of Dilation: subchannels over a chain of L2 connections, and the generations.

Pure (events in, actions out, ``now`` passed in). Two halves, as official 0.24's
``manager.py``, ``inbound.py`` and ``outbound.py`` behave:

* :class:`L3` owns the records: one sequence-number space per direction for OPEN, DATA and
  CLOSE; every such record is kept until the peer ACKs it (an ACK retires all records up to
  its number) and is sent again, in order, on the next L2 connection; an inbound record at or
  below the highest number already seen is acked again and dropped. Subchannel ids are odd for
  the leader and even for the follower. The leader pings; two ping intervals without a pong
  drop the connection, which starts a new generation. CLOSE goes both ways (no half-close).
  Inbound flow control is official's: one subchannel whose consumer is paused pauses reading
  the whole L2 connection (:attr:`L3.reading_paused`; the peer's writes then back up into its
  own flow control), until every paused subchannel has resumed or closed.
* :class:`Generations` owns the mailbox side: ``please`` picks the leader, each generation
  gathers ``connection-hints``, and after a loss the leader sends ``reconnect`` and waits for
  the follower's ``reconnecting`` before it races again (hints from before it are stale).
"""

from __future__ import annotations

from collections import deque
from enum import Enum, auto

from hilltop._transitions import move
from hilltop._values import value
from hilltop.dilation import records as r
from hilltop.dilation import wire
from hilltop.errors import ProtocolError

CHUNK = 1 << 20
"""A subchannel write is cut into DATA records of at most this many bytes. Large, so that a
durable transfer's sealed batch (256 KiB of records) is one DATA record, one ACK and one
frame: at 32 KiB, L3's per-record work (a record object, its ACK both ways, the unacked queue)
came eight times per batch. Official 0.24 puts a whole subchannel write in one DATA record of
any size and cuts it into Noise messages within the frame, as
:class:`hilltop.dilation.l2.RecordCodec` does, so the wire is one official already speaks.
Small enough that a re-sent backlog (:data:`hilltop.dilation.shell.PAUSE_ABOVE`, 8 MiB)
still interleaves with pings."""


# -- L3: records --------------------------------------------------------------------------------
class Sub(Enum):
    OPEN = auto()
    CLOSING = auto()  # we sent CLOSE, waiting for theirs
    CLOSED = auto()


SUB_MOVES: dict[tuple[Sub, str], Sub] = {
    (Sub.OPEN, "local close"): Sub.CLOSING,
    (Sub.OPEN, "remote close"): Sub.CLOSED,
    (Sub.CLOSING, "remote close"): Sub.CLOSED,
}


@value
class Opened:
    """The peer opened subchannel ``scid`` for ``subprotocol``."""

    scid: int
    subprotocol: str


@value
class Received:
    """Bytes that arrived on subchannel ``scid``, in order."""

    scid: int
    data: bytes


@value
class Closed:
    """Subchannel ``scid`` is closed both ways."""

    scid: int


@value
class DropConnection:
    """The leader heard no pong for two intervals: close the L2 connection."""

    reason: str


L3Event = Opened | Received | Closed | DropConnection


class L3:
    """Subchannels, sequence numbers, acks and re-sending; see the module docstring."""

    def __init__(self, leader: bool, ping_interval: float = 30.0) -> None:
        self.leader = leader
        self.ping_interval = ping_interval
        self._next_scid = 1 if leader else 2
        self._next_seq = 0
        self._unacked: deque[r.Sequenced] = deque()
        self.unacked_bytes = 0
        self._highest_seen = -1
        self._subs: dict[int, Sub] = {}
        self._out: list[r.Record] = []
        self._events: list[L3Event] = []
        self.connected = False
        self._ping_counter = 0
        self._ping_due: float | None = None
        self._last_pong: float | None = None
        self._paused: set[int] = set()  # subchannels whose consumer asked us to stop

    # -- outputs ----------------------------------------------------------------------------------
    def records_to_send(self) -> list[r.Record]:
        out, self._out = self._out, []
        return out

    def events(self) -> list[L3Event]:
        ev, self._events = self._events, []
        return ev

    def next_deadline(self) -> float | None:
        return self._ping_due if self.leader and self.connected else None

    def is_open(self, scid: int) -> bool:
        return self._subs.get(scid) is Sub.OPEN

    @property
    def owes_acks(self) -> bool:
        """Whether a record we sent (OPEN, DATA, CLOSE) waits for the peer's ACK."""
        return bool(self._unacked)

    @property
    def reading_paused(self) -> bool:
        """Whether the L2 connection must not be read now (a subchannel's consumer is full).
        Also true of a new connection, before its first byte, while the pause lasts."""
        return bool(self._paused)

    # -- inbound flow control ----------------------------------------------------------------------
    def pause(self, scid: int) -> None:
        """The consumer of subchannel ``scid`` can take no more for now."""
        if scid in self._subs:
            self._paused.add(scid)

    def resume(self, scid: int) -> None:
        """The consumer of ``scid`` takes data again (or stopped wanting any at all)."""
        self._paused.discard(scid)

    # -- local inputs -----------------------------------------------------------------------------
    def open(self, subprotocol: str) -> int:
        if not subprotocol:
            raise ValueError("a subchannel needs a non-empty subprotocol name")
        scid = self._next_scid
        self._next_scid += 2
        self._subs[scid] = Sub.OPEN
        self._queue(r.Open(self._seq(), scid, subprotocol))
        return scid

    def write(self, scid: int, data: bytes) -> None:
        if self._subs.get(scid) is not Sub.OPEN:
            raise ProtocolError(f"subchannel {scid} is not open for writing")
        for i in range(0, len(data), CHUNK):
            self._queue(r.Data(self._seq(), scid, bytes(data[i:i + CHUNK])))

    def close(self, scid: int) -> None:
        if self._subs.get(scid) is not Sub.OPEN:
            return
        self._subs[scid] = move(SUB_MOVES, Sub.OPEN, "local close")
        self._paused.discard(scid)  # its consumer is gone: what still comes is dropped
        self._queue(r.Close(self._seq(), scid))

    def connection_made(self, now: float) -> None:
        """A new L2 connection: every unacked record goes again, oldest first."""
        self.connected = True
        self._out.extend(self._unacked)
        self._last_pong = now
        self._ping_due = now

    def connection_lost(self) -> None:
        self.connected = False
        self._out.clear()
        self._ping_due = None

    def handle_timer(self, now: float) -> None:
        if not (self.leader and self.connected and self._ping_due is not None):
            return
        if now < self._ping_due:
            return
        assert self._last_pong is not None
        if self._paused:  # we are not reading: the pongs wait in the connection, unseen
            self._last_pong = now
        if now - self._last_pong >= 2 * self.ping_interval:
            self._events.append(DropConnection(
                f"no pong for {now - self._last_pong:.0f} s"))
            self._ping_due = None
            return
        self._ping_counter = (self._ping_counter + 1) % (1 << 32)
        self._out.append(r.Ping(self._ping_counter.to_bytes(4, "big")))
        self._ping_due = now + self.ping_interval

    # -- records from the peer --------------------------------------------------------------------
    def record_received(self, rec: r.Record, now: float) -> None:
        match rec:
            case r.Open() | r.Data() | r.Close():
                self._out.append(r.Ack(rec.seqnum))  # always, duplicates too
                if rec.seqnum <= self._highest_seen:
                    return
                self._highest_seen = rec.seqnum
                self._sequenced(rec)
            case r.Ack(resp_seqnum):
                while self._unacked and self._unacked[0].seqnum <= resp_seqnum:
                    gone = self._unacked.popleft()
                    if isinstance(gone, r.Data):
                        self.unacked_bytes -= len(gone.data)
            case r.Ping(ping_id):
                self._out.append(r.Pong(ping_id))
            case r.Pong():
                self._last_pong = now
            case r.KCM():
                pass  # a late KCM on the chosen connection: official logs and ignores it

    def _sequenced(self, rec: r.Open | r.Data | r.Close) -> None:
        state = self._subs.get(rec.scid)
        match rec:
            case r.Open(_, scid, subprotocol):
                if state is not None:
                    return  # a duplicate OPEN for a live id: official logs and ignores it
                self._subs[scid] = Sub.OPEN
                self._events.append(Opened(scid, subprotocol))
            case r.Data(_, scid, data):
                if state in (Sub.OPEN, Sub.CLOSING) and data:
                    self._events.append(Received(scid, data))
            case r.Close(_, scid):
                if state is Sub.OPEN:  # their close first: we answer with ours
                    self._queue(r.Close(self._seq(), scid))
                if state in (Sub.OPEN, Sub.CLOSING):
                    self._subs[scid] = move(SUB_MOVES, state, "remote close")
                    del self._subs[scid]
                    self._paused.discard(scid)  # a closed consumer holds nobody up
                    self._events.append(Closed(scid))

    def refuse(self, scid: int) -> None:
        """Nobody listens for the subprotocol the peer opened: close it again."""
        if self._subs.get(scid) is Sub.OPEN:
            self.close(scid)

    # -- internals --------------------------------------------------------------------------------
    def _seq(self) -> int:
        seq = self._next_seq
        self._next_seq += 1
        return seq

    def _queue(self, rec: r.Sequenced) -> None:
        self._unacked.append(rec)
        if isinstance(rec, r.Data):
            self.unacked_bytes += len(rec.data)
        if self.connected:
            self._out.append(rec)


# -- generations: the mailbox side ---------------------------------------------------------------
class Gen(Enum):
    WANTING = auto()  # our please is out, waiting for theirs
    CONNECTING = auto()  # a generation is racing
    CONNECTED = auto()
    FLUSHING = auto()  # leader: reconnect sent, waiting for reconnecting
    LONELY = auto()  # follower: lost the connection, waiting for reconnect
    ABANDONING = auto()  # follower: told to reconnect while connected, dropping ours
    STOPPING = auto()  # stopped while connected: the L2 connection is flushed, then closed
    STOPPED = auto()


GEN_MOVES: dict[tuple[Gen, str], Gen] = {
    (Gen.WANTING, "please"): Gen.CONNECTING,
    (Gen.CONNECTING, "connected"): Gen.CONNECTED,
    (Gen.CONNECTED, "lost (leader)"): Gen.FLUSHING,
    (Gen.FLUSHING, "reconnecting"): Gen.CONNECTING,
    (Gen.CONNECTED, "lost (follower)"): Gen.LONELY,
    (Gen.LONELY, "reconnect"): Gen.CONNECTING,
    (Gen.CONNECTED, "reconnect"): Gen.ABANDONING,
    (Gen.ABANDONING, "lost (follower)"): Gen.CONNECTING,
    (Gen.CONNECTING, "reconnect"): Gen.CONNECTING,
    (Gen.CONNECTING, "race failed (leader)"): Gen.FLUSHING,
    **{(s, "stop"): Gen.STOPPED for s in Gen},
    # as official's manager: a connection is closed, not dropped, and stop ends with its loss
    (Gen.CONNECTED, "stop"): Gen.STOPPING,
    (Gen.ABANDONING, "stop"): Gen.STOPPING,
    (Gen.STOPPING, "stop"): Gen.STOPPING,
    (Gen.STOPPING, "lost"): Gen.STOPPED,
}


@value
class Send:
    """Send this message in our next ``dilate-N`` phase."""

    message: wire.Message


@value
class StartGeneration:
    """Start racing a new generation of L2 connections (stop any earlier one first)."""

    number: int


@value
class UseHints:
    """The peer's connection hints (wire form): dial them for the current generation."""

    hints: list[dict[str, object]]


@value
class Drop:
    """Close the current L2 connection (the leader asked for a new generation)."""


GenAction = Send | StartGeneration | UseHints | Drop


class Generations:
    """The Dilation control flow through the mailbox (see the module docstring)."""

    def __init__(self, my_side: str, version: str) -> None:
        self.my_side = my_side
        self.version = version
        self.leader: bool | None = None
        self.state = Gen.WANTING
        self.generation = -1
        self._actions: list[GenAction] = [Send(wire.Please(my_side, version))]

    def actions(self) -> list[GenAction]:
        out, self._actions = self._actions, []
        return out

    def message(self, msg: wire.Message) -> None:
        match msg:
            case wire.Please(side):
                if self.state is not Gen.WANTING:
                    return
                self.leader = wire.is_leader(self.my_side, side)
                self._move("please")
                self._start()
            case wire.ConnectionHints(hints):
                if self.state is Gen.CONNECTING:
                    self._actions.append(UseHints(hints))
            case wire.Reconnect():
                if self.state is Gen.CONNECTED:
                    self._move("reconnect")
                    self._actions.append(Drop())
                elif self.state in (Gen.LONELY, Gen.CONNECTING):
                    self._move("reconnect")
                    self._actions.append(Send(wire.Reconnecting()))
                    self._start()
            case wire.Reconnecting():
                if self.state is Gen.FLUSHING:
                    self._move("reconnecting")
                    self._start()

    def connected(self) -> None:
        self._move("connected")

    def lost(self) -> None:
        if self.state is Gen.STOPPING:
            self._move("lost")  # no reconnect: we are ending
        if self.state is Gen.STOPPED:
            return
        if self.leader:
            if self.state is Gen.CONNECTED:
                self._move("lost (leader)")
                self._actions.append(Send(wire.Reconnect()))
        elif self.state in (Gen.CONNECTED, Gen.ABANDONING):
            was = self.state
            self._move("lost (follower)")
            if was is Gen.ABANDONING:
                self._actions.append(Send(wire.Reconnecting()))
                self._start()

    def race_failed(self) -> None:
        """A generation's race ended without a connection. The leader starts over the way it
        does after a loss (reconnect, then wait for reconnecting); the follower waits."""
        if self.leader and self.state is Gen.CONNECTING:
            self._move("race failed (leader)")
            self._actions.append(Send(wire.Reconnect()))

    def stop(self) -> None:
        """Stop: at once unless connected; connected, :attr:`state` is ``STOPPING`` until
        :meth:`lost` (the shell closes the connection once the peer has our last records)."""
        self.state = move(GEN_MOVES, self.state, "stop")

    def _move(self, event: str) -> None:
        self.state = move(GEN_MOVES, self.state, event)

    def _start(self) -> None:
        self.generation += 1
        self._actions.append(StartGeneration(self.generation))
