"""One L2 connection of a Dilation generation: from the first byte to framed, encrypted records.

On the wire (official 0.24 ``_dilation/connection.py`` and ``connector.py``): through a relay,
first ``please relay <token> for side <side>`` answered by ``ok\\n`` (the transit relay line,
with the Dilation key in place of the transit key); then each side writes its prologue line;
then 4-byte big-endian length-prefixed frames. The first frames are the Noise
``NNpsk0_25519_ChaChaPoly_BLAKE2s`` handshake (the leader initiates, psk0 is the Dilation key),
every later frame is one encrypted record. A record over 65,519 bytes is cut into several Noise
messages inside one frame (Noise caps a message at 65,535 bytes with its 16-byte tag).

After the handshake the follower sends a KCM (an empty key-confirmation record) on every
connection; the leader picks one connection that delivered it, sends its own KCM there and
drops the rest. That is the transit race's sender/receiver split, so :class:`L2Shake` is a
:class:`hilltop.transit.handshake.ShakeEngine` like the transit handshake and
:class:`hilltop.transit.runner.TransitRunner` races it the same way: the leader
is the race's "sender" (``Ready`` = the follower's KCM arrived, ``send_go`` = our KCM), the
follower its "receiver" (``Go`` = the leader's KCM arrived).

Noise comes from the ``noiseprotocol`` package (the ``dilate`` extra), as in official; the
ephemeral key is passed in (pure engine, and the known-answer tests fix it).
"""

from __future__ import annotations

import struct
from enum import Enum, auto
from typing import TYPE_CHECKING, Any

from hilltop.dilation import records
from hilltop.errors import LocalError
from hilltop.transit.handshake import RELAY_OK, Go, Ready, ShakeEngine

if TYPE_CHECKING:
    from hilltop.hookspecs import Role

PROLOGUE_LEADER = b"Magic-Wormhole Dilation Handshake v1 Leader\n\n"
PROLOGUE_FOLLOWER = b"Magic-Wormhole Dilation Handshake v1 Follower\n\n"
NOISE_NAME = b"Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s"
NOISE_MAX_CIPHERTEXT = 65535
NOISE_MAX_PAYLOAD = NOISE_MAX_CIPHERTEXT - 16
MAX_FRAME = 64 << 20
"""Frames above this end the connection (official sets no limit; ours keeps a hostile peer
from making us buffer without end; subchannel writes are cut far below it)."""
_LEN = struct.Struct(">L")


def new_noise(leader: bool, dilation_key: bytes, ephemeral: bytes | None = None) -> Any:
    """A Noise session set up as official sets it up. ``ephemeral``: a fixed ephemeral private
    key, for known-answer tests only (the library warns; None lets it make a fresh one)."""
    try:
        from noise.connection import Keypair, NoiseConnection
    except ImportError:
        raise LocalError("Dilation needs the noiseprotocol package: "
                         "pip install 'hilltop[dilate]'") from None
    noise = NoiseConnection.from_name(NOISE_NAME)
    noise.set_psks(dilation_key)
    if leader:
        noise.set_as_initiator()
    else:
        noise.set_as_responder()
    if ephemeral is not None:
        noise.set_keypair_from_private_bytes(Keypair.EPHEMERAL, ephemeral)
    noise.start_handshake()
    return noise


class L2State(Enum):
    RELAY = auto()  # our relay line is out, waiting for ok
    PROLOGUE = auto()  # waiting for the peer's prologue
    NOISE = auto()  # waiting for the peer's Noise handshake frame
    KCM = auto()  # waiting for the peer's KCM
    READY = auto()  # leader: the follower confirmed; the race says go or nevermind
    DONE = auto()  # KCM exchanged: records flow
    CLOSED = auto()  # leader chose another connection
    FAILED = auto()


