"""Fixtures for transport tests: the official transit relay on a free loopback port.

``transit_relay`` comes from the conformance kit, exactly as a third-party plugin's tests would
get it; ``websocket_relay`` is the same relay with its WebSocket side on too (``--websocket``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import relaykit

from hilltop.testing import free_port, transit_relay

__all__ = ["free_port", "transit_relay", "websocket_relay"]


@pytest.fixture
def websocket_relay() -> Iterator[relaykit.RelayPorts]:
    """The official relay with TCP and WebSocket sides sharing one pairing table."""
    yield from relaykit.websocket_relay()
