"""``relay-v1``: one transit relay, reachable at any of several TCP endpoints.

Wire shape: ``{"type": "relay-v1", "hints": [direct-tcp-v1 ...]}``. The priority lives on the
inner endpoints (Python); wormhole-william also writes an outer ``priority`` (2.0) and empty
``"hostname": "", "port": 0`` fields, which we accept and ignore. The spec's optional ``name``
is kept; ``websocket-v1`` endpoints and other inner types are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from hilltop.errors import MalformedHintError
from hilltop.hints import _tcp, direct_tcp_v1

TYPE = "relay-v1"


@dataclass(frozen=True)
class Hint:
    endpoints: tuple[direct_tcp_v1.Hint, ...]
    name: str | None = None
    type: ClassVar[str] = TYPE

    @property
    def priority(self) -> float:
        """The best priority among the endpoints (the race uses one endpoint per attempt)."""
        return max((e.priority for e in self.endpoints), default=0.0)

    def split(self) -> list[Hint]:
        """One single-endpoint relay hint per endpoint, so each can be its own race attempt."""
        return [replace(self, endpoints=(e,)) for e in self.endpoints]

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"type": TYPE, "hints": [e.to_wire() for e in self.endpoints]}
        if self.name is not None:
            wire["name"] = self.name
        return wire

    def __str__(self) -> str:
        return ",".join(str(e) for e in self.endpoints)


def parse(obj: dict[str, Any]) -> Hint:
    """Read a relay hint; raises MalformedHintError if it has no usable endpoint."""
    obj = _tcp.require_dict(obj)
    inner = obj.get("hints")
    if not isinstance(inner, list):
        raise MalformedHintError(f"relay-v1 hint needs a list of hints, got {inner!r}")
    outer_priority = _tcp.priority(obj)
    endpoints = []
    for item in inner:
        if not isinstance(item, dict) or item.get("type", direct_tcp_v1.TYPE) != direct_tcp_v1.TYPE:
            continue
        ep = direct_tcp_v1.parse(item)
        if "priority" not in item or item["priority"] is None:
            ep = replace(ep, priority=outer_priority)
        endpoints.append(ep)
    if not endpoints:
        raise MalformedHintError("relay-v1 hint has no usable direct-tcp-v1 endpoint")
    name = obj.get("name")
    return Hint(tuple(endpoints), name if isinstance(name, str) and name else None)