_WAITING = (L2State.RELAY, L2State.PROLOGUE, L2State.NOISE, L2State.KCM, L2State.READY)
L2_MOVES: dict[tuple[L2State, str], L2State] = {
    (L2State.RELAY, "relay ok"): L2State.PROLOGUE,
    (L2State.PROLOGUE, "prologue"): L2State.NOISE,
    (L2State.NOISE, "noise done"): L2State.KCM,
    (L2State.KCM, "kcm (leader)"): L2State.READY,
    (L2State.KCM, "kcm (follower)"): L2State.DONE,
    (L2State.READY, "send go"): L2State.DONE,
    (L2State.READY, "send nevermind"): L2State.CLOSED,
    **{(s, "fail"): L2State.FAILED for s in _WAITING},
}


class Framer:
    """Length-prefixed frames in and out (no crypto): shared by the handshake and the codec."""

    def __init__(self) -> None:
        self._in = bytearray()

    def feed(self, data: bytes) -> None:
        self._in += data

    def take(self) -> bytes | None:
        """The next whole frame, or None; :class:`records.BadDilationRecord` if oversized."""
        if len(self._in) < 4:
            return None
        (size,) = _LEN.unpack_from(self._in)
        if size > MAX_FRAME:
            raise records.BadDilationRecord(f"a {size}-byte dilation frame is over our limit")
        if len(self._in) < 4 + size:
            return None
        with memoryview(self._in) as view:
            frame = bytes(view[4:4 + size])  # one copy (a bytearray slice, then bytes, was two)
        del self._in[:4 + size]
        return frame

    def rest(self) -> bytes:
        out = bytes(self._in)
        self._in.clear()
        return out


def frame(payload: bytes) -> bytes:
    return _LEN.pack(len(payload)) + payload


class RecordCodec:
    """Records to frames and back over an established Noise session (one per connection).

    The bulk of a dilated transfer is DATA records of up to
    :data:`hilltop.dilation.manager.CHUNK` bytes, each several Noise messages in one frame, so
    both directions avoid copying the payload: the Noise messages are cut from views of it and
    joined once into the frame. Encryption and decryption stay the noiseprotocol session's own
    (its cipher states hold the nonces); only the bytes-only type check of
    ``NoiseConnection.encrypt``/``decrypt`` is passed by, which would force a copy per message.
    With 1 MiB DATA records instead of 32 KiB ones and a copy per step, L3, Noise and framing
    of 256 MiB in process went from 0.28 to 0.18 s on the sender and from 0.38 to 0.29 s on
    the receiver (bench/README.md "The cost cut").
    """

    def __init__(self, noise: Any, framer: Framer | None = None) -> None:
        self._noise = noise
        self._framer = framer or Framer()
        self._encrypt = noise.noise_protocol.cipher_state_encrypt.encrypt_with_ad
        self._decrypt = noise.noise_protocol.cipher_state_decrypt.decrypt_with_ad

    def encode(self, record: records.Record) -> bytes:
        """``record``'s frame: its length prefix and Noise messages, joined once (a flush of
        one record writes this very object)."""
        if isinstance(record, records.Data) and len(record.data) > NOISE_MAX_PAYLOAD:
            head = records.data_header(record)
            data = memoryview(record.data)
            first = NOISE_MAX_PAYLOAD - len(head)
            out = [self._encrypt(None, head + data[:first])]
            out += [self._encrypt(None, data[i:i + NOISE_MAX_PAYLOAD])
                    for i in range(first, len(data), NOISE_MAX_PAYLOAD)]
        else:
            plain = records.encode(record)
            with memoryview(plain) as view:
                out = [self._encrypt(None, view[i:i + NOISE_MAX_PAYLOAD])
                       for i in range(0, max(len(plain), 1), NOISE_MAX_PAYLOAD)]
        return b"".join([_LEN.pack(sum(len(c) for c in out)), *out])

    def decode_frame(self, ciphertext: bytes) -> records.Record:
        from cryptography.exceptions import InvalidTag
        from noise.exceptions import NoiseMaxNonceError

        try:
            with memoryview(ciphertext) as view:
                plain = [self._decrypt(None, view[i:i + NOISE_MAX_CIPHERTEXT])
                         for i in range(0, max(len(ciphertext), 1), NOISE_MAX_CIPHERTEXT)]
        except (InvalidTag, NoiseMaxNonceError):
            raise records.BadDilationRecord("a dilation frame failed to decrypt") from None
        return records.parse_parts(plain)

    def feed(self, data: bytes) -> list[records.Record]:
        """Bytes read from the connection -> whole records (raises on a bad one)."""
        self._framer.feed(data)
        out: list[records.Record] = []
        while (f := self._framer.take()) is not None:
            out.append(self.decode_frame(f))
        return out


