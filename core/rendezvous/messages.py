"""Mailbox (rendezvous) wire messages: parse what the server sends, build what we send.

Each server message becomes a frozen dataclass so the engine matches on types, never on
string keys scattered through its methods. Unknown types and unknown keys are tolerated (the
protocol lets servers add both); anything that is not a JSON object is a :class:`ProtocolError`.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import field
from typing import Any

from hilltop._values import value
from hilltop.errors import ProtocolError

MAX_FRAME_CHARS = 48 * 1024 * 1024
"""Largest frame we accept. A text offer is the only big message. Official 0.24 sets no limit
in its client or server, and its sender delivers a 20 MB text to its own receiver in one frame
of ~40 MB of hex; 48 MiB takes that (texts up to ~25 MB) and bounds memory: the 20 MB text
peaked our receiver at 221 MiB RSS. Frames over twice this are refused from their header
(:mod:`hilltop.rendezvous.client`). Our own senders stay under 8 MiB, which every hilltop reads."""


@value
class SeenAddress:
    """Where the mailbox server saw our connection come from (``welcome["your-address"]``,
    server 0.8): behind a NAT, the public address and port the NAT mapped it to."""

    host: str
    port: int


@value
class Welcome:
    """``welcome``: the server's first message (an ``error`` in it means it refuses us)."""

    motd: str | None = None
    current_cli_version: str | None = None
    error: str | None = None
    your_address: SeenAddress | None = None


def parse_your_address(value: Any) -> SeenAddress | None:
    """``{"ipv4" or "ipv6": host, "port": n}``, or None for anything else.

    Lenient, as for every optional welcome key: a server that sends nothing usable only costs
    us the hole punch. An IPv4-mapped IPv6 address (a dual-stack server seeing an IPv4
    client) becomes the IPv4 address the NAT really has.
    """
    if not isinstance(value, dict):
        return None
    port = value.get("port")
    if isinstance(port, str) and port.isdigit():
        port = int(port)  # server 0.8 keeps the port of an X-Real-Port header as text
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        return None
    for key, version in (("ipv4", 4), ("ipv6", 6)):
        host = value.get(key)
        if not isinstance(host, str):
            continue
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return None
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip.version != version:
            return None
        return SeenAddress(str(ip), port)
    return None


@value
class Ack:
    """``ack``: the server got our message with this ``id``."""

    id: str | None


@value
class NameplateList:
    """``nameplates``: the nameplates in use (for code completion)."""

    nameplates: tuple[str, ...]


@value
class Allocated:
    """``allocated``: the nameplate the server chose for us."""

    nameplate: str


@value
class Claimed:
    """``claimed``: the mailbox behind the nameplate we claimed."""

    mailbox: str


@value
class Released:
    """``released``: the server freed our nameplate."""


@value
class Message:
    """``message``: a side's message in the mailbox (ours echoed back too), body still encrypted."""

    side: str
    phase: str
    body: bytes
    id: str | None = None


@value
class Closed:
    """``closed``: the server closed our mailbox."""


@value
class Pong:
    """``pong``: the answer to our ``ping``."""

    pong: int


@value
class ServerErrorMsg:
    """``error``: the server refused a message of ours (``orig``)."""

    error: str
    orig: dict[str, Any] = field(default_factory=dict)


@value
class Unknown:
    """A message type we do not know: ignored, as the protocol lets servers add types."""

    type: str


ServerMessage = (
    Welcome | Ack | NameplateList | Allocated | Claimed | Released | Message | Closed | Pong
    | ServerErrorMsg | Unknown
)


def _str(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ProtocolError(f"mailbox server sent a {obj.get('type')!r} message without {key!r}")
    return value


def parse_server_frame(text: str | bytes) -> ServerMessage:
    """Decode one WebSocket frame from the server into a typed message."""
    if len(text) > MAX_FRAME_CHARS:
        raise ProtocolError(f"mailbox server sent an oversized message ({len(text)} bytes)")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("mailbox server sent a message that is not UTF-8") from None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: [[[[... nested too deep
        raise ProtocolError("mailbox server sent a message that is not JSON") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError("mailbox server sent a message without a type")
    kind = obj["type"]
    if kind == "welcome":
        welcome = obj.get("welcome")
        welcome = welcome if isinstance(welcome, dict) else {}

        def opt(key: str) -> str | None:
            value = welcome.get(key)
            return value if isinstance(value, str) else None

        return Welcome(opt("motd"), opt("current_cli_version"), opt("error"),
                       parse_your_address(welcome.get("your-address")))
    if kind == "ack":
        return Ack(obj.get("id") if isinstance(obj.get("id"), str) else None)
    if kind == "nameplates":
        entries = obj.get("nameplates")
        if not isinstance(entries, list):
            raise ProtocolError("mailbox server sent a malformed nameplate list")
        ids = [e.get("id") for e in entries if isinstance(e, dict)]
        return NameplateList(tuple(i for i in ids if isinstance(i, str)))
    if kind == "allocated":
        return Allocated(_str(obj, "nameplate"))
    if kind == "claimed":
        return Claimed(_str(obj, "mailbox"))
    if kind == "released":
        return Released()
    if kind == "message":
        try:
            body = bytes.fromhex(_str(obj, "body"))
        except ValueError:
            raise ProtocolError("mailbox server relayed a message body that is not hex") from None
        msg_id = obj.get("id")
        if not (_str(obj, "side").isascii() and _str(obj, "phase").isascii()):
            raise ProtocolError("mailbox server relayed a message with a non-ASCII side or phase")
        return Message(
            _str(obj, "side"), _str(obj, "phase"), body, msg_id if isinstance(msg_id, str) else None
        )
    if kind == "closed":
        return Closed()
    if kind == "pong":
        pong = obj.get("pong")
        return Pong(pong if isinstance(pong, int) else -1)
    if kind == "error":
        orig = obj.get("orig")
        text = str(obj.get("error", "unknown error"))
        return ServerErrorMsg(text, orig if isinstance(orig, dict) else {})
    return Unknown(kind)


def client_frame(kind: str, msg_id: str, **fields: Any) -> str:
    """Serialise one client command. ``msg_id`` is the random 4-hex-char ``id`` the server acks."""
    return json.dumps({"type": kind, "id": msg_id, **fields})
