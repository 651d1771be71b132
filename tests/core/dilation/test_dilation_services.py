"""Side channels scoped to a Dilation generation: a late signal of one generation never
reaches the next, and the transport sees its usual channel."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hilltop._runtime.awaitable import Queue
from hilltop.api import _side_channel
from hilltop.dilation.services import GenerationServices
from hilltop.errors import ProtocolError
from hilltop.transit.services import WormholeServices

KEY = bytes(32)


class Mailbox:
    """One side's wormhole, delivering to the peer's side-channel queues as api.Wormhole
    routes them (by the message's one key)."""

    def __init__(self) -> None:
        self.peer: Mailbox | None = None
        self.side: dict[str, Queue] = {}
        self.sent: list[bytes] = []

    def send_message(self, data: bytes) -> None:
        self.sent.append(data)
        assert self.peer is not None
        name = _side_channel(data)
        assert name is not None, data
        self.peer.side_messages(name).put(data)

    def side_messages(self, name: str) -> Queue:
        return self.side.setdefault(name, Queue())


def pair() -> tuple[Mailbox, Mailbox]:
    a, b = Mailbox(), Mailbox()
    a.peer, b.peer = b, a
    return a, b


def got(queue_get: Any) -> bytes:
    """The result of an already-fired get (the test never waits)."""
    box: list[bytes] = []
    queue_get.addCallback(box.append)
    assert box, "nothing arrived"
    return box[0]


def test_a_late_signal_of_one_generation_does_not_reach_the_next() -> None:
    a, b = pair()
    old = GenerationServices(a, KEY, 3).side_channel("webrtc")
    old.send(b'{"hilltop-webrtc":{"kind":"answer","sdp":"stale"}}')
    new = GenerationServices(a, KEY, 4).side_channel("webrtc")
    new.send(b'{"hilltop-webrtc":{"kind":"answer","sdp":"fresh"}}')
    assert json.loads(a.sent[0]) == {"hilltop-dilate-3.webrtc": {"kind": "answer",
                                                                 "sdp": "stale"}}
    theirs = GenerationServices(b, KEY, 4).side_channel("webrtc")
    from twisted.internet import defer

    # the transport reads its usual form, and only its generation's message
    result = got(defer.ensureDeferred(theirs.receive()))
    assert json.loads(result) == {"hilltop-webrtc": {"kind": "answer", "sdp": "fresh"}}
    assert "webrtc" not in b.side  # the unscoped channel of a file transfer saw nothing


def test_a_transfer_keeps_its_plain_channel() -> None:
    a, _b = pair()
    services = WormholeServices(a, KEY)
    assert services.generation is None
    services.side_channel("webrtc").send(b'{"hilltop-webrtc":{"kind":"bye"}}')
    assert json.loads(a.sent[0]) == {"hilltop-webrtc": {"kind": "bye"}}


def test_what_a_transport_may_send_is_checked_as_before() -> None:
    a, _b = pair()
    channel = GenerationServices(a, KEY, 0).side_channel("webrtc")
    for bad in (b"not json", b"[1]", b'{"hilltop-other": 1}', b'{"hilltop-webrtc":1,"x":2}'):
        with pytest.raises(ValueError):
            channel.send(bad)
    assert a.sent == []


def test_derived_keys_and_peer_checks_are_the_sessions() -> None:
    a, _b = pair()
    assert (GenerationServices(a, KEY, 5).derive("lan")
            == WormholeServices(a, KEY).derive("lan"))
    assert GenerationServices(a, KEY, 5).generation == 5


def test_a_malformed_scoped_message_is_a_protocol_error() -> None:
    from twisted.internet import defer

    _a, b = pair()
    channel = GenerationServices(b, KEY, 1).side_channel("webrtc")
    b.side_messages("dilate-1.webrtc").put(b'{"hilltop-dilate-1.webrtc": 1, "extra": 2}')
    failures: list[Any] = []
    defer.ensureDeferred(channel.receive()).addErrback(failures.append)
    assert failures and failures[0].check(ProtocolError)
