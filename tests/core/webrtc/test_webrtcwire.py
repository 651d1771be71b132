"""The webrtc signalling codec, the ICE server settings and the mailbox side channel split."""

from __future__ import annotations

import json

import pytest

from hilltop import api
from hilltop.errors import HilltopError, ProtocolError
from hilltop.webrtc import settings, signals
from hilltop.webrtc.settings import IceServer


def test_offer_round_trip() -> None:
    data = signals.encode("offer", "v=0\r\n")
    assert json.loads(data) == {"hilltop-webrtc": {"kind": "offer", "sdp": "v=0\r\n"}}
    assert signals.decode(data) == signals.Signal("offer", "v=0\r\n")


def test_wide_is_said_only_when_true() -> None:
    wide = signals.encode("answer", "v=0\r\n", wide=True)
    assert json.loads(wide)["hilltop-webrtc"]["wide"] is True
    assert signals.decode(wide).wide
    assert "wide" not in json.loads(signals.encode("answer", "v=0\r\n"))["hilltop-webrtc"]
    # only a JSON true counts; anything else is "no"
    odd = b'{"hilltop-webrtc": {"kind": "offer", "sdp": "x", "wide": "yes"}}'
    assert not signals.decode(odd).wide


def test_bye_has_no_sdp() -> None:
    assert signals.decode(signals.encode("bye")) == signals.Signal("bye")


@pytest.mark.parametrize("bad", [
    b"not json", b"[]", b'{"hilltop-webrtc": 1}', b'{"hilltop-webrtc": {"kind": "x"}}',
    b'{"hilltop-webrtc": {"kind": "offer"}}', b'{"hilltop-webrtc": {"kind": "answer", "sdp": 3}}',
    b'{"hilltop-webrtc": {"kind": "offer", "sdp": "x"}, "other": 1}',
])
def test_malformed_signals_are_protocol_errors(bad: bytes) -> None:
    with pytest.raises(ProtocolError):
        signals.decode(bad)


def test_encode_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        signals.encode("hello", "sdp")
    with pytest.raises(ValueError):
        signals.encode("offer")


def test_side_channel_split() -> None:
    assert api._side_channel(signals.encode("answer", "s")) == "webrtc"
    assert api._side_channel(b'{"offer": {"message": "hi"}}') is None
    assert api._side_channel(b'{"hilltop-x": 1, "y": 2}') is None
    assert api._side_channel(b'{"hilltop-broken') is None


def test_ice_servers() -> None:
    assert settings.ice_servers([], [], None, None) == ()
    got = settings.ice_servers(["stun:198.19.0.1:3478"], ["turn:198.19.0.1:3478?transport=udp"],
                               "u", "p")
    assert got == (IceServer("stun:198.19.0.1:3478"),
                   IceServer("turn:198.19.0.1:3478?transport=udp", username="u",
                             credential="p"))
    with pytest.raises(HilltopError):
        settings.ice_servers([], ["turn:x:3478"], None, None)
    with pytest.raises(HilltopError):
        settings.stun_server("http://example.org")


def test_settings_flags_win_over_config() -> None:
    config = {"stun": "stun:a:1", "turn": ["turn:b:2"], "turn-user": "u",
              "turn-password": "p", "relay-only": True}
    got = settings.from_flags([], [], None, None, config=config)
    assert [s.urls for s in got.ice_servers] == ["stun:a:1", "turn:b:2"]
    assert got.relay_only is True
    got = settings.from_flags(["stun:c:3"], [], None, None, config=config)
    assert [s.urls for s in got.ice_servers] == ["stun:c:3", "turn:b:2"]


@pytest.mark.parametrize("table", [
    {"stun": 5}, {"turn": ["turn:a:1", 3]}, {"turn-user": 1}, {"turn-password": ["x"]},
    {"relay-only": "yes"}, {"stun": {"url": "stun:a"}}, {"relay-only": True},
])
def test_bad_config_values_are_clear_errors(table: dict) -> None:
    with pytest.raises(HilltopError, match=r"\[webrtc\]|relay-only"):
        settings.from_flags([], [], None, None, config=table)


@pytest.mark.parametrize(("tor", "transports", "offered"), [
    (False, None, True), (False, ["direct-tcp", "webrtc"], True),
    (False, ["direct-tcp"], False), (True, None, False), (True, ["webrtc"], False),
])
def test_webrtc_advertised_only_when_this_run_may_use_it(tor: bool, transports: list | None,
                                                        offered: bool) -> None:
    pytest.importorskip("aiortc")
    from hilltop import TransitOptions
    from hilltop.cli.transitopts import app_versions
    from hilltop.rendezvous import capabilities

    ours = capabilities.from_app_versions(
        app_versions(TransitOptions(tor=tor, transports=transports)))
    assert (capabilities.WEBRTC in ours.transports) is offered
    assert capabilities.BIG_RECORDS in ours.features
