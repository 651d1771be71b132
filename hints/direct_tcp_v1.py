"""``direct-tcp-v1``: a host and port the peer listens on, dialled directly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hilltop.hints import _tcp

TYPE = "direct-tcp-v1"


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
    """Read one hint; wormhole-william's extra ``"hints": null`` and other unknown keys are ignored.

    Raises :class:`hilltop.hints._tcp.MalformedHintError` when hostname or port is unusable.
    """
    obj = _tcp.require_dict(obj)
    return Hint(_tcp.hostname(obj), _tcp.port(obj), _tcp.priority(obj))
