"""The rendezvous engine: everything between "a WebSocket is open" and "the peers share a key".

Sans-I/O, in the manner of h11: the caller feeds it frames, connection changes and the time,
and drains frames to send, events and the next deadline. It owns the mailbox protocol (bind,
allocate, claim, open, add, release, close), the SPAKE2 exchange, the version exchange, phase
encryption, dedup by (side, phase), in-order delivery of numbered phases, and reconnection.

State lives in three small explicit machines, each a transition table:

* ``Stage``  - how far the conversation with the peer got (code, key, confirmed, closing).
* ``Link``   - the WebSocket as the engine sees it (connecting, up, waiting to retry, gone).
* ``Plate``  - our claim on the nameplate (none, claiming, claimed, releasing, released).

Everything else (pending adds, seen phases, buffers) is data, not control state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import field
from enum import Enum, auto
from typing import Any

from hilltop._transitions import move as _move
from hilltop._values import value
from hilltop.errors import (
    CodeFormatError,
    HilltopError,
    LocalError,
    ProtocolError,
    ServerError,
    ServerUnreachableError,
    UnknownOfferError,
    UnwelcomeError,
    WrongCodeError,
)
from hilltop.rendezvous import codes, key, messages

NUMBERED_PHASE = re.compile(r"^[0-9]{1,9}$")
DILATE_PHASE = re.compile(r"^dilate-([0-9]{1,9})$")
"""Dilation's own phases (official 0.24 writes them in lower case), one counter per side."""
RECONNECT_FIRST_DELAY = 1.0
RECONNECT_MAX_DELAY = 60.0
STABLE_CONNECTION = 30.0
"""Seconds a connection must last to count as the server working again: only then does the
next loss start over from :data:`RECONNECT_FIRST_DELAY` with a fresh :attr:`Timeouts.reconnect`.
Why: a server that closes every connection right after its welcome made us reconnect once a
second for ever (each welcome counted as a recovery); its connections last milliseconds, a
working server's last as long as the transfer."""


@value
class Timeouts:
    """How long the server may take to answer before we give up on it (seconds).

    Why: a server that accepts the connection and then says nothing would otherwise hold a
    CLI forever (official 0.24 waits forever). The official server answers each of these at
    once (its ``welcome`` is its first frame; ``claimed`` and ``allocated`` need one database
    query), so 30 s means "broken", never "slow". Waiting for the *peer* has no limit here,
    as in official: that is the user's call (Ctrl-C). ``close`` only ends the goodbye; what
    was transferred stands.
    """

    welcome: float = 30.0
    """From the WebSocket opening to the server's ``welcome``."""
    reply: float = 30.0
    """From ``allocate``/``claim`` to ``allocated``/``claimed``."""
    close: float = 10.0
    """From ``release``/``close`` to ``released``/``closed``."""
    reconnect: float = 120.0
    """From losing a working connection to giving up on getting one back (attempts back off
    from 1 s, doubling, to 60 s apart). The CLI sets it to ``--idle-timeout``: a wormhole whose
    mailbox is gone cannot tell its peer anything, so waiting longer than for a silent peer
    helps nobody; official 0.24 retries for ever, silently."""

    def scaled(self, factor: float) -> Timeouts:
        return Timeouts(self.welcome * factor, self.reply * factor, self.close * factor,
                        self.reconnect * factor)


DEFAULT_TIMEOUTS = Timeouts()
"""The timeouts of a :class:`Mailbox` given none (one shared instance: it is frozen)."""

WAIT_TEXT = {
    "welcome": "accepted our connection but sent no welcome",
    "allocated": "did not allocate a nameplate",
    "claimed": "did not answer our claim of the nameplate",
}


# --- events (outputs other than frames) -------------------------------------------------------
@value
class WelcomeEvent:
    """The server's ``welcome``: a message of the day, the newest CLI version, our address."""

    motd: str | None
    current_cli_version: str | None
    your_address: messages.SeenAddress | None = None


@value
class NameplatesEvent:
    """The nameplates the server lists (for code completion)."""

    nameplates: tuple[str, ...]


