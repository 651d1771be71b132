"""Which public address the ``webrtc`` transport puts in its server-reflexive candidate.

With no STUN server configured, the candidate comes from what the mailbox server saw of us
(the session's services). After the transfer engine moved that address out of the typed
settings into ``session.services``, the transport still looked in the settings, found
nothing, and sent no candidate: ICE then failed across two cone NATs
(``integration/test_webrtc_nat.py::test_no_stun_server_the_mailbox_address_punches_the_hole``).
"""

from __future__ import annotations

from typing import Any

from hilltop.hookspecs import TransitSession
from hilltop.transports.webrtc import _reflexive_host
from hilltop.webrtc.settings import IceServer, WebRTCSettings

PUBLIC = ("198.51.100.7", 40123)


class Services:
    """The part of the session's services the transport reads here."""

    def __init__(self, seen: tuple[str, int] | None) -> None:
        self.seen_address = seen
        self.mailbox_local_address = ("10.0.0.5", 50000)
        self.mailbox_url = "ws://mailbox.example/v1"


def session(seen: tuple[str, int] | None, **kw: Any) -> TransitSession:
    return TransitSession(reactor=None, role="sender", services=Services(seen), **kw)


def test_the_mailbox_seen_address_is_the_reflexive_host() -> None:
    assert _reflexive_host(session(PUBLIC), WebRTCSettings()) == PUBLIC[0]


def test_no_reflexive_host_where_it_would_not_help_or_is_not_wanted() -> None:
    stun = WebRTCSettings(ice_servers=(IceServer("stun:198.51.100.1:3478"),))
    assert _reflexive_host(session(PUBLIC), stun) is None  # STUN finds it itself
    assert _reflexive_host(session(PUBLIC), WebRTCSettings(relay_only=True)) is None
    assert _reflexive_host(session(PUBLIC, no_listen=True), WebRTCSettings()) is None
    assert _reflexive_host(session(("127.0.0.1", 5)), WebRTCSettings()) is None
    assert _reflexive_host(session(None), WebRTCSettings()) is None
    no_services = TransitSession(reactor=None, role="sender")
    assert _reflexive_host(no_services, WebRTCSettings()) is None