class L2Shake(ShakeEngine[L2State]):
    """The opening of one L2 connection; see the module docstring for the race interface."""

    _what = "the dilation handshake"
    _moves = L2_MOVES
    _unfinished = _WAITING
    _records = L2State.DONE

    def __init__(self, leader: bool, dilation_key: bytes, relay_side16: str | None = None,
                 ephemeral: bytes | None = None) -> None:
        self.leader = leader
        ours, theirs = PROLOGUE_LEADER, PROLOGUE_FOLLOWER
        self._own_prologue, self._peer_prologue = (ours, theirs) if leader else (theirs, ours)
        self._noise = new_noise(leader, dilation_key, ephemeral)
        self._framer = Framer()
        self.early_records: list[records.Record] = []
        role: Role = "sender" if leader else "receiver"
        super().__init__(role, dilation_key, relay_side16, self._own_prologue,
                         (L2State.RELAY, L2State.PROLOGUE))

    def send_go(self) -> None:
        """Leader: this connection wins; our KCM goes out on it."""
        self._move("send go")
        self._out += self.codec().encode(records.KCM())
        self.leftover = self._framer.rest()

    def send_nevermind(self) -> None:
        """Leader: another connection won (official just hangs up; so does the runner)."""
        self._move("send nevermind")

    def codec(self) -> RecordCodec:
        """The record codec of this connection (valid once the Noise handshake is done)."""
        return RecordCodec(self._noise)

    # -- internals --------------------------------------------------------------------------------
    def _advance(self, data: bytes) -> None:
        try:
            self._read(data)
        except records.BadDilationRecord as err:
            self._fail(str(err))

    def _read(self, data: bytes) -> None:
        """Relay answer and prologue are lines (``_in``); everything after them is frames."""
        if self.state in (L2State.RELAY, L2State.PROLOGUE):
            self._in += data
            if self.state is L2State.RELAY:
                if not self._take_line(RELAY_OK, "answer from relay"):
                    return
                self._move("relay ok")
                self._out += self._own_prologue
            if not self._take_line(self._peer_prologue, "dilation prologue from peer"):
                return
            self._move("prologue")
            if self.leader:
                self._out += frame(bytes(self._noise.write_message()))
            data, self._in = bytes(self._in), bytearray()
        self._framer.feed(data)
        while self.state in (L2State.NOISE, L2State.KCM) and (f := self._framer.take()) is not None:
            if self.state is L2State.NOISE:
                self._noise_frame(f)
            else:
                self._kcm_frame(f)

    def _noise_frame(self, f: bytes) -> None:
        from cryptography.exceptions import InvalidTag
        from noise.exceptions import NoiseHandshakeError, NoiseInvalidMessage

        try:
            self._noise.read_message(f)
            if not self.leader:
                self._out += frame(bytes(self._noise.write_message()))
        except (NoiseInvalidMessage, NoiseHandshakeError, InvalidTag, ValueError):
            self._fail("the peer's Noise handshake failed (a different code or not Dilation)")
            return
        self._move("noise done")
        if not self.leader:
            self._out += self.codec().encode(records.KCM())

    def _kcm_frame(self, f: bytes) -> None:
        record = self.codec().decode_frame(f)
        if not isinstance(record, records.KCM):
            self._fail(f"expected the peer's KCM, got {type(record).__name__}")
            return
        if self.leader:
            self._move("kcm (leader)")
            self._events.append(Ready())
        else:
            self._move("kcm (follower)")
            self.leftover = self._framer.rest()
            self._events.append(Go())
