"""fowl's wire protocol (``meejah.ca/wormhole/forward``, fowl 26.8 on PyPI), for ``wormhole
forward``: what travels inside the dilated wormhole, so hilltop and fowl forward ports to
each other.

Read from fowl's ``_proto.py`` and ``api.py``: both peers put ``{"fowl": {"features":
["core-v1"]}}`` in ``app_versions`` and listen for two subprotocols. On ``fowl-commands`` the
side that runs a service asks the peer to listen for it (``request-listener``) and gets one
``listener-response``. On ``fowl`` the listening side opens one subchannel per accepted TCP
connection, says which service (``{"unique-name": ...}``), waits for ``{"connected": true}``
(or false with a reason) and only then sends bytes. Every control message is a 2-byte
big-endian length and a msgpack map. fowl reads each message from a single ``dataReceived``
call, so each goes in its own write (one DATA record).
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack

from hilltop._values import value
from hilltop.errors import LocalError, ProtocolError

APPID = "meejah.ca/wormhole/forward"
APP_VERSIONS: dict[str, Any] = {"fowl": {"features": ["core-v1"]}}
COMMANDS = "fowl-commands"
CONNECT = "fowl"
MAX_MESSAGE = 0xFFFF
_LEN = struct.Struct(">H")


class BadFowlMessage(ProtocolError):
    """A fowl control message that is not a length-prefixed msgpack map."""


def pack(message: dict[str, Any]) -> bytes:
    body: bytes = msgpack.packb(message)
    if len(body) > MAX_MESSAGE:
        raise ValueError("a fowl message is at most 65,535 bytes")
    return _LEN.pack(len(body)) + body


class MessageReader:
    """Takes the first control message off a subchannel; what follows it is stream data."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> tuple[dict[str, Any], bytes] | None:
        """The message and the bytes after it once whole, else None (keeps buffering)."""
        self._buf += data
        if len(self._buf) < 2:
            return None
        (size,) = _LEN.unpack_from(self._buf)
        if len(self._buf) < 2 + size:
            return None
        body, rest = bytes(self._buf[2:2 + size]), bytes(self._buf[2 + size:])
        self._buf.clear()
        try:
            message = msgpack.unpackb(body)
        except (ValueError, msgpack.UnpackException) as err:
            raise BadFowlMessage(f"a fowl message is not msgpack: {err}") from None
        if not isinstance(message, dict):
            raise BadFowlMessage("a fowl message is not a map")
        return message, rest


def request_listener(name: str, listen_port: int | None = None) -> dict[str, Any]:
    return {"kind": "request-listener", "unique-name": name, "listen-port": listen_port}


def listener_response(name: str, listening: bool, reason: str | None = None,
                      desired_port: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "listener-response", "unique-name": name,
                           "listening": listening}
    if desired_port is not None:
        out["desired-port"] = desired_port
    if reason is not None and not listening:
        out["reason"] = reason
    return out


def open_connection(name: str) -> dict[str, Any]:
    return {"unique-name": name}


def connect_reply(connected: bool, reason: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"connected": connected}
    if reason is not None:
        out["reason"] = reason
    return out


@value
class Spec:
    """``NAME[:PORT]`` from the command line; port 0/None means any free port."""

    name: str
    port: int | None


def parse_spec(text: str, *, port_required: bool) -> Spec:
    name, _, port_text = text.partition(":")
    if not name:
        raise LocalError(f"{text!r}: give a service name, as NAME:PORT")
    if not port_text:
        if port_required:
            raise LocalError(f"{text!r}: give the local port of the service, as NAME:PORT")
        return Spec(name, None)
    try:
        port = int(port_text)
    except ValueError:
        raise LocalError(f"{text!r}: the port must be a number") from None
    if not 0 <= port <= 65535 or (port_required and port == 0):
        raise LocalError(f"{text!r}: the port must be between 1 and 65535")
    return Spec(name, port or None)
