"""The records of a ``stream-v1`` transfer (data of unknown length): data, end marker, trailer.

A file offer fixes the size up front, so a v1 receiver knows it has everything when the count
is reached. A stream (``wormhole send -`` reading a pipe) cannot say its size before it ends,
so between two hilltop peers that both list ``stream-v1`` the transit records say it instead:

* every data record carries at least one byte;
* then one **empty** record, the end marker (no data record is ever empty, so it cannot be
  mistaken for data);
* then one **trailer** record, ``{"length": N, "sha256": HEX}`` in UTF-8 JSON (``sha256``
  left out when both peers skip the whole-file hash): how many bytes the sender read, and
  their digest, which the receiver checks before it calls the stream complete.

Why an explicit marker rather than the connection's end: a sender killed mid-stream also ends
the connection, and that must never look like a finished stream. Records are authenticated
and numbered, so only the sender can write the marker, and nothing can be cut out before it.
The receiver then answers with the ordinary v1 ack (``{"ack": "ok", "sha256": ...}``).

Pure: plaintexts in, data to write and the trailer out (:class:`StreamReader`).
"""

from __future__ import annotations

import json
import re
from enum import Enum, auto
from typing import Any

from hilltop._transitions import move
from hilltop._values import value
from hilltop.errors import ProtocolError

END_MARKER = b""
"""The plaintext of the end-marker record."""
MAX_TRAILER = 1024
"""Bytes a trailer may take; ours is under 120."""
_HEX64 = re.compile(r"[0-9a-f]{64}")


@value
class Trailer:
    """What the sender says after the end marker: bytes sent and (unless skipped) their SHA-256."""

    length: int
    sha256: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.length, int) or isinstance(self.length, bool) or self.length < 0:
            raise TypeError("Trailer.length must be a non-negative int")
        if self.sha256 is not None and not _HEX64.fullmatch(self.sha256):
            raise TypeError("Trailer.sha256 must be 64 lowercase hex digits or None")

    def to_record(self) -> bytes:
        body: dict[str, Any] = {"length": self.length}
        if self.sha256 is not None:
            body["sha256"] = self.sha256
        return json.dumps(body).encode("utf-8")

    @classmethod
    def from_record(cls, data: bytes | memoryview) -> Trailer:
        """Parse a trailer record; :class:`ProtocolError` for anything else."""
        if len(data) > MAX_TRAILER:
            raise ProtocolError(f"peer's end-of-stream trailer is too long ({len(data)} bytes)")
        try:
            body = json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ProtocolError("peer's end-of-stream trailer is not JSON") from None
        if not isinstance(body, dict):
            raise ProtocolError("peer's end-of-stream trailer is not a JSON object")
        length, digest = body.get("length"), body.get("sha256")
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise ProtocolError(f"peer's end-of-stream trailer has a bad length: {length!r}")
        if digest is not None and not (isinstance(digest, str) and _HEX64.fullmatch(digest)):
            raise ProtocolError(f"peer's end-of-stream trailer has a bad sha256: {digest!r}")
        return cls(length, digest)


class StreamState(Enum):
    """Where the receiver is in a stream."""

    DATA = auto()  # data records, until the end marker
    TRAILER = auto()  # the end marker came: the trailer is next
    ENDED = auto()  # the trailer came: nothing more may follow


STREAM_MOVES: dict[tuple[StreamState, str], StreamState] = {
    (StreamState.DATA, "data"): StreamState.DATA,
    (StreamState.DATA, "end"): StreamState.TRAILER,
    (StreamState.TRAILER, "trailer"): StreamState.ENDED,
}
"""The receiver's moves. A record after the trailer is the peer's fault and is refused as a
:class:`ProtocolError` before the table is asked."""


class StreamReader:
    """Feeds on the plaintexts of a stream's records, in order.

    :meth:`feed` returns the data a record carries (None for the marker and the trailer);
    once :attr:`state` is ``ENDED``, :attr:`trailer` holds what the sender announced.
    :meth:`check` compares that with what was counted.
    """

    def __init__(self) -> None:
        self.state = StreamState.DATA
        self.received = 0
        self.trailer: Trailer | None = None

    def feed(self, plaintext: bytes | memoryview) -> bytes | memoryview | None:
        if self.state is StreamState.ENDED:
            raise ProtocolError("peer sent data after the end of its stream")
        if self.state is StreamState.TRAILER:
            self.trailer = Trailer.from_record(plaintext)
            self.state = move(STREAM_MOVES, self.state, "trailer")
            return None
        if len(plaintext) == 0:
            self.state = move(STREAM_MOVES, self.state, "end")
            return None
        self.state = move(STREAM_MOVES, self.state, "data")
        self.received += len(plaintext)
        return plaintext

    @property
    def ended(self) -> bool:
        return self.state is StreamState.ENDED

    def check(self) -> Trailer:
        """The trailer, once it came and its length matches what arrived; else ProtocolError."""
        if self.trailer is None:
            raise ProtocolError(
                f"the stream ended without its end marker after {self.received} bytes")
        if self.trailer.length != self.received:
            raise ProtocolError(f"the sender says its stream had {self.trailer.length} bytes, "
                                f"but {self.received} arrived")
        return self.trailer