@value
class CodeReady:
    """The whole code is known (allocated, typed or given): show it to the user."""

    code: str


@value
class CodeConsumed:
    """The server freed our nameplate because the peer came: nobody else can use the code.

    Only for a release the peer caused, not one sent while closing: official 0.24's sender
    tells its user at this moment ("Note: code has been consumed ..."), and so do we.
    """


@value
class KeyEstablished:
    """The SPAKE2 exchange finished. The key is not yet confirmed (that is PeerVersions)."""

    verifier: bytes


@value
class PeerVersions:
    """The peer's ``version`` message decrypted: the key is confirmed, app messages may flow.
    ``versions`` is the whole message (Dilation's ``can-dilate`` sits beside ``app_versions``)."""

    app_versions: dict[str, Any]
    versions: dict[str, Any] = field(default_factory=dict)


@value
class DilateReceived:
    """The peer's next ``dilate-N`` message, decrypted, in order (for :mod:`hilltop.dilation`)."""

    data: bytes


@value
class Received:
    """An application message from the peer, decrypted, in phase order."""

    data: bytes


@value
class PongEvent:
    """The server answered our ``ping`` with this number."""

    pong: int


@value
class Refused:
    """A frame over :data:`messages.MAX_FRAME_CHARS` arrived once the key was confirmed: a
    peer's message (only a text offer gets that big) that we will not read. The wormhole stays
    open so the application can tell the peer (``error.reply``) instead of leaving it waiting."""

    error: UnknownOfferError


@value
class ConnectNow:
    """The shell should open a (new) WebSocket connection."""


@value
class Reconnecting:
    """The connection to the server was lost (or would not stay up): the next attempt is in
    ``retry_in`` seconds, and the engine gives up ``give_up_in`` seconds from now."""

    retry_in: float
    give_up_in: float
    attempt: int


@value
class DisconnectNow:
    """The shell should drop the WebSocket; the engine is done with it."""


@value
class ClosedEvent:
    """The wormhole is closed with ``mood``; ``error`` says why when it failed."""

    mood: str
    error: HilltopError | None


Event = (
    WelcomeEvent | NameplatesEvent | CodeReady | CodeConsumed | KeyEstablished | PeerVersions
    | Received | DilateReceived | Refused | PongEvent | ConnectNow | Reconnecting | DisconnectNow
    | ClosedEvent
)


# --- the three machines ---------------------------------------------------------------------
class Stage(Enum):
    NO_CODE = auto()
    HAVE_CODE = auto()  # our PAKE is out (or will be once the mailbox opens)
    TWO_KEYS = auto()  # a Go peer may hold the gospake2 key: its version message decides
    KEYED = auto()  # shared key computed, our version sent
    CONFIRMED = auto()  # peer's version decrypted
    CLOSING = auto()
    CLOSED = auto()


STAGE_MOVES: dict[tuple[Stage, str], Stage] = {
    (Stage.NO_CODE, "code"): Stage.HAVE_CODE,
    (Stage.HAVE_CODE, "key"): Stage.KEYED,
    (Stage.HAVE_CODE, "ambiguous key"): Stage.TWO_KEYS,
    (Stage.TWO_KEYS, "key"): Stage.KEYED,
    (Stage.KEYED, "confirm"): Stage.CONFIRMED,
    **{(s, "close"): Stage.CLOSING for s in (Stage.NO_CODE, Stage.HAVE_CODE, Stage.TWO_KEYS,
                                              Stage.KEYED, Stage.CONFIRMED)},
    (Stage.CLOSING, "done"): Stage.CLOSED,
}


class Link(Enum):
    CONNECTING = auto()
    UP = auto()
    WAITING = auto()  # between a drop and the next attempt
    GONE = auto()


LINK_MOVES: dict[tuple[Link, str], Link] = {
    (Link.CONNECTING, "connected"): Link.UP,
    (Link.CONNECTING, "failed"): Link.WAITING,
    (Link.UP, "lost"): Link.WAITING,
    (Link.WAITING, "retry"): Link.CONNECTING,
    **{(s, "stop"): Link.GONE for s in (Link.CONNECTING, Link.UP, Link.WAITING, Link.GONE)},
}


