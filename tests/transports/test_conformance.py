"""The built-in transports pass the same conformance kit third-party plugins use."""

from __future__ import annotations

import pytest
from relaykit import RelayPorts

from hilltop.hints import parse_transit_helper
from hilltop.testing import ConformanceSuite, TransportSubject
from hilltop.transports.direct_tcp import DirectTCP
from hilltop.transports.relay import Relay


class TestDirectTCP(ConformanceSuite):
    @pytest.fixture
    def transport_subject(self) -> TransportSubject:
        return TransportSubject(DirectTCP, receiver={"no_listen": True},
                                description="direct-tcp 127.0.0.1:")


class TestDirectTCPBothListen(ConformanceSuite):
    @pytest.fixture
    def transport_subject(self) -> TransportSubject:
        return TransportSubject(DirectTCP, description="direct-tcp 127.0.0.1:")


class TestRelay(ConformanceSuite):
    @pytest.fixture
    def transport_subject(self, transit_relay: int) -> TransportSubject:
        helper = parse_transit_helper(f"tcp:127.0.0.1:{transit_relay}")
        side = {"no_listen": True, "transit_helpers": [helper]}
        return TransportSubject(Relay, sender=side, receiver=side,
                                description=f"relay 127.0.0.1:{transit_relay}")


class TestRelayWebSocket(ConformanceSuite):
    """The relay transport through the official relay's WebSocket side (``--websocket``)."""

    @pytest.fixture
    def transport_subject(self, websocket_relay: RelayPorts) -> TransportSubject:
        helper = parse_transit_helper(websocket_relay.url)
        side = {"no_listen": True, "transit_helpers": [helper]}
        return TransportSubject(Relay, sender=side, receiver=side,
                                description=f"relay {websocket_relay.url}")
