"""The HTTP guard: no request body is read, connections are capped, idle ones closed."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.web import http, resource, server

from hilltop._runtime.httpguard import REFUSE_BODY, ConnectionLimits, guard_site

LIMITS = ConnectionLimits(per_address=2, total=3, idle_seconds=10.0)


class Hello(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Any) -> bytes:  # noqa: N802
        return b"hello"

    render_POST = render_GET  # a resource that would take a body: the guard must come first


@pytest.fixture
def no_spooling(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Records every request body Twisted would start to store (its ``_getContentFile``)."""
    opened: list[Any] = []
    spool = http._getContentFile

    def recorded(length: int | None) -> Any:
        opened.append(length)
        return spool(length)

    monkeypatch.setattr(http, "_getContentFile", recorded)
    return opened


def connect(factory: Any, host: str = "198.18.0.2") -> tuple[Any, StringTransport]:
    protocol = factory.buildProtocol(IPv4Address("TCP", host, 40000))
    assert protocol is not None, f"refused a connection from {host}"
    transport = StringTransport(peerAddress=IPv4Address("TCP", host, 40000))
    protocol.makeConnection(transport)
    return protocol, transport


def guarded(clock: Clock | None = None) -> Any:
    return guard_site(server.Site(Hello(), reactor=clock or Clock()), LIMITS)


@pytest.mark.parametrize("headers", [
    b"Content-Length: 1500000000\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Content-Length: 1\r\nExpect: 100-continue\r\n",
])
def test_a_body_is_refused_before_a_byte_of_it_is_stored(headers: bytes,
                                                         no_spooling: list[Any]) -> None:
    protocol, transport = connect(guarded())
    protocol.dataReceived(b"POST / HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n" + b"A" * 5000)
    protocol.dataReceived(b"B" * 5000)  # more body after the refusal: dropped, not parsed
    assert transport.value() == REFUSE_BODY  # no "100 Continue", no page
    assert transport.disconnecting
    assert no_spooling == []


def test_requests_without_a_body_are_served(no_spooling: list[Any]) -> None:
    protocol, transport = connect(guarded())
    protocol.dataReceived(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    protocol.dataReceived(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    assert transport.value().startswith(b"HTTP/1.1 200 OK")
    assert transport.value().count(b"hello") == 2
    assert not transport.disconnecting
    assert no_spooling == [0, 0]  # Twisted's empty BytesIO, never a temporary file


def test_connections_are_capped_per_address_and_in_all() -> None:
    factory = guarded()
    first, _ = connect(factory, "198.18.0.2")
    connect(factory, "198.18.0.2")
    assert factory.buildProtocol(IPv4Address("TCP", "198.18.0.2", 1)) is None  # per address
    connect(factory, "198.18.0.3")
    assert factory.buildProtocol(IPv4Address("TCP", "198.18.0.4", 1)) is None  # in all
    assert factory.refused == 2
    first.connectionLost(None)  # a closed connection makes room again, for anyone
    connect(factory, "198.18.0.4")
    assert factory.buildProtocol(IPv4Address("TCP", "198.18.0.2", 1)) is None


def test_an_idle_connection_is_closed_and_its_place_freed() -> None:
    clock = Clock()
    factory = guarded(clock)
    protocol, transport = connect(factory)
    clock.advance(LIMITS.idle_seconds - 1)
    protocol.dataReceived(b"GET / HT")  # any byte resets the clock
    clock.advance(LIMITS.idle_seconds - 1)
    assert not transport.disconnecting
    clock.advance(1)
    assert transport.disconnecting and not transport.disconnected
    clock.advance(5)  # the peer did not let it go: aborted (Twisted's own wait is 15 s)
    assert transport.disconnected
    protocol.connectionLost(None)
    assert factory.by_address == {}
