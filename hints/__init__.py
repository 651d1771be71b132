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
from collections.abc import Collection
from types import ModuleType
from typing import Any

from hilltop.errors import MalformedHintError
from hilltop.hints import direct_tcp_v1, raw, relay_v1, tcp_punch_v1, tor_tcp_v1, websocket_v1
from hilltop.hints.raw import RawHint
from hilltop.transit.relayaddress import HELPER_USAGE, helper_endpoints

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


def parse_transit_helper(text: str) -> relay_v1.Hint:
    """Parse one ``--transit-helper``: one relay, reached at one or more comma-separated
    endpoints (the syntax: :func:`hilltop.transit.relayaddress.helper_endpoints`).

    Endpoints joined by commas are one relay (one ``relay-v1`` hint); give the flag again
    for another relay. Raises :class:`hilltop.errors.LocalError` naming the expected format.
    """
    endpoints: list[relay_v1.Endpoint] = [
        websocket_v1.Hint(e) if isinstance(e, str) else direct_tcp_v1.Hint(*e)
        for e in helper_endpoints(text)]
    return relay_v1.Hint(tuple(endpoints))
