"""LAN mode I/O helpers that need no network: interface selection (hilltop.lan.service)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hilltop.errors import LocalError
from hilltop.lan.service import lan_interfaces


@dataclass
class IP:
    ip: object


@dataclass
class Adapter:
    name: str
    nice_name: str
    index: int
    ips: list[IP]


ADAPTERS = [
    Adapter("lo", "lo", 1, [IP("127.0.0.1"), IP(("::1", 0, 0))]),
    Adapter("eth0", "eth0", 2, [IP("198.18.0.11"), IP(("2001:2::11", 0, 0)),
                                IP(("fe80::1", 0, 2))]),
    Adapter("wlan0", "wlan0", 3, [IP("198.18.1.5")]),
    Adapter("dummy", "dummy", 4, [IP(("fe80::9", 0, 4))]),
]


def test_all_lan_interfaces_skip_loopback_and_link_local_only() -> None:
    got = lan_interfaces(None, ADAPTERS)
    assert got.addresses == ("198.18.0.11", "198.18.1.5", "2001:2::11")
    assert got.zeroconf == ("198.18.0.11", 2, "198.18.1.5")
    assert got.names == ("eth0", "wlan0")


def test_one_interface_by_name() -> None:
    got = lan_interfaces("wlan0", ADAPTERS)
    assert got.addresses == ("198.18.1.5",) and got.zeroconf == ("198.18.1.5",)


@pytest.mark.parametrize("name,message", [("eth9", "no network interface named 'eth9'"),
                                          ("lo", "has no LAN address"),
                                          ("dummy", "has no LAN address")])
def test_unusable_interface_is_a_clear_error(name: str, message: str) -> None:
    with pytest.raises(LocalError, match=message):
        lan_interfaces(name, ADAPTERS)


@pytest.mark.parametrize("interface", [None, "wlan0"])
def test_lan_transit_restricts_the_listener_only_with_interface(interface: str | None) -> None:
    from hilltop import TransitOptions
    from hilltop.cli.lan import lan_transit
    from hilltop.lan.settings import LanSettings
    from hilltop.transports.direct_tcp import DirectTCPSettings

    chosen = lan_interfaces(interface, ADAPTERS)
    options = lan_transit(TransitOptions(transit_helpers=["tcp:relay:4001"]), chosen, interface,
                          default_helper=True)
    assert options.transit_helpers == []  # the public relay is not used on a LAN
    if interface is None:
        assert options.settings.get(DirectTCPSettings) is None
        assert options.local_addresses is None
    else:
        assert options.local_addresses == ["198.18.1.5"]
        assert options.settings.get(DirectTCPSettings) == DirectTCPSettings(("198.18.1.5",))
    assert options.settings.get(LanSettings) == LanSettings(interface=interface)
