"""WebRTC signalling for the ``webrtc`` transport: the codec (pure).

Signalling (the SDP offer and answer, which carry every ICE candidate because aiortc gathers
them all before ``setLocalDescription`` returns) travels as extra app messages inside the
encrypted mailbox, as a hilltop side channel: a JSON object whose only key is
``"hilltop-webrtc"``. :class:`hilltop.api.Wormhole` keeps such messages away from the
file-transfer messages. They are sent only when *both* sides list ``webrtc`` among the
``transports`` of their ``app_versions`` advertisement, so official 0.24 and wormhole-william
peers (which advertise ``{}``) never see one.

The channel that carries these messages is :mod:`hilltop.webrtc.channel`; the ICE servers
and other settings of the transport are :mod:`hilltop.webrtc.settings`.
"""

from __future__ import annotations

import json
from typing import Any

from hilltop._values import value
from hilltop.errors import ProtocolError

CHANNEL = "webrtc"
KEY = "hilltop-" + CHANNEL
KINDS = ("offer", "answer", "bye")
MAX_SDP = 64 * 1024


@value
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
    except (ValueError, UnicodeDecodeError, RecursionError):
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
