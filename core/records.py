"""Transit records: length-prefixed secretbox frames with a per-direction nonce counter.

Wire shape (protocol summary §5.4)::

    [4-byte big-endian N][24-byte nonce][16-byte tag][ciphertext]      N = 24 + 16 + len(plaintext)

The nonce is a counter starting at 0 for each direction, written as a 24-byte **big-endian**
integer (both real implementations do this, whatever the protocols repo text says). The reader
insists on the exact next counter: a replayed, dropped or reordered record ends the connection.
"""

from __future__ import annotations

from typing import Literal

from nacl.exceptions import CryptoError
from nacl.secret import SecretBox

from hilltop.errors import BadRecordError
from hilltop.handshake import transit_purpose_key

NONCE_SIZE = 24
TAG_SIZE = 16
# Records are 16 KiB in practice; anything near this cap is garbage or an attack, and we would
# rather fail than buffer it.
MAX_RECORD_SIZE = 64 * 1024 * 1024

SENDER_PURPOSE = b"transit_record_sender_key"
RECEIVER_PURPOSE = b"transit_record_receiver_key"


def record_keys(
    transit_key: bytes, role: Literal["sender", "receiver"]
) -> tuple[bytes, bytes]:
    """(key we write with, key we read with): each side writes with its own role's key."""
    sender = transit_purpose_key(transit_key, SENDER_PURPOSE)
    receiver = transit_purpose_key(transit_key, RECEIVER_PURPOSE)
    if role == "sender":
        return sender, receiver
    if role == "receiver":
        return receiver, sender
    raise ValueError(f"role must be 'sender' or 'receiver', got {role!r}")


class RecordEncoder:
    """Turns plaintexts into framed records, counting nonces from 0."""

    def __init__(self, key: bytes) -> None:
        self._box = SecretBox(key)
        self._counter = 0

    def encode(self, plaintext: bytes) -> bytes:
        nonce = self._counter.to_bytes(NONCE_SIZE, "big")
        self._counter += 1
        sealed = bytes(self._box.encrypt(bytes(plaintext), nonce))  # nonce || tag || ciphertext
        return len(sealed).to_bytes(4, "big") + sealed


class RecordDecoder:
    """Splits a byte stream into records and opens them, checking each nonce.

    :meth:`feed` raises :class:`~hilltop.errors.BadRecordError` (and only that) for anything the
    peer could have sent wrong; after that the decoder stays broken and the connection must close.
    """

    def __init__(self, key: bytes, max_record_size: int = MAX_RECORD_SIZE) -> None:
        self._box = SecretBox(key)
        self._expected = 0
        self._buf = bytearray()
        self._max = max_record_size
        self._broken: str | None = None

    @property
    def buffered(self) -> int:
        """Bytes held waiting for the rest of a record (for flow-control decisions)."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes from the wire; return every plaintext that is now complete, in order."""
        if self._broken is not None:
            raise BadRecordError(self._broken)
        self._buf += data
        out: list[bytes] = []
        pos = 0
        buf = self._buf
        try:
            while len(buf) - pos >= 4:
                size = int.from_bytes(buf[pos : pos + 4], "big")
                if size < NONCE_SIZE + TAG_SIZE:
                    self._break(f"transit record too short ({size} bytes)")
                if size > self._max:
                    self._break(f"transit record too long ({size} bytes, limit {self._max})")
                if len(buf) - pos - 4 < size:
                    break
                frame = bytes(buf[pos + 4 : pos + 4 + size])
                pos += 4 + size
                nonce = int.from_bytes(frame[:NONCE_SIZE], "big")
                if nonce != self._expected:
                    self._break(
                        f"transit record has nonce {nonce}, expected {self._expected}"
                    )
                try:
                    out.append(self._box.decrypt(frame))
                except CryptoError:
                    self._break("transit record failed to decrypt (corrupted or forged)")
                self._expected += 1
        finally:
            del buf[:pos]
        return out

    def _break(self, reason: str) -> None:
        self._broken = reason
        self._buf.clear()
        raise BadRecordError(reason)
