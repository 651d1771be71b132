"""Hint parsing across the shapes official Python (0.24) and wormhole-william send."""

from __future__ import annotations

import logging

import pytest

from hilltop.errors import LocalError
from hilltop.hints import (
    MalformedHintError,
    RawHint,
    direct_tcp_v1,
    hints_to_wire,
    parse_hints,
    parse_transit_helper,
    relay_v1,
    tor_tcp_v1,
    websocket_v1,
)

# What Python 0.24 sends as a sender with a relay configured.
MW_HINTS = [
    {"type": "direct-tcp-v1", "hostname": "192.0.2.7", "port": 40123, "priority": 0.0},
    {"type": "relay-v1", "hints": [
        {"type": "direct-tcp-v1", "hostname": "transit.example", "port": 4001, "priority": 0.0}]},
]
# What wormhole-william sends: every field on every hint.
WW_HINTS = [
    {"type": "direct-tcp-v1", "hostname": "192.0.2.8", "port": 35001, "priority": 0,
     "hints": None},
    {"type": "relay-v1", "hostname": "", "port": 0, "priority": 2.0, "hints": [
        {"type": "direct-tcp-v1", "hostname": "transit.example", "port": 4001, "priority": 2.0,
         "hints": None}]},
]


def test_magic_wormhole_shapes() -> None:
    direct, relay = parse_hints(MW_HINTS)
    assert direct == direct_tcp_v1.Hint("192.0.2.7", 40123, 0.0)
    assert relay == relay_v1.Hint((direct_tcp_v1.Hint("transit.example", 4001, 0.0),))
    assert hints_to_wire([direct, relay]) == MW_HINTS


def test_wormhole_william_shapes() -> None:
    direct, relay = parse_hints(WW_HINTS)
    assert direct == direct_tcp_v1.Hint("192.0.2.8", 35001, 0.0)
    assert isinstance(direct.priority, float)
    assert relay.endpoints == (direct_tcp_v1.Hint("transit.example", 4001, 2.0),)
    assert relay.priority == 2.0


def test_missing_priority_is_zero_and_outer_relay_priority_fills_in() -> None:
    [d] = parse_hints([{"type": "direct-tcp-v1", "hostname": "h", "port": 1}])
    assert d.priority == 0.0
    [r] = parse_hints([{"type": "relay-v1", "priority": 3,
                        "hints": [{"type": "direct-tcp-v1", "hostname": "h", "port": 2}]}])
    assert r.endpoints[0].priority == 3.0


def test_ipv6_hostnames() -> None:
    [a, b] = parse_hints([
        {"type": "direct-tcp-v1", "hostname": "fd00::2", "port": 5},
        {"type": "direct-tcp-v1", "hostname": "[fd00::3]", "port": 6},
    ])
    assert a.hostname == "fd00::2" and str(a) == "[fd00::2]:5"
    assert b.hostname == "fd00::3"


def test_tor_hint() -> None:
    [t] = parse_hints([{"type": "tor-tcp-v1", "hostname": "abc.onion", "port": 80,
                        "priority": 0.5}])
    assert t == tor_tcp_v1.Hint("abc.onion", 80, 0.5)
    assert t.to_wire()["type"] == "tor-tcp-v1"


def test_unknown_types_dropped_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="hilltop.hints")
    got = parse_hints([{"type": "webrtc-v9", "x": 1}, {"no": "type"}, "junk", MW_HINTS[0]])
    assert got == [direct_tcp_v1.Hint("192.0.2.7", 40123, 0.0)]
    assert all(r.levelno == logging.DEBUG for r in caplog.records)


@pytest.mark.parametrize("bad", [
    {"type": "direct-tcp-v1", "hostname": 5, "port": 1},
    {"type": "direct-tcp-v1", "hostname": "", "port": 1},
    {"type": "direct-tcp-v1", "hostname": "h", "port": "1"},
    {"type": "direct-tcp-v1", "hostname": "h", "port": True},
    {"type": "direct-tcp-v1", "hostname": "h", "port": 70000},
    {"type": "direct-tcp-v1", "hostname": "h", "port": 1, "priority": "high"},
    {"type": "relay-v1", "hints": None},
    {"type": "relay-v1", "hints": [{"type": "websocket-v1", "url": "http://x"}]},
    {"type": "relay-v1", "hints": [{"type": "websocket", "url": "ws://x:0/"}]},
    {"type": "relay-v1", "hints": [{"type": "quic-v9", "url": "ws://x"}]},
])
def test_malformed_dropped_with_warning(bad: dict, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="hilltop.hints")
    assert parse_hints([bad]) == []
    [rec] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "malformed" in rec.getMessage() and bad["type"] in rec.getMessage()


def test_module_parse_raises() -> None:
    with pytest.raises(MalformedHintError):
        direct_tcp_v1.parse({"hostname": "h"})


def test_not_a_list() -> None:
    assert parse_hints(None) == []


