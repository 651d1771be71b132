"""The relay plan: one dial list per session, de-duplicated, capped per side and staggered."""

from __future__ import annotations

from hilltop.hints import direct_tcp_v1, parse_hints, relay_v1, websocket_v1
from hilltop.transit import relayplan
from hilltop.transit.relayplan import merge, plan


def tcp(host: str, port: int = 4001, priority: float = 0.0) -> direct_tcp_v1.Hint:
    return direct_tcp_v1.Hint(host, port, priority)


def relay(*endpoints: relay_v1.Endpoint, name: str | None = None) -> relay_v1.Hint:
    return relay_v1.Hint(tuple(endpoints), name)


def labels(dials: list[relayplan.RelayDial]) -> list[tuple[str, float]]:
    return [(str(d.hint), d.offset) for d in dials]


def test_hints_sharing_an_endpoint_are_one_relay() -> None:
    ws = websocket_v1.Hint("wss://a.example/")
    got = merge([relay(tcp("a.example")), relay(tcp("b.example")),
                 relay(tcp("A.example"), ws, name="a"), relay(tcp("a.example"))])
    assert got == [relay(tcp("a.example"), ws, name="a"), relay(tcp("b.example"))]


def test_a_hint_bridging_two_relays_joins_them() -> None:
    got = merge([relay(tcp("a")), relay(tcp("b")), relay(tcp("b"), tcp("a"))])
    assert got == [relay(tcp("a"), tcp("b"))]


def test_official_peer_naming_our_default_relay_is_dialled_once() -> None:
    """Official 0.24 sends the default relay as we do (its wire shape): one dial, not two."""
    [theirs] = parse_hints([{"type": "relay-v1", "hints": [
        {"type": "direct-tcp-v1", "hostname": "transit.magic-wormhole.io", "port": 4001,
         "priority": 0.0}]}])
    ours = relay(tcp("transit.magic-wormhole.io"), websocket_v1.Hint("wss://t.example/"))
    assert labels(plan([theirs], [ours])) == [("transit.magic-wormhole.io:4001", 0.0),
                                              ("wss://t.example/", 1.0)]


def test_capped_per_side_and_the_same_for_both_roles() -> None:
    senders = [relay(tcp(f"s{i}")) for i in range(5)]
    receivers = [relay(tcp(f"r{i}")) for i in range(5)]
    dials = plan(senders, receivers)
    assert [str(d.hint) for d in dials] == [
        "s0:4001", "s1:4001", "s2:4001", "r0:4001", "r1:4001", "r2:4001"]
    assert len(dials) == 2 * relayplan.MAX_RELAYS_PER_SIDE


def test_a_flood_of_peer_relays_costs_three_dials() -> None:
    flood = [relay(*(tcp(f"h{i}", p) for p in range(1, 50))) for i in range(200)]
    dials = plan([], flood)
    assert len(dials) == relayplan.MAX_RELAYS_PER_SIDE * relayplan.MAX_ENDPOINTS_PER_RELAY


def test_staggered_first_endpoints_first_priority_first() -> None:
    a = relay(tcp("a"), websocket_v1.Hint("ws://a/"))
    b = relay(tcp("b", priority=2.0))  # wormhole-william's relay priority
    assert labels(plan([a], [b], stagger=0.5)) == [
        ("b:4001", 0.0), ("a:4001", 0.5), ("ws://a/", 1.0)]
    assert all(len(d.hint.endpoints) == 1 for d in plan([a], [b]))
