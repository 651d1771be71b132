"""``relay``: reach the peer through a transit relay (``relay-v1`` hints), over TCP or a
WebSocket.

We contribute our configured transit helpers as hints (so the peer can meet us there); the
runner dials those and the peer's relay hints together, one endpoint per attempt, in the order
and at the times :mod:`hilltop.transit.relayplan` gives. It writes the relay line first on every
stream this transport returns, because :class:`TransportInfo` says ``relay=True``: the same
handshake over a TCP stream (``direct-tcp-v1`` endpoints) or a WebSocket one (``websocket-v1``
endpoints: ``ws://`` and ``wss://``, :mod:`hilltop.wsstream`).
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer

from hilltop.errors import DialError, LocalError
from hilltop.hints import relay_v1, websocket_v1
from hilltop.hookspecs import TransitSession, TransportInfo, hookimpl
from hilltop.streams import dial_tcp
from hilltop.transit.relayconfig import RelaySettings

NAME = "relay"


class Relay:
    """Built-in transport for ``relay-v1`` hints over plain TCP or a WebSocket."""

    api = 1

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        return TransportInfo(
            name=NAME,
            hint_types=(relay_v1.TYPE,),
            tier=1,
            relay=True,
            description="meet the peer at a transit relay, over TCP or a WebSocket "
                        "(used when direct connections fail)",
        )

    @hookimpl
    def hilltop_transport_start(self, session: TransitSession) -> list[relay_v1.Hint]:
        return list(session.transit_helpers)

    @hookimpl
    def hilltop_transport_connect(self, hint: Any, session: TransitSession) -> Any:
        if hint.type != relay_v1.TYPE or not hint.endpoints or session.tor:
            return None  # under --tor, tor-relay dials relays through Tor
        ep = hint.endpoints[0]
        if isinstance(ep, websocket_v1.Hint):
            from hilltop.wsstream import dial_websocket  # autobahn: only for a WebSocket relay

            settings = session.settings.get(RelaySettings) or RelaySettings()
            try:
                ca_pem = settings.ca_pem()
            except LocalError as err:  # this dial fails; the transport is not at fault
                return defer.fail(DialError(str(err)))
            return dial_websocket(session.reactor, ep.url, f"{NAME} {ep}", ca_pem=ca_pem)
        return dial_tcp(session.reactor, ep.hostname, ep.port, f"{NAME} {ep}")
