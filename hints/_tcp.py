"""Shared field checks for the hint types that name a TCP endpoint (direct, tor, relay inner).

Kept lenient on purpose: peers differ in what they serialise (wormhole-william writes every field
of every hint, Python writes only what it needs), so unknown keys are ignored and only the fields
we actually dial with are checked.
"""

from __future__ import annotations

import ipaddress
from typing import Any, ClassVar, Self

from hilltop._values import value
from hilltop.errors import MalformedHintError


def hostname(obj: dict[str, Any]) -> str:
    host = obj.get("hostname")
    if not isinstance(host, str) or not host.strip():
        raise MalformedHintError(f"hint needs a non-empty string hostname, got {host!r}")
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):  # tolerate a bracketed IPv6 literal
        host = host[1:-1]
    return host


def port(obj: dict[str, Any]) -> int:
    value = obj.get("port")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise MalformedHintError(f"hint needs an integer port 1-65535, got {value!r}")
    return value


def priority(obj: dict[str, Any], default: float = 0.0) -> float:
    value = obj.get("priority", default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedHintError(f"hint priority must be a number, got {value!r}")
    return float(value)


def require_dict(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise MalformedHintError(f"hint must be a JSON object, got {type(obj).__name__}")
    return obj


def endpoint_text(host: str, port_: int) -> str:
    """``host:port`` with IPv6 literals in brackets, for descriptions and logs."""
    return f"[{host}]:{port_}" if ":" in host else f"{host}:{port_}"


@value
class EndpointHint:
    """A hint that is just a TCP endpoint; each wire type subclasses it and sets ``type``."""

    hostname: str
    port: int
    priority: float = 0.0
    type: ClassVar[str] = ""

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.type, "hostname": self.hostname, "port": self.port,
                "priority": self.priority}

    def __str__(self) -> str:
        return endpoint_text(self.hostname, self.port)

    def identity(self) -> tuple[str, ...]:
        """What makes two endpoints the same door (a relay's endpoints are compared by it)."""
        return ("tcp", self.hostname.lower(), str(self.port))

    @classmethod
    def parse(cls, obj: Any) -> Self:
        """Read one hint, ignoring unknown keys (wormhole-william's ``"hints": null`` too).

        Raises :class:`MalformedHintError` when the hostname or port is unusable.
        """
        obj = require_dict(obj)
        return cls(hostname(obj), port(obj), priority(obj))


def usable_address(text: str) -> bool:
    """An address worth advertising to a peer: one it can reach without knowing our interface.

    Loopback, multicast and unspecified addresses lead nowhere for a peer, and a link-local
    one needs a scope id the peer cannot know. The one rule for the ``direct-tcp`` hints and
    the LAN announcements (a ``%scope`` suffix is ignored)."""
    try:
        ip = ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return False
    return not (ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified)
