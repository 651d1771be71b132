"""``tor-tcp-v1``: a host (usually ``.onion``) and port reachable only through Tor.

Official 0.24 parses these but never sends one; we keep the type so a Tor transport can claim it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hilltop.hints import _tcp

TYPE = "tor-tcp-v1"


@dataclass(frozen=True)
class Hint:
    hostname: str
    port: int
    priority: float = 0.0
    type: ClassVar[str] = TYPE

    def to_wire(self) -> dict[str, Any]:
        return {"type": TYPE, "hostname": self.hostname, "port": self.port,
                "priority": self.priority}

    def __str__(self) -> str:
        return _tcp.endpoint_text(self.hostname, self.port)


def parse(obj: dict[str, Any]) -> Hint:
    """Read one hint, ignoring unknown keys; raises MalformedHintError for a bad host or port."""
    obj = _tcp.require_dict(obj)
    return Hint(_tcp.hostname(obj), _tcp.port(obj), _tcp.priority(obj))
