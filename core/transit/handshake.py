"""Transit handshake: the lines each side writes on a new connection, and a per-connection engine.

Every transit connection, whatever transport carried it, starts the same way (protocol summary
§5.3): an optional relay line answered by ``ok\\n``, then both sides write their role line (a
sender never waits for the peer's first: wormhole-william's receiver reads before it writes, so a
sender that waited would deadlock), each checks the peer's line byte for byte, and finally the
sender says ``go\\n`` on the one connection it picked and ``nevermind\\n`` on the rest.

Through a relay our *receiver* writes its line only after the sender's arrived, as
wormhole-william's receiver does. wormhole-william 1.0.6 as a sender has a race there: the
goroutine that watched its relay connection while it waited for ``ok`` may run only after the
transfer was chosen, and then closes that connection half the time ("use of closed network
connection"). It loses the race when ``ok`` and our line are both already waiting, which is
the usual case for a fast receiver; making its read of our line block lets that goroutine
finish first. Every sender writes its line unprompted, so the wait cannot deadlock.

:class:`Handshake` is a sans-I/O engine in the h11 style: feed it bytes with
:meth:`Handshake.receive_data`, pull bytes with :meth:`Handshake.data_to_send` and events with
:meth:`Handshake.next_event`. It never knows which connection won; the race decides and calls
:meth:`Handshake.send_go` or :meth:`Handshake.send_nevermind` on the sender side.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from enum import Enum, auto
from typing import TYPE_CHECKING, Generic, TypeVar

from hilltop._transitions import move
from hilltop._values import value
from hilltop.rendezvous.key import derive_key

if TYPE_CHECKING:
    from hilltop.hookspecs import Role

GO = b"go\n"
NEVERMIND = b"nevermind\n"
RELAY_OK = b"ok\n"
# After the sender's Ready and before go, a well-behaved receiver sends nothing. We still keep
# what arrives (it belongs to the record layer) but refuse to hoard more than this.
_MAX_EARLY_BYTES = 1 << 20
S = TypeVar("S", bound=Enum)


def _hex_purpose(transit_key: bytes, purpose: bytes) -> str:
    return derive_key(transit_key, purpose).hex()


def sender_handshake(transit_key: bytes) -> bytes:
    """The line the file sender writes on every transit connection."""
    return f"transit sender {_hex_purpose(transit_key, b'transit_sender')} ready\n\n".encode()


def receiver_handshake(transit_key: bytes) -> bytes:
    """The line the file receiver writes on every transit connection."""
    return f"transit receiver {_hex_purpose(transit_key, b'transit_receiver')} ready\n\n".encode()


def relay_handshake(transit_key: bytes, side16: str) -> bytes:
    """The line that asks a transit relay to pair us with the peer holding the same token.

    ``side16`` is 16 lowercase hex chars chosen once per transit session (not the mailbox side);
    the relay only pairs connections whose sides differ.
    """
    if len(side16) != 16 or any(c not in "0123456789abcdef" for c in side16):
        raise ValueError(f"relay side must be 16 lowercase hex chars, got {side16!r}")
    token = _hex_purpose(transit_key, b"transit_relay_token")
    return f"please relay {token} for side {side16}\n".encode()


class ShakeState(Enum):
    RELAY = auto()  # our relay line is out, waiting for ok
    PEER = auto()  # waiting for the peer's line
    READY = auto()  # sender: the peer checked out, the race decides go or nevermind
    WAIT_GO = auto()  # receiver: waiting for the sender's go or nevermind
    DONE = auto()  # go said or heard: the bytes from here on are records
    CLOSED = auto()  # nevermind said or heard: the caller closes the connection
    FAILED = auto()


_UNFINISHED = (ShakeState.RELAY, ShakeState.PEER, ShakeState.READY, ShakeState.WAIT_GO)
_COMMON_MOVES: dict[tuple[ShakeState, str], ShakeState] = {
    (ShakeState.RELAY, "relay ok"): ShakeState.PEER,
    **{(s, "fail"): ShakeState.FAILED for s in _UNFINISHED},
}
HANDSHAKE_MOVES: dict[Role, dict[tuple[ShakeState, str], ShakeState]] = {
    "sender": {
        **_COMMON_MOVES,
        (ShakeState.PEER, "peer line"): ShakeState.READY,
        (ShakeState.READY, "send go"): ShakeState.DONE,
        (ShakeState.READY, "send nevermind"): ShakeState.CLOSED,
    },
    "receiver": {
        **_COMMON_MOVES,
        (ShakeState.PEER, "peer line"): ShakeState.WAIT_GO,
        (ShakeState.WAIT_GO, "got go"): ShakeState.DONE,
        (ShakeState.WAIT_GO, "got nevermind"): ShakeState.CLOSED,
    },
}
"""Every legal move of a handshake, per role; the sender alone decides go or nevermind."""


@value
class Ready:
    """Sender only: the peer's line checked out; the race may now call send_go/send_nevermind."""


