"""``relay``: reach the peer through a transit relay (``relay-v1`` hints).

We contribute our configured transit helper as a hint (so the peer can meet us there) and dial
both our own helper and the peer's relay hints; the runner writes the relay line first on every
stream this transport returns, because :class:`TransportInfo` says ``relay=True``.
"""

from __future__ import annotations

from typing import Any

from hilltop.hints import relay_v1
from hilltop.hookspecs import TransitSession, TransportInfo, hookimpl
from hilltop.streams import dial_tcp

NAME = "relay"


class Relay:
    """Built-in transport for ``relay-v1`` hints over plain TCP."""

    api = 1

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        return TransportInfo(
            name=NAME,
            hint_types=(relay_v1.TYPE,),
            tier=1,
            relay=True,
            description="meet the peer at a transit relay (used when direct connections fail)",
        )

    @hookimpl
    def hilltop_transport_start(self, session: TransitSession) -> list[relay_v1.Hint]:
        return list(session.transit_helpers)

    @hookimpl
    def hilltop_transport_connect(self, hint: Any, session: TransitSession) -> Any:
        if hint.type != relay_v1.TYPE or not hint.endpoints or session.tor:
            return None  # under --tor, tor-relay dials relays through Tor
        ep = hint.endpoints[0]
        return dial_tcp(session.reactor, ep.hostname, ep.port, f"{NAME} {ep}")
