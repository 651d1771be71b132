"""What a run advertises about its transports in ``app_versions``."""

from __future__ import annotations

import pytest

from hilltop.cli.transitopts import app_versions
from hilltop.transit.options import TransitOptions
from hilltop.transit.settings import TransportSettings
from hilltop.webrtc.settings import IceServer, WebRTCSettings

pytest.importorskip("aiortc")  # without it webrtc is never advertised anyway

TURN = WebRTCSettings(ice_servers=(IceServer("turn:198.18.0.1:3478", "user", "password"),))


def transports(**options: object) -> list[str]:
    return app_versions(TransitOptions(**options))["hilltop"]["transports"]  # type: ignore[arg-type]


def test_webrtc_is_not_offered_under_no_listen_without_turn() -> None:
    """The transport would decline (host candidates are local addresses), so a hilltop peer
    must not start gathering for nothing."""
    assert transports() == ["webrtc"]
    assert transports(no_listen=True) == []
    assert transports(no_listen=True, settings=TransportSettings(TURN)) == ["webrtc"]
    assert transports(tor=True, settings=TransportSettings(TURN)) == []


def test_only_a_sender_that_will_need_transit_announces_it() -> None:
    from hilltop.rendezvous.capabilities import TRANSIT_FOLLOWS

    def features(**kw: bool) -> list[str]:
        return app_versions(TransitOptions(), **kw)["hilltop"]["features"]

    assert TRANSIT_FOLLOWS in features(transit_follows=True)  # a file, folder, stream
    assert TRANSIT_FOLLOWS not in features()  # a text, a receiver


@pytest.mark.parametrize(("options", "listed"), [
    ({}, True),
    ({"tor": True}, True),
    ({"no_listen": True}, True),
    ({"transports": ["direct-tcp"]}, False),
    ({"durable": True}, False),
])
def test_a_run_that_chose_its_transit_does_not_take_files_in_the_offer(
        options: dict[str, object], listed: bool) -> None:
    from hilltop.rendezvous.capabilities import INLINE

    features = app_versions(TransitOptions(**options))["hilltop"]["features"]  # type: ignore[arg-type]
    assert (INLINE in features) is listed
