"""``websocket-v1``: one way into a transit relay, as a WebSocket URL (only inside ``relay-v1``).

Wire shape (magic-wormhole-protocols ``transit.md``): ``{"type": "websocket-v1", "url":
"wss://relay.example/"}``; magic-wormhole.rs writes the type as ``"websocket"``, which we read
too (:data:`TYPES`) and never write. Official 0.24 and wormhole-william skip both as an unknown
inner type, so sending one beside a ``direct-tcp-v1`` endpoint costs them nothing.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import urlsplit

from hilltop._values import value
from hilltop.hints import _tcp
from hilltop.transit.relayaddress import check_websocket_url

TYPE = "websocket-v1"
TYPES = (TYPE, "websocket")
"""The inner endpoint types read as WebSocket endpoints: the spec's name and magic-wormhole.rs's."""


@value
class Hint:
    """A parsed ``websocket-v1`` endpoint (the URL of a relay's WebSocket)."""

    url: str
    priority: float = 0.0
    type: ClassVar[str] = TYPE

    @property
    def tls(self) -> bool:
        return urlsplit(self.url).scheme == "wss"

    @property
    def hostname(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "wss" else 80)

    def identity(self) -> tuple[str, ...]:
        """What makes two endpoints the same relay door: scheme, host, port and path."""
        parts = urlsplit(self.url)
        return ("ws", parts.scheme, self.hostname.lower(), str(self.port), parts.path or "/")

    def to_wire(self) -> dict[str, Any]:
        return {"type": TYPE, "url": self.url, "priority": self.priority}

    def __str__(self) -> str:
        return self.url


def parse(obj: Any) -> Hint:
    obj = _tcp.require_dict(obj)
    return Hint(check_websocket_url(obj.get("url")), _tcp.priority(obj))
