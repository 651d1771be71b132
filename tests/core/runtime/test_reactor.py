"""The asyncio-loop name resolver that lets plain asyncio programs use hilltop."""

from __future__ import annotations

import pytest_twisted
from twisted.internet import defer
from twisted.internet.address import IPv4Address

from hilltop._runtime.reactor import _LoopResolver


class Receiver:
    def __init__(self) -> None:
        self.began = None
        self.addresses: list = []
        self.done: defer.Deferred[None] = defer.Deferred()

    def resolutionBegan(self, resolution) -> None:  # noqa: N802
        self.began = resolution

    def addressResolved(self, address) -> None:  # noqa: N802
        self.addresses.append(address)

    def resolutionComplete(self) -> None:  # noqa: N802
        self.done.callback(None)


@pytest_twisted.ensureDeferred
async def test_resolves_through_the_loop() -> None:
    from twisted.internet import reactor

    receiver = Receiver()
    _LoopResolver(reactor._asyncioEventloop).resolveHostName(
        receiver, "127.0.0.1", 4000, [IPv4Address])
    await receiver.done
    assert receiver.began.name == "127.0.0.1"
    assert receiver.addresses == [IPv4Address("TCP", "127.0.0.1", 4000)]
