"""STUN Binding over TCP (RFC 8489), just enough to learn our mapped address.

Why our own forty lines: the default install has no STUN library (aioice comes only with the
``webrtc`` extra), and a TCP mapping must be learnt over TCP from the punch port itself.
"""

from __future__ import annotations

import ipaddress
import struct

MAGIC_COOKIE = 0x2112A442
BINDING_REQUEST = 0x0001
BINDING_SUCCESS = 0x0101
MAPPED_ADDRESS = 0x0001
XOR_MAPPED_ADDRESS = 0x0020
HEADER = 20
MAX_MESSAGE = 2048


def binding_request(transaction_id: bytes) -> bytes:
    """A Binding request without attributes; ``transaction_id`` is 12 random bytes."""
    if len(transaction_id) != 12:
        raise ValueError("a STUN transaction id is 12 bytes")
    return struct.pack("!HHI", BINDING_REQUEST, 0, MAGIC_COOKIE) + transaction_id


def message_length(data: bytes) -> int | None:
    """The whole message's length once its header arrived (TCP gives no message bounds)."""
    if len(data) < HEADER:
        return None
    return HEADER + struct.unpack_from("!H", data, 2)[0]


def mapped_address(data: bytes, transaction_id: bytes) -> tuple[str, int] | None:
    """The (host, port) a Binding success response for ``transaction_id`` reports, or None
    for anything else (an error response, another transaction, garbage)."""
    if len(data) < HEADER:
        return None
    kind, length, cookie = struct.unpack_from("!HHI", data)
    if kind != BINDING_SUCCESS or cookie != MAGIC_COOKIE or data[8:20] != transaction_id:
        return None
    body = data[HEADER:HEADER + length]
    found: tuple[str, int] | None = None
    offset = 0
    while offset + 4 <= len(body):
        attr, size = struct.unpack_from("!HH", body, offset)
        value = body[offset + 4:offset + 4 + size]
        offset += 4 + size + (-size % 4)
        if attr == XOR_MAPPED_ADDRESS:
            return _address(value, data[4:20])
        if attr == MAPPED_ADDRESS and found is None:
            found = _address(value, None)
    return found


def _address(value: bytes, xor: bytes | None) -> tuple[str, int] | None:
    if len(value) < 8:
        return None
    family, port = value[1], struct.unpack_from("!H", value, 2)[0]
    size = {1: 4, 2: 16}.get(family)
    if size is None or len(value) < 4 + size:
        return None
    raw = value[4:4 + size]
    if xor is not None:
        port ^= MAGIC_COOKIE >> 16
        raw = bytes(a ^ b for a, b in zip(raw, xor, strict=False))
    return str(ipaddress.ip_address(raw)), port
