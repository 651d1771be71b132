"""``relay-v1``: one transit relay, reachable at any of several endpoints.

Wire shape: ``{"type": "relay-v1", "name": ..., "hints": [endpoint, ...]}``; every endpoint of
one hint reaches the same relay. Endpoints are ``direct-tcp-v1`` (host and port) or WebSocket
URLs (``websocket-v1``, or ``websocket`` as magic-wormhole.rs writes it); other inner types are
skipped, and so is a malformed endpoint when another one is usable. The priority lives on the
inner endpoints (Python); wormhole-william also writes an outer ``priority`` (2.0) and empty
``"hostname": "", "port": 0`` fields, which we accept and ignore. The spec's optional ``name``
is kept.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, ClassVar

from hilltop._values import value
from hilltop.errors import MalformedHintError
from hilltop.hints import _tcp, direct_tcp_v1, websocket_v1

log = logging.getLogger(__name__)

TYPE = "relay-v1"

Endpoint = direct_tcp_v1.Hint | websocket_v1.Hint


@value
class Hint:
    """A parsed ``relay-v1`` hint: one relay and the endpoints that reach it."""

    endpoints: tuple[Endpoint, ...]
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


def _endpoint(item: Any, outer_priority: float) -> Endpoint | None:
    """One inner endpoint, None for a type we do not dial; MalformedHintError if broken."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type", direct_tcp_v1.TYPE)
    ep: Endpoint
    if kind == direct_tcp_v1.TYPE:
        ep = direct_tcp_v1.parse(item)
    elif kind in websocket_v1.TYPES:
        ep = websocket_v1.parse(item)
    else:
        return None
    if "priority" not in item or item["priority"] is None:
        ep = replace(ep, priority=outer_priority)
    return ep


def parse(obj: dict[str, Any]) -> Hint:
    """Read a relay hint; raises MalformedHintError if it has no usable endpoint."""
    obj = _tcp.require_dict(obj)
    inner = obj.get("hints")
    if not isinstance(inner, list):
        raise MalformedHintError(f"relay-v1 hint needs a list of hints, got {inner!r}")
    outer_priority = _tcp.priority(obj)
    endpoints: list[Endpoint] = []
    problems: list[str] = []
    for item in inner:
        try:
            ep = _endpoint(item, outer_priority)
        except MalformedHintError as err:
            problems.append(str(err))
            continue
        if ep is not None:
            endpoints.append(ep)
    if not endpoints:
        why = f": {'; '.join(problems)}" if problems else ""
        raise MalformedHintError(f"relay-v1 hint has no usable endpoint{why}")
    for problem in problems:
        log.warning("ignoring a malformed endpoint of relay hint %s: %s",
                    ",".join(map(str, endpoints)), problem)
    name = obj.get("name")
    return Hint(tuple(endpoints), name if isinstance(name, str) and name else None)
