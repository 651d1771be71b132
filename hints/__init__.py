"""Transit hints: where a peer can be reached. One module per wire type.

:func:`parse_hints` turns the ``hints-v1`` list from the peer's ``transit`` message into Hint
objects. It never raises for peer input: unknown types are dropped quietly (new peers may add
types, and the protocol says to ignore them), malformed hints of known types are dropped with a
warning that says what was wrong, so a half-broken peer still gets a connection if one hint works.

A type hilltop does not know but a loaded transport plugin claims (it lists the type in
``TransportInfo.hint_types``) is passed through as a :class:`~hilltop.hints.raw.RawHint`; the
caller says which types are claimed, so this module stays free of plugin machinery.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection
from types import ModuleType
from typing import Any

from hilltop.errors import LocalError, MalformedHintError
from hilltop.hints import direct_tcp_v1, raw, relay_v1, tcp_punch_v1, tor_tcp_v1, websocket_v1
from hilltop.hints.raw import RawHint

log = logging.getLogger(__name__)

Hint = direct_tcp_v1.Hint | relay_v1.Hint | tor_tcp_v1.Hint | tcp_punch_v1.Hint | RawHint

MODULES: dict[str, ModuleType] = {
    m.TYPE: m for m in (direct_tcp_v1, relay_v1, tor_tcp_v1, tcp_punch_v1)
}

__all__ = ["HELPER_USAGE", "MODULES", "Hint", "MalformedHintError", "RawHint", "hints_to_wire",
           "parse_hints", "parse_transit_helper"]


def parse_hints(items: Any, claimed: Collection[str] = ()) -> list[Hint]:
    """Parse a peer's ``hints-v1`` list leniently (see the module docstring).

    ``claimed``: hint types some loaded plugin can dial; those hilltop has no module for come
    back as :class:`RawHint`. Types nobody claims are still dropped.
    """
    if not isinstance(items, list):
        log.warning("ignoring transit hints: expected a list, got %s", type(items).__name__)
        return []
    out: list[Hint] = []
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        module = MODULES.get(kind) if isinstance(kind, str) else None
        if module is None and kind in claimed:
            module = raw
        if module is None:
            log.debug("ignoring transit hint of unknown type %r", kind)
            continue
        try:
            out.append(module.parse(item))
        except MalformedHintError as err:
            log.warning("ignoring malformed %s hint %r: %s", kind, item, err)
    return out


def hints_to_wire(hints: list[Hint]) -> list[dict[str, Any]]:
    return [h.to_wire() for h in hints]


_HELPER = re.compile(
    r"^tcp:(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]+)):(?P<port>\d+)(?P<rest>(?::.*)?)$"
)


def parse_transit_helper(text: str) -> relay_v1.Hint:
    """Parse one ``--transit-helper``: one relay, reached at one or more comma-separated
    endpoints, each ``tcp:HOST:PORT[:priority=F]`` (IPv6 hosts in brackets) or a WebSocket
    URL ``ws://HOST[:PORT]/PATH`` / ``wss://...``.

    Endpoints joined by commas are one relay (one ``relay-v1`` hint); give the flag again
    for another relay. Raises :class:`hilltop.errors.LocalError` naming the expected format.
    """
    parts = [p.strip() for p in text.split(",")]
    if not all(parts):
        raise LocalError(f"bad transit helper {text!r}: {HELPER_USAGE}")
    return relay_v1.Hint(tuple(_helper_endpoint(p, text) for p in parts))


HELPER_USAGE = ("expected tcp:HOST:PORT[:priority=F] (IPv6 host in brackets) or a "
                "ws:// or wss:// URL; several endpoints of one relay joined by commas")


def _helper_endpoint(part: str, text: str) -> relay_v1.Endpoint:
    if part.startswith(("ws://", "wss://")):
        try:
            return websocket_v1.Hint(websocket_v1.check_url(part))
        except MalformedHintError as err:
            raise LocalError(f"bad transit helper {text!r}: {err}") from None
    m = _HELPER.match(part)
    if not m:
        raise LocalError(f"bad transit helper {text!r}: {HELPER_USAGE}")
    host = m.group("v6") or m.group("host")
    port = int(m.group("port"))
    if not 0 < port < 65536:
        raise LocalError(f"bad transit helper {text!r}: port {port} out of range")
    priority = 0.0
    for option in filter(None, m.group("rest").split(":")):
        key, _, value = option.partition("=")
        if key != "priority":
            raise LocalError(
                f"bad transit helper {text!r}: unknown option {key!r}; {HELPER_USAGE}")
        try:
            priority = float(value)
        except ValueError:
            raise LocalError(
                f"bad transit helper {text!r}: priority must be a number, got {value!r}"
            ) from None
    return direct_tcp_v1.Hint(host, port, priority)
