"""What Dilation says through the mailbox: the key and the ``dilate-N`` messages (the version
fields: :mod:`hilltop.dilation.versions`).

Facts from official 0.24's code (``wormhole.py``, ``_dilation/manager.py``), which is what peers
speak where ``dilation-protocol.rst`` differs:

* the Dilation key is HKDF-SHA256 of the wormhole key with info ``dilation-v1``, 32 bytes;
* messages travel in mailbox phases ``dilate-0``, ``dilate-1``, ... (lower case), one counter
  per side, and are handled in order;
* ``please`` carries a Dilation side (16 hex digits, not the mailbox side); the larger side
  leads; equal sides mean a reflected message, so we give up.
"""

from __future__ import annotations

import json
import re
from dataclasses import field
from typing import Any

from hilltop._values import value
from hilltop.errors import ProtocolError
from hilltop.rendezvous.key import derive_key

PHASE = re.compile(r"^dilate-(\d+)$")


def dilation_key(wormhole_key: bytes) -> bytes:
    return derive_key(wormhole_key, b"dilation-v1", 32)


def is_leader(my_side: str, their_side: str) -> bool:
    """The larger Dilation side leads (compared as strings, as official does)."""
    if my_side == their_side:
        raise ProtocolError("the peer's Dilation side equals ours (a reflected message?)")
    return my_side > their_side


class BadDilationMessage(ProtocolError):
    """A ``dilate-N`` message that is not JSON or lacks what its type needs."""


@value
class Please:
    """``please``: the first Dilation message, our side and the version we will use."""

    side: str
    use_version: str | None = None


@value
class ConnectionHints:
    """``connection-hints``: where the peer can be dialled for the L2 connection."""

    hints: list[dict[str, Any]] = field(default_factory=list)  # wire form; parsed by the shell


@value
class Reconnect:
    """Leader to follower: the connection is gone, start a new generation."""


@value
class Reconnecting:
    """Follower to leader: ready for a new generation (hints follow)."""


Message = Please | ConnectionHints | Reconnect | Reconnecting


def encode(msg: Message) -> bytes:
    body: dict[str, Any]
    match msg:
        case Please(side, use_version):
            body = {"type": "please", "side": side}
            if use_version is not None:
                body["use-version"] = use_version
        case ConnectionHints(hints):
            body = {"type": "connection-hints", "hints": hints}
        case Reconnect():
            body = {"type": "reconnect"}
        case Reconnecting():
            body = {"type": "reconnecting"}
    return json.dumps(body).encode("utf-8")


def parse(plaintext: bytes) -> Message | None:
    """One decrypted ``dilate-N`` body; None for a type we do not know (ignored, as official
    logs and ignores it); :class:`BadDilationMessage` for a malformed one."""
    try:
        body = json.loads(plaintext.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadDilationMessage("a dilate message is not JSON") from None
    if not isinstance(body, dict):
        raise BadDilationMessage("a dilate message is not a JSON object")
    kind = body.get("type")
    if kind == "please":
        side = body.get("side")
        if not isinstance(side, str) or not side:
            raise BadDilationMessage("a please message lacks its side")
        version = body.get("use-version")
        return Please(side, version if isinstance(version, str) else None)
    if kind == "connection-hints":
        hints = body.get("hints")
        if not isinstance(hints, list):
            raise BadDilationMessage("a connection-hints message lacks its list of hints")
        return ConnectionHints([h for h in hints if isinstance(h, dict)])
    if kind == "reconnect":
        return Reconnect()
    if kind == "reconnecting":
        return Reconnecting()
    return None
