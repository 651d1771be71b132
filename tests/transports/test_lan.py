"""The lan transport stays quiet (no sockets, no multicast) whenever it has nothing to find.

Its real work is covered in integration/test_lan.py, inside network namespaces: mDNS must never
run on this machine's own interfaces, so these tests only check the cases where it declines.
"""

from __future__ import annotations

from typing import Any

import pytest

from hilltop.hookspecs import TransitSession
from hilltop.lan.settings import LanSettings, LanTags
from hilltop.transit.plugins import load_transports
from hilltop.transit.settings import TransportSettings
from hilltop.transports.lan import Lan, _loopback_url


class NoReactor:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the lan transport touched the reactor ({name})")


TAGS = LanTags.derive(b"k" * 32, "sender")


@pytest.mark.parametrize("settings", [
    TransportSettings(),                                      # no tags: not a session
    TransportSettings(LanSettings()),
    TransportSettings(LanSettings(tags=TAGS, mailbox_url="ws://127.0.0.1:4000/v1")),
    TransportSettings(LanSettings(tags=TAGS, mailbox_url="ws://[::1]:4000/v1")),
    TransportSettings(LanSettings(tags=TAGS, mailbox_url="ws://localhost:4000/v1")),
])
def test_declines_without_tags_or_with_a_loopback_mailbox(settings: TransportSettings) -> None:
    lan = Lan()
    session = TransitSession(reactor=NoReactor(), role="sender", settings=settings)
    assert lan.hilltop_transport_start(session) == []
    assert lan.hilltop_transport_stop() is None


def test_declines_under_tor() -> None:
    settings = TransportSettings(LanSettings(tags=TAGS, mailbox_url="ws://198.18.0.1:4000/v1"))
    session = TransitSession(reactor=NoReactor(), role="receiver", tor=True, settings=settings)
    assert Lan().hilltop_transport_start(session) == []


def test_declines_under_no_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    """--no-listen: no listener to announce, and not even a query (it leaves from our LAN
    address to every host on the link); the interfaces are not even looked up."""
    from hilltop.lan import service

    def looked(name: object) -> object:
        raise AssertionError("the lan transport looked for interfaces under --no-listen")

    monkeypatch.setattr(service, "lan_interfaces", looked)
    settings = TransportSettings(LanSettings(tags=TAGS, mailbox_url="ws://198.18.0.1:4000/v1"))
    session = TransitSession(reactor=NoReactor(), role="receiver", no_listen=True,
                             settings=settings)
    lan = Lan()
    assert lan.hilltop_transport_start(session) == []
    assert lan.hilltop_transport_stop() is None


def test_loopback_url() -> None:
    assert _loopback_url("ws://127.0.0.2:1/v1")
    assert not _loopback_url("ws://relay.magic-wormhole.io:4000/v1")
    assert not _loopback_url("ws://198.18.0.1:4000/v1")
    assert not _loopback_url(None)


def test_registered_through_its_entry_point_with_no_hint_types() -> None:
    lan = next(t for t in load_transports().loaded if t.name == "lan")
    assert lan.info.hint_types == () and not lan.info.relay
