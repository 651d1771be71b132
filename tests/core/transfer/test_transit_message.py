"""Which abilities our ``transit`` message lists: every loaded transport's hint types, except
that a transport both sides must dial (``TransportInfo.inbound`` False) is listed only when
we gave a hint of its type. The rule reads the plugin's own declaration, so a third-party
transport of that kind gets the same treatment as ``webrtc`` and ``tcp-punch``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hilltop.hints import parse_hints
from hilltop.hookspecs import TransportInfo
from hilltop.transfer.session import transit_message


@dataclass
class Loaded:
    info: TransportInfo


@dataclass
class Transports:
    loaded: list[Loaded] = field(default_factory=list)


@dataclass
class Runner:
    transports: Transports


def abilities(infos: list[TransportInfo], hints: list[dict[str, Any]]) -> list[str]:
    runner: Any = Runner(Transports([Loaded(i) for i in infos]))
    wire = json.loads(transit_message(runner, parse_hints(hints, claimed=["mutual-v1"])))
    return [a["type"] for a in wire["transit"]["abilities-v1"]]


INFOS = [
    TransportInfo(name="direct-tcp", hint_types=("direct-tcp-v1",)),
    TransportInfo(name="relay", hint_types=("relay-v1",), relay=True),
    TransportInfo(name="mutual", hint_types=("mutual-v1",), inbound=False),  # a plugin's
]
DIRECT = {"type": "direct-tcp-v1", "priority": 0.0, "hostname": "127.0.0.1", "port": 4001}


def test_a_transport_both_sides_dial_is_listed_only_with_a_hint_of_ours() -> None:
    assert abilities(INFOS, [DIRECT]) == ["direct-tcp-v1", "relay-v1"]
    mutual = {"type": "mutual-v1", "anything": 1}
    assert abilities(INFOS, [DIRECT, mutual]) == ["direct-tcp-v1", "relay-v1", "mutual-v1"]


def test_an_inbound_transport_is_listed_without_hints() -> None:
    # a side that only dials (--no-listen) still tells the peer which of its hints it can use
    assert abilities(INFOS[:2], []) == ["direct-tcp-v1", "relay-v1"]