class Plate(Enum):
    NONE = auto()
    CLAIMING = auto()
    CLAIMED = auto()
    RELEASING = auto()
    RELEASED = auto()


PLATE_MOVES: dict[tuple[Plate, str], Plate] = {
    (Plate.NONE, "claim"): Plate.CLAIMING,
    (Plate.CLAIMING, "claimed"): Plate.CLAIMED,
    (Plate.CLAIMING, "release"): Plate.RELEASING,
    (Plate.CLAIMED, "release"): Plate.RELEASING,
    (Plate.RELEASING, "released"): Plate.RELEASED,
}


# --- the engine -------------------------------------------------------------------------------
class Mailbox:
    """One side of one wormhole, as seen by the mailbox protocol.

    ``random_bytes`` supplies every random choice (message ids, nonces, SPAKE2 entropy, code
    words) so tests are deterministic. ``app_versions`` is what our ``version`` message carries
    (see :mod:`hilltop.rendezvous.capabilities`).
    """

    def __init__(
        self,
        appid: str,
        side: str,
        random_bytes: Callable[[int], bytes],
        app_versions: dict[str, Any] | None = None,
        client_version: tuple[str, str] = ("hilltop", "0"),
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        version_extras: dict[str, Any] | None = None,
    ) -> None:
        self.appid = appid
        self._version_extras = dict(version_extras or {})
        self.timeouts = timeouts
        self.side = side
        self._random = random_bytes
        self._app_versions = app_versions or {}
        self._client_version = list(client_version)

        self.stage = Stage.NO_CODE
        self.link = Link.CONNECTING
        self.plate = Plate.NONE
        self._ever_connected = False
        self._retry_at: float | None = None
        self._retry_delay = RECONNECT_FIRST_DELAY
        self._up_since: float | None = None  # when the current connection opened
        self._trouble_since: float | None = None  # when the server stopped working for us
        self._attempts = 0  # reconnections tried since then
        self._short_lived = 0  # of those, how many opened and closed again at once
        self._last_attempt = ""  # why the latest one failed, as the shell says it

        self.code: str | None = None
        self.nameplate: str | None = None
        self.mailbox_id: str | None = None
        self.your_address: messages.SeenAddress | None = None
        """Where the server saw the current connection come from (server 0.8 says it in
        ``welcome``); each reconnect's welcome replaces it, as the NAT may map it anew."""
        self._allocate_words: int | None = None  # set while an allocation is outstanding
        self._want_list = False
        self._pake: key.Pake | None = None
        self.shared_key: bytes | None = None
        self._candidate_keys: tuple[bytes, ...] = ()  # in Stage.TWO_KEYS only
        self._peer_side: str | None = None
        self._peer_pake: bytes | None = None
        self._seen: set[tuple[str, str]] = set()
        self._early: list[messages.Message] = []  # peer messages that arrived before our key
        self._pending: dict[str, str] = {}  # phase -> hex body, until the server echoes it
        self._outbox: list[bytes] = []  # app messages waiting for key confirmation
        self._next_out = 0
        self._inbound: dict[int, bytes] = {}
        self._next_in = 0
        self._dilate_out: list[bytes] = []  # dilate-N bodies waiting for key confirmation
        self._next_dilate_out = 0
        self._dilate_in: dict[int, bytes] = {}
        self._next_dilate_in = 0
        self._mood = "happy"
        self._error: HilltopError | None = None
        self._closing_waits: set[str] = set()
        # Replies the server owes us on this connection -> when we give up on it. None: asked
        # from an input that carries no time; the next handle_timer(now) starts its clock.
        self._waits: dict[str, float | None] = {}
        self._now: float | None = None  # the time of the timed input being handled

        self._frames: list[str] = []
        self._events: list[Event] = []

    # --- outputs -------------------------------------------------------------------------------
    def frames_to_send(self) -> list[str]:
        frames, self._frames = self._frames, []
        return frames

    def next_event(self) -> Event | None:
        return self._events.pop(0) if self._events else None

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must be called next. The shell also calls it after every
        untimed input (``allocate``, ``set_code``, ``close``...), which starts the clock of
        any reply those asked for."""
        deadlines = [d for d in self._waits.values() if d is not None]
        if self.link is Link.WAITING and self._retry_at is not None:
            deadlines.append(self._retry_at)
        give_up = self._give_up_at()
        if give_up is not None:
            deadlines.append(give_up)
        return min(deadlines, default=None)

    def _give_up_at(self) -> float | None:
        if self._trouble_since is None or self.link not in (Link.WAITING, Link.CONNECTING):
            return None
        return self._trouble_since + self.timeouts.reconnect

    # --- connection inputs -----------------------------------------------------------------
    def connected(self, now: float) -> None:
        """The WebSocket is open: bind, then replay every claim, open and add still owed."""
        if self.link is Link.GONE:
            return
        self._now = now
        try:
            self._connected(now)
        finally:
            self._now = None

    def _connected(self, now: float) -> None:
        self.link = _move(LINK_MOVES, self.link, "connected")
        self._ever_connected = True
        self._up_since = now
        self._waits = {"welcome": now + self.timeouts.welcome}
        self.your_address = None  # the new connection's welcome says it anew
        self._send("bind", appid=self.appid, side=self.side, client_version=self._client_version)
        if self.plate is Plate.RELEASING:  # the earlier release may not have reached the server
            self._send("release", nameplate=self.nameplate)
        if self.stage is Stage.CLOSING:
            self._send_close_commands()
            return
        if self._want_list:
            self._send("list")
        if self._allocate_words is not None and self.nameplate is None:
            self._send("allocate")
            self._expect("allocated")
        if self.plate in (Plate.CLAIMING, Plate.CLAIMED):
            self._send("claim", nameplate=self.nameplate)
            self._expect("claimed")
        if self.mailbox_id is not None:
            self._send("open", mailbox=self.mailbox_id)
            for phase, body in self._pending.items():
                self._send("add", phase=phase, body=body)

    def connection_lost(self, now: float, error: HilltopError | None = None,
                        attempt: str = "") -> None:
        """The WebSocket dropped (or an attempt to open one failed).

        ``error``: the shell saw the server break the WebSocket protocol itself (a frame over
        the size limit, bytes that are no WebSocket). That is fatal: reconnecting would only
        fetch the same stored message again. ``attempt``: the server and why the shell could
        not reach it ("ws://host:4000/v1: Connection refused"), named if it never answered.
        """
        if self.link is Link.GONE:
            return
        self._waits = {}
        if error is not None:
            self.link = _move(LINK_MOVES, self.link, "stop")
            self._fail(error, "errory", tell_server=False)
            return
        if not self._ever_connected:
            self.link = _move(LINK_MOVES, self.link, "stop")
            self._fail(ServerUnreachableError(
                " ".join(("cannot reach the mailbox server", attempt)).rstrip()), "errory",
                       tell_server=False)
            return
        if self.stage is Stage.CLOSING:
            self._finish_close()
            return
        was_up = self.link is Link.UP
        self.link = _move(LINK_MOVES, self.link, "lost" if was_up else "failed")
        self._last_attempt = attempt
        if was_up and self._up_since is not None:
            if now - self._up_since >= STABLE_CONNECTION:  # it worked: start over
                self._trouble_since = None
                self._retry_delay = RECONNECT_FIRST_DELAY
                self._attempts = self._short_lived = 0
            elif self._trouble_since is not None:
                self._short_lived += 1
        if self._trouble_since is None:
            self._trouble_since = now
        delay = self._retry_delay
        self._retry_at = now + delay
        self._retry_delay = min(delay * 2, RECONNECT_MAX_DELAY)
        give_up_at = self._give_up_at()
        assert give_up_at is not None
        self._events.append(Reconnecting(delay, max(0.0, give_up_at - now), self._attempts + 1))

    def handle_timer(self, now: float) -> None:
        for reply, deadline in list(self._waits.items()):
            if deadline is None:
                self._waits[reply] = now + self._timeout_of(reply)
            elif now >= deadline:
                self._waited_in_vain(reply)
                return
        give_up = self._give_up_at()
        if give_up is not None and now >= give_up:
            self._give_up_reconnecting()
            return
        if self.link is Link.WAITING and self._retry_at is not None and now >= self._retry_at:
            self.link = _move(LINK_MOVES, self.link, "retry")
            self._retry_at = None
            self._attempts += 1
            self._events.append(ConnectNow())

    def frame_received(self, text: str | bytes, now: float) -> None:
        if self.stage is Stage.CLOSED:
            return
        if self.stage is Stage.CONFIRMED and len(text) > messages.MAX_FRAME_CHARS:
            self._refuse_oversized()
            return
        self._now = now
        try:
            msg = messages.parse_server_frame(text)
            self._dispatch(msg)
        except HilltopError as err:
            self._fail(err, _mood_for(err))
        finally:
            self._now = None

    # --- application inputs ------------------------------------------------------------------
    def list_nameplates(self) -> None:
        self._want_list = True
        if self.link is Link.UP:
            self._send("list")

    def allocate(self, words: int = 2) -> None:
        if self.code is not None or self._allocate_words is not None:
            raise LocalError("a code was already set or allocated")
        if words < 1:
            raise CodeFormatError("a code needs at least one word")
        self._allocate_words = words
        if self.link is Link.UP:
            self._send("allocate")
            self._expect("allocated")

    def claim_nameplate(self, nameplate: str) -> None:
        """Claim early, while the user is still typing the words (completion does this)."""
        codes.check_nameplate(nameplate)
        if self.plate is not Plate.NONE:
            if nameplate != self.nameplate:
                raise LocalError(f"nameplate {self.nameplate} was already claimed for this code")
            return
        self.nameplate = nameplate
        self.plate = _move(PLATE_MOVES, self.plate, "claim")
        if self.link is Link.UP:
            self._send("claim", nameplate=nameplate)
            self._expect("claimed")

    def set_code(self, code: str) -> None:
        parsed = codes.parse_code(code)
        if self.stage is not Stage.NO_CODE:
            raise LocalError("the code was already set")
        self.code = str(parsed)
        self.stage = _move(STAGE_MOVES, self.stage, "code")
        self._events.append(CodeReady(self.code))
        self.claim_nameplate(parsed.nameplate)
        self._pake = key.Pake(self.code, self.appid, self._random)
        if self.mailbox_id is not None:
            self._add("pake", self._pake.start())
        if self._peer_pake is not None:
            self._finish_pake(self._peer_pake)

    def send(self, data: bytes) -> None:
        """Queue an application message; it goes out once the peer's key is confirmed."""
        if self.stage in (Stage.CLOSING, Stage.CLOSED):
            raise LocalError("the wormhole is closed")
        self._outbox.append(data)
        if self.stage is Stage.CONFIRMED:
            self._flush_outbox()

    def send_dilate(self, data: bytes) -> None:
        """Queue a Dilation message for our next ``dilate-N`` phase (sent once confirmed)."""
        if self.stage in (Stage.CLOSING, Stage.CLOSED):
            raise LocalError("the wormhole is closed")
        self._dilate_out.append(data)
        if self.stage is Stage.CONFIRMED:
            self._flush_outbox()

    def ping(self, n: int) -> None:
        if self.link is Link.UP:
            self._send("ping", ping=n)

    def close(self, mood: str | None = None) -> None:
        if self.stage in (Stage.CLOSING, Stage.CLOSED):
            return
        if mood is None:
            mood = "happy" if self.stage is Stage.CONFIRMED else "lonely"
        self._mood = mood
        self.stage = _move(STAGE_MOVES, self.stage, "close")
        if self.link is not Link.UP:
            self._finish_close()
            return
        self._send_close_commands()

    # --- internals ---------------------------------------------------------------------------
    def _send(self, kind: str, **fields: Any) -> None:
        self._frames.append(messages.client_frame(kind, self._random(2).hex(), **fields))

    def _expect(self, reply: str) -> None:
        """The server owes us ``reply`` on this connection (its clock may start later)."""
        self._waits[reply] = None if self._now is None else self._now + self._timeout_of(reply)

    def _timeout_of(self, reply: str) -> float:
        if reply == "welcome":
            return self.timeouts.welcome
        return self.timeouts.close if reply == "close" else self.timeouts.reply

    def _waited_in_vain(self, reply: str) -> None:
        self._waits = {}
        if reply == "close":  # no goodbye from the server: the transfer's outcome stands
            self._finish_close()
            return
        waited = self._timeout_of(reply)
        self._fail(ServerError(f"the mailbox server {WAIT_TEXT[reply]} within {waited:g} s; "
                               "it may be overloaded or not a wormhole mailbox server"),
                   "errory", tell_server=False)

    def _refuse_oversized(self) -> None:
        """Official 0.24 sets no size limit: its sender waits for an answer to any text, so
        it is told (issue 27 item 22), not left waiting for ever."""
        from hilltop.units import readable_size

        limit = readable_size(messages.MAX_FRAME_CHARS)
        self._events.append(Refused(UnknownOfferError(
            f"the peer sent a message over {limit}, more than this receiver takes (a text "
            "that big is better sent as a file)",
            reply=f"message too big for this receiver (over {limit}); send it as a file")))

    def _give_up_reconnecting(self) -> None:
        waited = self.timeouts.reconnect
        if self._short_lived:
            why = (f"the mailbox server closed our connection right after accepting it, "
                   f"{self._short_lived + 1} times in a row; gave up after {waited:g} s")
        else:
            last = f"; the last: {self._last_attempt}" if self._last_attempt else ""
            why = (f"lost the connection to the mailbox server and could not get it back "
                   f"within {waited:g} s ({self._attempts} attempts{last})")
        self._fail(ServerUnreachableError(why), "errory", tell_server=False)

    def _add(self, phase: str, body: bytes) -> None:
        self._pending[phase] = body.hex()
        if self.link is Link.UP:
            self._send("add", phase=phase, body=body.hex())

    def _dispatch(self, msg: messages.ServerMessage) -> None:
        match msg:
            case messages.Welcome(error=str(text)):
                raise UnwelcomeError(f"the mailbox server refused us: {text}")
            case messages.Welcome():
                self._waits.pop("welcome", None)
                self.your_address = msg.your_address
                self._events.append(WelcomeEvent(msg.motd, msg.current_cli_version,
                                                 msg.your_address))
            case messages.NameplateList(nameplates):
                self._events.append(NameplatesEvent(nameplates))
            case messages.Allocated(nameplate):
                self._waits.pop("allocated", None)
                self._on_allocated(nameplate)
            case messages.Claimed(mailbox):
                self._waits.pop("claimed", None)
                self._on_claimed(mailbox)
            case messages.Released():
                if self.plate is Plate.RELEASING:
                    self.plate = _move(PLATE_MOVES, self.plate, "released")
                    if self.stage is not Stage.CLOSING:
                        self._events.append(CodeConsumed())
                self._closing_step("released")
            case messages.Closed():
                self._closing_step("closed")
            case messages.Message():
                self._on_message(msg)
            case messages.Pong(n):
                self._events.append(PongEvent(n))
            case messages.ServerErrorMsg(error=text):
                raise ServerError(_describe_server_error(text))
            case _:
                pass  # acks and unknown types carry nothing we need

    def _on_allocated(self, nameplate: str) -> None:
        if self._allocate_words is None or self.stage is not Stage.NO_CODE:
            return  # unasked for, or too late: we are closing (a server may send anything)
        words = codes.words_from_bytes(self._random(self._allocate_words))
        self._allocate_words = None
        self.set_code("-".join([nameplate, *words]))

    def _on_claimed(self, mailbox: str) -> None:
        if self.plate is Plate.CLAIMING:
            self.plate = _move(PLATE_MOVES, self.plate, "claimed")
        if self.mailbox_id is not None or self.stage is Stage.CLOSING:
            return  # a re-claim after reconnecting (the mailbox is open again), or too late
        self.mailbox_id = mailbox
        self._send("open", mailbox=mailbox)
        if self._pake is not None and "pake" not in self._pending:
            self._add("pake", self._pake.start())

    def _on_message(self, msg: messages.Message) -> None:
        if msg.side == self.side:
            self._pending.pop(msg.phase, None)  # our own echo: the server has it now
            return
        if self.stage is Stage.CLOSING:
            return  # the peer's PAKE arriving after we closed must not start a key exchange
        if self._peer_side is None:
            self._peer_side = msg.side
        elif msg.side != self._peer_side:
            return  # a third party in our mailbox; the server will call it crowded
        if (msg.side, msg.phase) in self._seen:
            return
        self._seen.add((msg.side, msg.phase))
        if self.plate in (Plate.CLAIMING, Plate.CLAIMED):
            # The peer is in: free the nameplate for others. connected() resends it if we
            # are between connections.
            self.plate = _move(PLATE_MOVES, self.plate, "release")
            if self.link is Link.UP:
                self._send("release", nameplate=self.nameplate)
        if msg.phase == "pake":
            if self._pake is None:
                self._peer_pake = msg.body
            else:
                self._finish_pake(msg.body)
        elif (msg.phase == "version" or NUMBERED_PHASE.match(msg.phase)
              or DILATE_PHASE.match(msg.phase)):
            if self.stage is Stage.TWO_KEYS and msg.phase == "version":
                self._adopt_key(self._key_that_opens(msg))
            if self.shared_key is None:
                self._early.append(msg)
            else:
                self._on_encrypted(msg)
        # other phases (future extensions) are ignored on purpose

    def _finish_pake(self, body: bytes) -> None:
        assert self._pake is not None
        self._peer_pake = None
        shared = self._pake.finish(body)
        go_key = self._pake.gospake2_key
        if go_key is None or key.written_by_python_json(body):
            self._adopt_key(shared)
            return
        # Our version must not go out under a key the peer cannot open (wormhole-william
        # gives up on the first message it cannot decrypt). Go and Rust peers send their
        # version without waiting for ours, so waiting for it cannot deadlock.
        self._candidate_keys = (shared, go_key)
        self.stage = _move(STAGE_MOVES, self.stage, "ambiguous key")
        version = next((msg for msg in self._early if msg.phase == "version"), None)
        if version is not None:
            self._adopt_key(self._key_that_opens(version))

    def _key_that_opens(self, version: messages.Message) -> bytes:
        """The candidate key under which the peer sealed its ``version`` message."""
        for candidate in self._candidate_keys:
            phase_key = key.derive_phase_key(candidate, version.side, version.phase)
            try:
                key.open_sealed(phase_key, version.body)
            except WrongCodeError:
                continue
            return candidate
        return self._candidate_keys[0]  # none opens: a wrong code, reported as usual

    def _adopt_key(self, shared: bytes) -> None:
        """The session key is settled: announce it, send our version, open what waited."""
        self._candidate_keys = ()
        self.shared_key = shared
        self.stage = _move(STAGE_MOVES, self.stage, "key")
        self._events.append(KeyEstablished(key.verifier(shared)))
        plaintext = json.dumps({**self._version_extras,
                                "app_versions": self._app_versions}).encode()
        self._add("version", self._seal("version", plaintext))
        early, self._early = self._early, []
        for msg in early:
            self._on_encrypted(msg)

    def _seal(self, phase: str, plaintext: bytes) -> bytes:
        assert self.shared_key is not None
        phase_key = key.derive_phase_key(self.shared_key, self.side, phase)
        return key.seal(phase_key, plaintext, self._random(24))

    def _on_encrypted(self, msg: messages.Message) -> None:
        if self.stage in (Stage.CLOSING, Stage.CLOSED):
            return
        assert self.shared_key is not None
        phase_key = key.derive_phase_key(self.shared_key, msg.side, msg.phase)
        plaintext = key.open_sealed(phase_key, msg.body)  # WrongCodeError on failure
        if msg.phase == "version":
            self._on_peer_version(plaintext)
        elif (dilate := DILATE_PHASE.match(msg.phase)) is not None:
            self._dilate_in[int(dilate.group(1))] = plaintext
            self._deliver()
        else:
            self._inbound[int(msg.phase)] = plaintext
            self._deliver()

    def _on_peer_version(self, plaintext: bytes) -> None:
        try:
            versions = json.loads(plaintext.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ProtocolError("the peer's version message is not JSON") from None
        app_versions = versions.get("app_versions") if isinstance(versions, dict) else None
        self.stage = _move(STAGE_MOVES, self.stage, "confirm")
        self._events.append(PeerVersions(app_versions if isinstance(app_versions, dict) else {},
                                         versions if isinstance(versions, dict) else {}))
        self._flush_outbox()
        self._deliver()

    def _flush_outbox(self) -> None:
        outbox, self._outbox = self._outbox, []
        for data in outbox:
            phase = str(self._next_out)
            self._next_out += 1
            self._add(phase, self._seal(phase, data))
        dilate, self._dilate_out = self._dilate_out, []
        for data in dilate:
            phase = f"dilate-{self._next_dilate_out}"
            self._next_dilate_out += 1
            self._add(phase, self._seal(phase, data))

    def _deliver(self) -> None:
        if self.stage is not Stage.CONFIRMED:
            return
        while self._next_dilate_in in self._dilate_in:
            self._events.append(DilateReceived(self._dilate_in.pop(self._next_dilate_in)))
            self._next_dilate_in += 1
        while self._next_in in self._inbound:
            self._events.append(Received(self._inbound.pop(self._next_in)))
            self._next_in += 1

    def _fail(self, err: HilltopError, mood: str, tell_server: bool = True) -> None:
        if self._error is None:
            self._error = err
        if self.stage in (Stage.CLOSING, Stage.CLOSED):
            self._finish_close()
            return
        self._mood = mood
        self.stage = _move(STAGE_MOVES, self.stage, "close")
        if tell_server and self.link is Link.UP:
            self._send_close_commands()
        else:
            self._finish_close()

    def _send_close_commands(self) -> None:
        self._closing_waits = set()
        if self.plate in (Plate.CLAIMING, Plate.CLAIMED):
            self.plate = _move(PLATE_MOVES, self.plate, "release")
            self._send("release", nameplate=self.nameplate)
        if self.plate is Plate.RELEASING:  # sent now, or earlier on this same connection
            self._closing_waits.add("released")
        if self.mailbox_id is not None:
            self._send("close", mailbox=self.mailbox_id, mood=self._mood)
            self._closing_waits.add("closed")
        if not self._closing_waits:
            self._finish_close()
            return
        self._waits = {"close": None if self._now is None else self._now + self.timeouts.close}

    def _closing_step(self, reply: str) -> None:
        if self.stage is not Stage.CLOSING:
            return
        self._closing_waits.discard(reply)
        if not self._closing_waits:
            self._finish_close()

    def _finish_close(self) -> None:
        if self.stage is Stage.CLOSED:
            return
        if self.stage is not Stage.CLOSING:
            self.stage = _move(STAGE_MOVES, self.stage, "close")
        self.stage = _move(STAGE_MOVES, self.stage, "done")
        self.link = _move(LINK_MOVES, self.link, "stop")
        self._retry_at = None
        self._waits = {}
        self._events.append(DisconnectNow())
        self._events.append(ClosedEvent(self._mood, self._error))


def _mood_for(err: HilltopError) -> str:
    if isinstance(err, WrongCodeError):
        return "scary"
    if isinstance(err, UnwelcomeError):
        return "unwelcome"
    return "errory"


def _describe_server_error(text: str) -> str:
    if text == "crowded":
        return "mailbox server error: this code is already in use by two other people (crowded)"
    if text == "reclaimed":
        return "mailbox server error: this nameplate was already released (reclaimed)"
    return f"mailbox server error: {text}"
