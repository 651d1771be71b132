"""Fixtures for transport tests: the official transit relay on a free loopback port.

They come from the conformance kit, exactly as a third-party plugin's tests would get them.
"""

from __future__ import annotations

from hilltop.testing import free_port, transit_relay

__all__ = ["free_port", "transit_relay"]
