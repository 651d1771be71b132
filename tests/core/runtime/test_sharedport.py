"""The mailbox connection's endpoint: every address of a name, a silent one not holding up the
next (happy eyeballs), a socket whose port the hole punch can share, and the errors the engine
shows, worded as Twisted's ``HostnameEndpoint`` worded them."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import error
from twisted.internet.protocol import Factory, Protocol

from hilltop._runtime.sharedport import ATTEMPT_DELAY, SharedPortEndpoint


def listener(host: str, port: int = 0) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family)
    s.bind((host, port))
    s.listen()
    return s


class Silent:
    """A port that drops SYNs: its accept queue is full (``listen(0)``, filled, never
    accepted), as a host behind a dropping firewall looks to a dialler."""

    def __init__(self, host: str, port: int = 0) -> None:
        self.sock = socket.socket()
        self.sock.bind((host, port))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fillers = []
        for _ in range(3):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex((host, self.port))
            self.fillers.append(c)
        time.sleep(0.2)  # the queue fills

    def close(self) -> None:
        for c in self.fillers:
            c.close()
        self.sock.close()


@pytest.fixture
def resolves_to(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Make the loop resolve every name to the given (host, port) pairs, in that order."""
    from twisted.internet import reactor

    def install(*addresses: tuple[str, int]) -> None:
        async def getaddrinfo(host: str, port: int, **kw: Any) -> list[Any]:
            return [(socket.AF_INET6 if ":" in a[0] else socket.AF_INET, socket.SOCK_STREAM, 6,
                     "", a) for a in addresses]
        monkeypatch.setattr(reactor._asyncioEventloop, "getaddrinfo", getaddrinfo)

    yield install


async def connect(host: str, port: int, timeout: float = 10.0) -> Protocol:
    from twisted.internet import reactor

    d = SharedPortEndpoint(reactor, host, port, timeout=timeout).connect(
        Factory.forProtocol(Protocol))
    d.addTimeout(20, reactor)
    return await d


async def failure(host: str, port: int, timeout: float = 10.0) -> Exception:
    with pytest.raises(Exception) as caught:
        await connect(host, port, timeout)
    return caught.value


@pytest_twisted.ensureDeferred
async def test_its_port_can_be_shared_by_the_punch() -> None:
    with listener("127.0.0.1") as server:
        protocol = await connect("127.0.0.1", server.getsockname()[1])
        local = protocol.transport.getHost()
        punch = socket.socket()
        punch.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        punch.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        with punch:
            punch.bind((local.host, local.port))  # EADDRINUSE unless the mailbox socket shares
        protocol.transport.loseConnection()


@pytest_twisted.ensureDeferred
async def test_ipv6_and_a_name() -> None:
    with listener("::1") as server:
        protocol = await connect("::1", server.getsockname()[1])
        assert protocol.transport.getPeer().host == "::1"
        protocol.transport.loseConnection()
    with listener("127.0.0.1") as server:
        protocol = await connect("localhost", server.getsockname()[1])
        assert protocol.transport.getPeer().host == "127.0.0.1"
        protocol.transport.loseConnection()


@pytest_twisted.ensureDeferred
async def test_a_silent_address_does_not_hold_up_the_next(resolves_to: Any) -> None:
    with listener("127.0.0.1") as server:
        port = server.getsockname()[1]
        silent = Silent("127.0.0.2", port)
        try:
            resolves_to(("127.0.0.2", port), ("127.0.0.1", port))
            started = time.monotonic()
            protocol = await connect("mailbox.example", port)
            took = time.monotonic() - started
        finally:
            silent.close()
    assert protocol.transport.getPeer().host == "127.0.0.1"
    assert ATTEMPT_DELAY * 0.8 <= took < 5, took
    protocol.transport.loseConnection()


@pytest_twisted.ensureDeferred
async def test_a_refused_address_lets_the_next_start_at_once(resolves_to: Any) -> None:
    with listener("127.0.0.1") as server:
        port = server.getsockname()[1]
        resolves_to(("127.0.0.2", port), ("127.0.0.1", port))  # nothing on 127.0.0.2: refused
        started = time.monotonic()
        protocol = await connect("mailbox.example", port)
        took = time.monotonic() - started
    assert protocol.transport.getPeer().host == "127.0.0.1"
    assert took < ATTEMPT_DELAY, took
    protocol.transport.loseConnection()


@pytest_twisted.ensureDeferred
async def test_errors_read_as_hostname_endpoints_did() -> None:
    with listener("127.0.0.1") as closed:
        port = closed.getsockname()[1]
    refused = await failure("127.0.0.1", port)
    assert isinstance(refused, error.ConnectionRefusedError), refused
    assert str(refused) == ("Connection was refused by other side: 111: Connection refused.")
    unknown = await failure("no-such-host.invalid", 4000)
    assert isinstance(unknown, error.DNSLookupError), unknown
    assert str(unknown) == (
        "DNS lookup failed: no results for hostname lookup: no-such-host.invalid.")
    silent = Silent("127.0.0.1")
    try:
        started = time.monotonic()
        timed_out = await failure("127.0.0.1", silent.port, timeout=0.5)
        took = time.monotonic() - started
    finally:
        silent.close()
    assert isinstance(timed_out, error.TimeoutError), timed_out
    assert str(timed_out) == "User timeout caused connection failure."
    assert took < 5, took


@pytest_twisted.ensureDeferred
async def test_cancelled_while_connecting() -> None:
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    silent = Silent("127.0.0.1")
    try:
        d = SharedPortEndpoint(reactor, "127.0.0.1", silent.port).connect(
            Factory.forProtocol(Protocol))
        await deferLater(reactor, 0.1)
        d.cancel()
        with pytest.raises(error.ConnectingCancelledError):  # as HostnameEndpoint's
            await d
    finally:
        silent.close()