@value
class Go:
    """Receiver only: the sender chose this connection; ``Handshake.leftover`` holds records."""


@value
class Nevermind:
    """Receiver only: the sender picked another connection; close this one."""


@value
class Failed:
    """The handshake cannot succeed; ``reason`` says why, for logs and error messages."""

    reason: str


HandshakeEvent = Ready | Go | Nevermind | Failed


def _preview(data: bytes | bytearray) -> str:
    text = bytes(data[:40])
    return repr(text) + ("..." if len(data) > 40 else "")


class ShakeEngine(ABC, Generic[S]):
    """A handshake engine the transit race drives: bytes in, bytes and events out.

    The race (:class:`hilltop.transit.runner.TransitRunner`) needs the same outer half from every
    opening it runs, the transit lines here and Dilation's Noise opening
    (:class:`hilltop.dilation.l2.L2Shake`): the pending output, the event queue, "finished", and
    once the opening is done the bytes that follow kept as ``leftover`` for the record layer. A
    subclass names its states and moves and writes :meth:`_advance`, :meth:`send_go` and
    :meth:`send_nevermind`; its table must have a ``"fail"`` move from every unfinished state.
    """

    _what: str
    """The opening's name in failure reasons, such as ``"transit handshake"``."""
    _moves: Mapping[tuple[S, str], S]
    _unfinished: Collection[S]
    """The states in which bytes still drive :meth:`_advance`."""
    _records: S
    """The state in which bytes belong to the record layer (collected in ``leftover``)."""

    def __init__(self, role: Role, key: bytes, relay_side16: str | None, greeting: bytes,
                 first: tuple[S, S]) -> None:
        """``greeting`` is our first line; through a relay (``relay_side16`` given) the relay
        line goes first instead and ``_advance`` sends the greeting when it may. ``first``: the
        starting state (via a relay, direct)."""
        self.role: Role = role
        self.via_relay = relay_side16 is not None
        self.leftover = b""
        if relay_side16 is not None:
            self.state: S = first[0]
            self._out = bytearray(relay_handshake(key, relay_side16))
        else:
            self.state = first[1]
            self._out = bytearray(greeting)
        self._in = bytearray()
        self._events: list[HandshakeEvent] = []

    # -- outputs -------------------------------------------------------------------------------
    def data_to_send(self) -> bytes:
        """Bytes to write to the connection now (empty when nothing is pending)."""
        out = bytes(self._out)
        self._out.clear()
        return out

    def next_event(self) -> HandshakeEvent | None:
        """The next event, or None if the engine needs more input."""
        return self._events.pop(0) if self._events else None

    @property
    def finished(self) -> bool:
        """True once the connection is either handed to records or must be closed."""
        return self.state not in self._unfinished

    # -- inputs --------------------------------------------------------------------------------
    def receive_data(self, data: bytes) -> None:
        """Feed bytes read from the connection."""
        if self.state == self._records:
            self.leftover += data
        elif self.state in self._unfinished:
            self._advance(data)

    def connection_lost(self, why: str = "connection closed") -> None:
        """The connection ended before the handshake finished (EOF is an ordinary input)."""
        if not self.finished:
            self._fail(f"{why} during {self._what} ({self.state.name.lower()})")

    @abstractmethod
    def send_go(self) -> None:
        """Sender (Dilation: leader) only: the race chose this connection."""

    @abstractmethod
    def send_nevermind(self) -> None:
        """Sender (Dilation: leader) only: another connection won; the caller closes this one."""

    # -- for subclasses ------------------------------------------------------------------------
    @abstractmethod
    def _advance(self, data: bytes) -> None:
        """Consume ``data`` in an unfinished state: move, queue output and events."""

    def _move(self, event: str) -> None:
        self.state = move(self._moves, self.state, event)

    def _fail(self, reason: str) -> None:
        self._move("fail")
        self._in.clear()
        self._events.append(Failed(reason))

    def _take_line(self, expected: bytes, what: str) -> bool:
        """Match ``expected`` at the start of ``_in``: True if consumed; False if more is needed
        or the match failed (then ``Failed`` is queued).

        Fails as soon as the bytes so far cannot be a prefix, so garbage never makes us buffer
        more than one line.
        """
        have = bytes(self._in[: len(expected)])
        if not expected.startswith(have):
            self._fail(f"unexpected {what}: {_preview(self._in)}")
            return False
        if len(have) < len(expected):
            return False
        del self._in[: len(expected)]
        return True


