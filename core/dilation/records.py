"""L3 records carried inside one L2 connection, as official 0.24's ``connection.py`` encodes them.

One tag byte, then big-endian 4-byte fields. The tags are the code's (KCM 0, PING 1, PONG 2,
OPEN 3, DATA 4, CLOSE 5, ACK 6), not the older table in ``dilation-protocol.rst``; official's
own parse test pins OPEN(scid 513, seqnum 256, "proto") to ``03 00000201 00000100 proto``.
"""

from __future__ import annotations

import struct

from hilltop._values import value
from hilltop.errors import ProtocolError

T_KCM, T_PING, T_PONG, T_OPEN, T_DATA, T_CLOSE, T_ACK = range(7)
_U32 = struct.Struct(">L")
_U32X2 = struct.Struct(">LL")
_DATA_HEAD = struct.Struct(">BLL")


class BadDilationRecord(ProtocolError):
    """The peer sent a record we cannot parse: the L2 connection is dropped."""


@value
class KCM:
    """Key confirmation: the first record on a connection (the follower's, then the leader's)."""


@value
class Ping:
    """Liveness probe; the peer answers with a :class:`Pong` carrying the same ``ping_id``."""

    ping_id: bytes  # 4 opaque bytes


@value
class Pong:
    """The answer to the :class:`Ping` with this ``ping_id``."""

    ping_id: bytes


@value
class Open:
    """Open subchannel ``scid`` for ``subprotocol`` (sequenced, acked)."""

    seqnum: int
    scid: int
    subprotocol: str


@value
class Data:
    """Bytes for subchannel ``scid`` (sequenced, acked)."""

    seqnum: int
    scid: int
    data: bytes


@value
class Close:
    """Close subchannel ``scid`` (sequenced, acked)."""

    seqnum: int
    scid: int


@value
class Ack:
    """The peer has every sequenced record up to ``resp_seqnum``: drop them from the queue."""

    resp_seqnum: int


Record = KCM | Ping | Pong | Open | Data | Close | Ack
Sequenced = Open | Data | Close
"""Records that carry a sequence number: queued until acked and re-sent after a reconnect."""


def encode(r: Record) -> bytes:
    match r:
        case KCM():
            return bytes([T_KCM])
        case Ping(ping_id):
            return bytes([T_PING]) + ping_id
        case Pong(ping_id):
            return bytes([T_PONG]) + ping_id
        case Open(seqnum, scid, subprotocol):
            return bytes([T_OPEN]) + _U32X2.pack(scid, seqnum) + subprotocol.encode("utf-8")
        case Data():
            return data_header(r) + r.data
        case Close(seqnum, scid):
            return bytes([T_CLOSE]) + _U32X2.pack(scid, seqnum)
        case Ack(resp_seqnum):
            return bytes([T_ACK]) + _U32.pack(resp_seqnum)
    raise TypeError(f"not a dilation record: {r!r}")


def data_header(r: Data) -> bytes:
    """The 9 bytes before a DATA record's payload (the codec encrypts the payload from a view
    of it, not from a joined copy)."""
    return _DATA_HEAD.pack(T_DATA, r.scid, r.seqnum)


def parse_parts(parts: list[bytes]) -> Record:
    """One decrypted record in the pieces it was decrypted in (a big DATA record is several
    Noise messages): a DATA record's payload is joined once, straight from the pieces."""
    if len(parts) > 1 and len(parts[0]) >= _DATA_HEAD.size and parts[0][0] == T_DATA:
        _, scid, seqnum = _DATA_HEAD.unpack_from(parts[0])
        with memoryview(parts[0]) as first:
            return Data(seqnum, scid, b"".join([first[_DATA_HEAD.size:], *parts[1:]]))
    return parse(b"".join(parts))


def parse(plaintext: bytes) -> Record:
    """One decrypted record; :class:`BadDilationRecord` for anything malformed."""
    if not plaintext:
        raise BadDilationRecord("empty dilation record")
    tag, body = plaintext[0], plaintext[1:]
    if tag == T_KCM:
        return KCM()
    if tag in (T_PING, T_PONG):
        if len(body) != 4:
            raise BadDilationRecord(f"a ping/pong record carries 4 bytes, not {len(body)}")
        return Ping(body) if tag == T_PING else Pong(body)
    if tag == T_ACK:
        if len(body) != 4:
            raise BadDilationRecord(f"an ACK record carries 4 bytes, not {len(body)}")
        return Ack(_U32.unpack(body)[0])
    if tag in (T_OPEN, T_DATA, T_CLOSE):
        if len(body) < 8:
            raise BadDilationRecord(f"record type {tag} is {len(plaintext)} bytes, too short")
        scid, seqnum = _U32X2.unpack(body[:8])
        rest = body[8:]
        if tag == T_DATA:
            return Data(seqnum, scid, rest)
        if tag == T_CLOSE:
            if rest:
                raise BadDilationRecord("a CLOSE record has trailing bytes")
            return Close(seqnum, scid)
        try:
            return Open(seqnum, scid, rest.decode("utf-8"))
        except UnicodeDecodeError:
            raise BadDilationRecord("an OPEN names its subprotocol in invalid UTF-8") from None
    raise BadDilationRecord(f"unknown dilation record type {tag}")
