"""The WebSocket (RFC 6455) client side as far as the mailbox needs it: handshake and frames.

Why our own: the mailbox protocol is JSON text messages over one WebSocket, and autobahn,
which did this before, costs every process ~0.2 s of CPU and ~20 MB of memory just to import
(it pulls in pyOpenSSL, cryptography's X.509 and its WAMP stack). A client that sends text,
answers pings and closes cleanly is a small, fully specified job.

Pure: bytes in, events out; the caller supplies the random handshake key and mask keys.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
"""RFC 6455 §1.3: what the server appends to our key before hashing it."""

TEXT, BINARY, CONTINUATION = 0x1, 0x2, 0x0
CLOSE, PING, PONG = 0x8, 0x9, 0xA
_CONTROL = frozenset((CLOSE, PING, PONG))
_DATA = frozenset((TEXT, BINARY, CONTINUATION))

MAX_HANDSHAKE_BYTES = 16 * 1024
"""A server's HTTP response head larger than this is garbage, not a WebSocket."""
NORMAL_CLOSURE = 1000


class WebSocketError(Exception):
    """The server broke the WebSocket protocol; the connection must be dropped."""


def handshake_request(host: str, port: int, path: str, key: bytes, tls: bool) -> bytes:
    """The HTTP/1.1 Upgrade request; ``key`` is 16 random bytes (sent base64-encoded)."""
    default = 443 if tls else 80
    hostport = host if port == default else f"{host}:{port}"
    if ":" in host and not host.startswith("["):  # an IPv6 literal
        hostport = f"[{host}]" if port == default else f"[{host}]:{port}"
    return (
        f"GET {path or '/'} HTTP/1.1\r\n"
        f"Host: {hostport}\r\n"
        "Upgrade: websocket\r\n"
        "Connection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {base64.b64encode(key).decode('ascii')}\r\n"
        "Sec-WebSocket-Version: 13\r\n"
        "\r\n"
    ).encode("ascii")


def expected_accept(key: bytes) -> str:
    """The ``Sec-WebSocket-Accept`` value a real server answers to ``key``."""
    digest = hashlib.sha1(base64.b64encode(key) + GUID).digest()  # noqa: S324 - RFC 6455
    return base64.b64encode(digest).decode("ascii")


def check_handshake_response(head: bytes, key: bytes) -> None:
    """Raise :class:`WebSocketError` unless ``head`` (status line and headers, without the
    blank line) accepts our upgrade with the right ``Sec-WebSocket-Accept``."""
    try:
        lines = head.decode("latin-1").split("\r\n")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise WebSocketError("the mailbox server's reply is not HTTP") from None
    status = lines[0].split(" ", 2)
    if len(status) < 2 or not status[0].startswith("HTTP/"):
        raise WebSocketError("the mailbox server's reply is not HTTP")
    if status[1] != "101":
        raise WebSocketError(f"the mailbox server refused the WebSocket upgrade: {lines[0]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if headers.get("upgrade", "").lower() != "websocket" or "upgrade" not in [
            t.strip().lower() for t in headers.get("connection", "").split(",")]:
        raise WebSocketError("the mailbox server's reply is not a WebSocket upgrade")
    if headers.get("sec-websocket-accept") != expected_accept(key):
        raise WebSocketError("the mailbox server answered the WebSocket key wrongly")


def _mask(payload: bytes, mask: bytes) -> bytes:
    """XOR ``payload`` with the repeating 4-byte ``mask`` (one big-integer XOR, no loop)."""
    n = len(payload)
    if not n:
        return b""
    repeated = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(n, "big")


def encode_frame(opcode: int, payload: bytes, mask: bytes) -> bytes:
    """One final client frame; clients must mask every frame (``mask``: 4 random bytes)."""
    if len(mask) != 4:
        raise ValueError("a WebSocket mask is 4 bytes")
    n = len(payload)
    if opcode in _CONTROL and n > 125:
        raise ValueError("a control frame carries at most 125 bytes")
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    return head + mask + _mask(payload, mask)


def close_payload(code: int = NORMAL_CLOSURE, reason: str = "") -> bytes:
    return code.to_bytes(2, "big") + reason.encode("utf-8")[:123]


@dataclass(frozen=True)
class Message:
    """A complete data message (text or binary), reassembled from its fragments."""

    payload: bytes
    is_text: bool


@dataclass(frozen=True)
class Control:
    """A ping, pong or close frame from the server."""

    opcode: int
    payload: bytes


class FrameParser:
    """Splits the server's byte stream into :class:`Message` and :class:`Control` events.

    ``max_message`` bounds a message (all its fragments together); past it, or on any other
    protocol violation (a masked server frame, reserved bits, a fragmented or long control
    frame, a continuation with nothing to continue), :meth:`feed` raises WebSocketError.
    """

    def __init__(self, max_message: int) -> None:
        self._max = max_message
        self._buffer = bytearray()
        self._fragments: list[bytes] = []
        self._fragment_size = 0
        self._fragment_text = False

    def feed(self, data: bytes) -> list[Message | Control]:
        self._buffer += data
        events: list[Message | Control] = []
        while (event := self._next()) is not None:
            if event is not _NOTHING:
                events.append(event)  # type: ignore[arg-type]
        return events

    def _next(self) -> Message | Control | object | None:
        buf = self._buffer
        if len(buf) < 2:
            return None
        b0, b1 = buf[0], buf[1]
        fin, opcode = bool(b0 & 0x80), b0 & 0x0F
        if b0 & 0x70:
            raise WebSocketError("the mailbox server used reserved WebSocket bits")
        if b1 & 0x80:
            raise WebSocketError("the mailbox server masked a frame (servers must not)")
        n, pos = b1 & 0x7F, 2
        if n == 126:
            if len(buf) < 4:
                return None
            n, pos = int.from_bytes(buf[2:4], "big"), 4
        elif n == 127:
            if len(buf) < 10:
                return None
            n, pos = int.from_bytes(buf[2:10], "big"), 10
        if opcode in _CONTROL:
            if not fin or n > 125:
                raise WebSocketError("the mailbox server sent a malformed control frame")
        elif opcode not in _DATA:
            raise WebSocketError(f"the mailbox server sent an unknown frame type {opcode}")
        elif self._fragment_size + n > self._max:
            raise WebSocketError(f"the mailbox server sent a message over {self._max} bytes")
        if len(buf) < pos + n:
            return None
        payload = bytes(buf[pos : pos + n])
        del buf[: pos + n]
        if opcode in _CONTROL:
            return Control(opcode, payload)
        if opcode == CONTINUATION:
            if not self._fragments:
                raise WebSocketError("the mailbox server continued a message it never began")
        elif self._fragments:
            raise WebSocketError("the mailbox server began a message inside another one")
        else:
            self._fragment_text = opcode == TEXT
        self._fragments.append(payload)
        self._fragment_size += n
        if not fin:
            return _NOTHING
        message = Message(b"".join(self._fragments), self._fragment_text)
        self._fragments, self._fragment_size = [], 0
        return message


_NOTHING = object()
"""A frame that completed no event (a non-final fragment)."""