class Handshake(ShakeEngine[ShakeState]):
    """The handshake of one transit connection, from first byte to go/nevermind.

    Its states and moves are :class:`ShakeState` and :data:`HANDSHAKE_MOVES`: ``RELAY``
    (waiting for ``ok\\n``) -> ``PEER`` (waiting for the peer's line) -> the sender's ``READY``
    or the receiver's ``WAIT_GO`` -> ``DONE`` | ``CLOSED``; any failure moves to ``FAILED``.
    """

    _what = "transit handshake"
    _unfinished = _UNFINISHED
    _records = ShakeState.DONE

    def __init__(self, role: Role, transit_key: bytes, relay_side16: str | None = None) -> None:
        if role not in ("sender", "receiver"):
            raise ValueError(f"role must be 'sender' or 'receiver', got {role!r}")
        self._moves = HANDSHAKE_MOVES[role]
        if role == "sender":
            self._own_line, self._peer_line = (
                sender_handshake(transit_key), receiver_handshake(transit_key))
        else:
            self._own_line, self._peer_line = (
                receiver_handshake(transit_key), sender_handshake(transit_key))
        super().__init__(role, transit_key, relay_side16, self._own_line,
                         (ShakeState.RELAY, ShakeState.PEER))

    def send_go(self) -> None:
        """Sender only: choose this connection. Bytes already read become ``leftover``."""
        self._move("send go")
        self._out += GO
        self.leftover = bytes(self._in)
        self._in.clear()

    def send_nevermind(self) -> None:
        """Sender only: another connection won; tell the peer, then the caller closes."""
        self._move("send nevermind")
        self._out += NEVERMIND
        self._in.clear()

    # -- internals -----------------------------------------------------------------------------
    def _advance(self, data: bytes) -> None:
        self._in += data
        if self.state is ShakeState.RELAY:
            if not self._take_line(RELAY_OK, "answer from relay"):
                return
            self._move("relay ok")
            if self.role == "sender":
                self._out += self._own_line
        if self.state is ShakeState.PEER:
            if not self._take_line(self._peer_line, "transit handshake from peer"):
                return
            if self.role == "receiver" and self.via_relay:
                self._out += self._own_line  # only now: see the module docstring
            self._move("peer line")
            if self.role == "sender":
                self._events.append(Ready())
        if self.state is ShakeState.READY:
            if len(self._in) > _MAX_EARLY_BYTES:
                self._fail("peer sent too much data before go")
            return
        if self.state is ShakeState.WAIT_GO:
            self._wait_go()

    def _wait_go(self) -> None:
        have = bytes(self._in[: len(NEVERMIND)])
        if have.startswith(GO):
            self._move("got go")
            self.leftover = bytes(self._in[len(GO):])
            self._in.clear()
            self._events.append(Go())
        elif have.startswith(NEVERMIND):
            self._move("got nevermind")
            self._in.clear()
            self._events.append(Nevermind())
        elif not (GO.startswith(have) or NEVERMIND.startswith(have)):
            self._fail(f"expected go from sender, got {_preview(self._in)}")