def test_relay_split_and_name() -> None:
    [r] = parse_hints([{"type": "relay-v1", "name": "main", "hints": [
        {"type": "direct-tcp-v1", "hostname": "a", "port": 1, "priority": 1.0},
        {"type": "webtransport-v9", "url": "https://skip"},
        {"type": "direct-tcp-v1", "hostname": "b", "port": 2}]}])
    assert r.name == "main" and r.priority == 1.0
    parts = r.split()
    assert [str(p) for p in parts] == ["a:1", "b:2"]
    assert r.to_wire()["name"] == "main"


def test_relay_websocket_endpoints_both_spellings() -> None:
    """The spec's ``websocket-v1`` and magic-wormhole.rs's ``websocket`` are both read; we
    write the spec's name, beside the TCP endpoint that official peers use."""
    [r] = parse_hints([{"type": "relay-v1", "hints": [
        {"type": "direct-tcp-v1", "hostname": "relay.example", "port": 4001},
        {"type": "websocket-v1", "url": "wss://relay.example/transit"},
        {"type": "websocket", "url": "ws://relay.example:4002/"}]}])
    tcp, wss, ws = r.endpoints
    assert isinstance(wss, websocket_v1.Hint) and isinstance(ws, websocket_v1.Hint)
    assert (wss.hostname, wss.port, wss.tls) == ("relay.example", 443, True)
    assert (ws.hostname, ws.port, ws.tls) == ("relay.example", 4002, False)
    assert [e["type"] for e in r.to_wire()["hints"]] == [
        "direct-tcp-v1", "websocket-v1", "websocket-v1"]
    assert parse_hints([r.to_wire()]) == [r]


def test_relay_keeps_its_good_endpoints_when_one_is_malformed(
        caplog: pytest.LogCaptureFixture) -> None:
    [r] = parse_hints([{"type": "relay-v1", "hints": [
        {"type": "websocket-v1", "url": 7},
        {"type": "direct-tcp-v1", "hostname": "relay.example", "port": 4001}]}])
    assert r.endpoints == (direct_tcp_v1.Hint("relay.example", 4001),)
    assert any("malformed endpoint" in rec.getMessage() for rec in caplog.records)


@pytest.mark.parametrize("text,host,port,prio", [
    ("tcp:transit.magic-wormhole.io:4001", "transit.magic-wormhole.io", 4001, 0.0),
    ("tcp:127.0.0.1:4001:priority=2.5", "127.0.0.1", 4001, 2.5),
    ("tcp:[::1]:4001", "::1", 4001, 0.0),
    ("tcp:[fd00::1]:9:priority=-1", "fd00::1", 9, -1.0),
])
def test_transit_helper(text: str, host: str, port: int, prio: float) -> None:
    hint = parse_transit_helper(text)
    assert hint.endpoints == (direct_tcp_v1.Hint(host, port, prio),)


@pytest.mark.parametrize("text", [
    "transit.example:4001", "tcp:host", "tcp:host:port", "tcp:::1:4001", "tcp:h:0",
    "tcp:h:1:priority=x", "tcp:h:1:color=red", "ws:h:1", "ws://", "wss://h:99999/",
    "http://h/", "tcp:h:1,", ",ws://h/", "ws://h /", "ws://h\x00/", "ws://[::1/",
])
def test_transit_helper_errors(text: str) -> None:
    with pytest.raises(LocalError, match="transit helper"):
        parse_transit_helper(text)


def test_transit_helper_websocket_and_several_endpoints() -> None:
    assert parse_transit_helper("wss://relay.example/").endpoints == (
        websocket_v1.Hint("wss://relay.example/"),)
    relay = parse_transit_helper("tcp:relay.example:4001:priority=1, ws://relay.example:80/")
    assert relay.endpoints == (direct_tcp_v1.Hint("relay.example", 4001, 1.0),
                               websocket_v1.Hint("ws://relay.example:80/"))


def test_claimed_unknown_types_pass_through_raw() -> None:
    items = [{"type": "unix-socket-v1", "path": "/run/x.sock", "priority": 0.5},
             {"type": "webrtc-v9", "x": 1}, MW_HINTS[0]]
    unix, direct = parse_hints(items, claimed={"unix-socket-v1"})
    assert isinstance(unix, RawHint) and unix.type == "unix-socket-v1"
    assert unix.get("path") == "/run/x.sock" and unix.priority == 0.5
    assert unix.to_wire() == items[0]
    assert str(unix) == '{"path":"/run/x.sock"}'
    assert direct == direct_tcp_v1.Hint("192.0.2.7", 40123, 0.0)
    # a claimed built-in type is still parsed by its own module
    assert parse_hints(MW_HINTS[:1], claimed={"direct-tcp-v1"}) == [direct]


def test_raw_hint_is_a_copy_and_lenient_about_priority() -> None:
    wire = {"type": "x-v1", "nested": {"a": [1]}, "priority": "high"}
    [h] = parse_hints([wire], claimed=["x-v1"])
    wire["nested"]["a"].append(2)
    assert h.get("nested") == {"a": [1]} and h.priority == 0.0
    out = h.to_wire()
    out["nested"]["a"].append(3)
    assert h.get("nested") == {"a": [1]}
    assert RawHint.make("x-v1", path="/p") == RawHint.make("x-v1", path="/p")
    assert hash(RawHint.make("x-v1", path="/p")) == hash(RawHint.make("x-v1", path="/q"))
