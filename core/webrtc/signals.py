"""WebRTC signalling for the ``webrtc`` transport: the codec and the mailbox channel.

Signalling (the SDP offer and answer, which carry every ICE candidate because aiortc gathers
them all before ``setLocalDescription`` returns) travels as extra app messages inside the
encrypted mailbox, as a hilltop side channel: a JSON object whose only key is
``"hilltop-webrtc"``. :class:`hilltop.api.Wormhole` keeps such messages away from the
file-transfer messages. They are sent only when *both* sides list ``webrtc`` among the
``transports`` of their ``app_versions`` advertisement, so official 0.24 and wormhole-william
peers (which advertise ``{}``) never see one.

The module is pure apart from :class:`MailboxSignalling`; ICE server settings are plain dicts
so the CLI and the config file need no aiortc.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from hilltop.errors import HilltopError, ProtocolError
from hilltop.rendezvous import capabilities

CHANNEL = "webrtc"
KEY = "hilltop-" + CHANNEL
KINDS = ("offer", "answer", "bye")
MAX_SDP = 64 * 1024


@dataclass(frozen=True)
class Signal:
    """One signalling message: ``offer``/``answer`` carry an SDP; ``bye`` says we gave up.

    ``wide`` (offer/answer only): "I read SCTP packets of up to 16 KiB", so on a local path
    the peer may send them (see :mod:`hilltop.transports.aiortc_tuning`). Absent means no.
    """

    kind: str
    sdp: str = ""
    wide: bool = False

    def to_wire(self) -> bytes:
        body: dict[str, Any] = {"kind": self.kind}
        if self.kind != "bye":
            body["sdp"] = self.sdp
            if self.wide:
                body["wide"] = True
        return json.dumps({KEY: body}, separators=(",", ":")).encode("utf-8")


def encode(kind: str, sdp: str = "", wide: bool = False) -> bytes:
    if kind not in KINDS:
        raise ValueError(f"unknown signal kind {kind!r}")
    if kind != "bye" and not sdp:
        raise ValueError(f"a {kind} needs an SDP")
    return Signal(kind, sdp, wide and kind != "bye").to_wire()


def decode(data: bytes) -> Signal:
    """Parse a side-channel message; anything malformed raises ProtocolError."""
    try:
        msg = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError("webrtc signal is not JSON") from None
    if not isinstance(msg, dict) or set(msg) != {KEY} or not isinstance(msg[KEY], dict):
        raise ProtocolError("webrtc signal has the wrong shape")
    body = msg[KEY]
    kind = body.get("kind")
    if kind not in KINDS:
        raise ProtocolError(f"unknown webrtc signal kind {kind!r}")
    if kind == "bye":
        return Signal("bye")
    sdp = body.get("sdp")
    if not isinstance(sdp, str) or not sdp or len(sdp) > MAX_SDP:
        raise ProtocolError(f"webrtc {kind} without a usable SDP")
    return Signal(kind, sdp, body.get("wide") is True)


# --- ICE servers ------------------------------------------------------------------------------
def stun_server(url: str) -> dict[str, Any]:
    """``stun:HOST[:PORT]`` as an ICE server dict (``urls`` only)."""
    _check_url(url, ("stun",))
    return {"urls": url}


def turn_server(url: str, username: str | None, credential: str | None) -> dict[str, Any]:
    """``turn:HOST[:PORT][?transport=udp|tcp]`` (or ``turns:``) with long-term credentials."""
    _check_url(url, ("turn", "turns"))
    if not username or credential is None:
        raise HilltopError(f"TURN server {url} needs a user name and a password "
                           "(--turn-user, --turn-password or the config file)")
    return {"urls": url, "username": username, "credential": credential}


def _check_url(url: str, schemes: tuple[str, ...]) -> None:
    scheme, _, rest = url.partition(":")
    host = rest.split("?")[0]
    if scheme not in schemes or not host or host.startswith("//"):
        raise HilltopError(f"not a {'/'.join(schemes)} URL: {url!r} "
                           f"(expected e.g. {schemes[0]}:example.org:3478)")
    if urlparse("x://" + host).port is None and ":" in host.rsplit("]", 1)[-1]:
        raise HilltopError(f"bad port in {url!r}")


def ice_servers(stun: list[str], turn: list[str], username: str | None,
                credential: str | None) -> list[dict[str, Any]]:
    """The configured servers, STUN first. An empty list means host candidates only."""
    servers = [stun_server(u) for u in stun if u]
    servers += [turn_server(u, username, credential) for u in turn if u]
    return servers


def config_servers(path: Any = None) -> dict[str, Any]:
    """The ``[webrtc]`` table of the config file (``stun``, ``turn``: lists of URLs,
    ``turn-user``, ``turn-password``, ``relay-only``); a missing file or table means none."""
    from hilltop.config import read_table

    return read_table("webrtc", path) or {}


def settings(stun: list[str], turn: list[str], username: str | None, credential: str | None,
             relay_only: bool = False, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """``session.options["webrtc"]`` minus the signalling: flags win over the config file."""
    config = config or {}

    def urls(key: str) -> list[str]:
        value = config.get(key, [])
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise HilltopError(f"config file: [webrtc] {key} must be a URL or a list of URLs")
        return value

    def text(key: str) -> str | None:
        value = config.get(key)
        if value is not None and not isinstance(value, str):
            raise HilltopError(f"config file: [webrtc] {key} must be a string")
        return value

    if not isinstance(config.get("relay-only", False), bool):
        raise HilltopError("config file: [webrtc] relay-only must be true or false")
    stun = stun or urls("stun")
    turn = turn or urls("turn")
    username = username or text("turn-user")
    credential = credential if credential is not None else text("turn-password")
    relay_only = relay_only or config.get("relay-only", False)
    if relay_only and not turn:
        raise HilltopError("webrtc relay-only needs a TURN server (--turn or [webrtc] turn)")
    return {"ice_servers": ice_servers(stun, turn, username, credential),
            "relay_only": relay_only}


# --- the mailbox channel ----------------------------------------------------------------------
class MailboxSignalling:
    """Signalling through one :class:`hilltop.api.Wormhole`, for one transit session."""

    def __init__(self, w: Any) -> None:
        self._w = w
        self._peer_ok: bool | None = None

    async def both_speak_webrtc(self) -> bool:
        """Whether we and the peer both advertised the ``webrtc`` transport."""
        if self._peer_ok is None:
            ours = capabilities.from_app_versions(getattr(self._w, "app_versions", {}))
            theirs = capabilities.from_app_versions(await self._w.get_peer_versions())
            self._peer_ok = (capabilities.WEBRTC in ours.transports
                             and capabilities.WEBRTC in theirs.transports)
        return self._peer_ok

    def send(self, kind: str, sdp: str = "", wide: bool = False) -> None:
        if not self._peer_ok:
            raise HilltopError("webrtc signalling to a peer that did not advertise webrtc")
        self._w.send_message(encode(kind, sdp, wide))

    async def receive(self) -> Signal:
        return decode(await self._w.side_messages(CHANNEL).get())
