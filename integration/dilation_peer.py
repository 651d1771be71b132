"""hilltop as a Dilation library peer, the counterpart of official_dilation_peer.py.

    python dilation_peer.py MAILBOX_URL CODE open SIZE [TRANSIT_HELPER]
    python dilation_peer.py MAILBOX_URL CODE listen [TRANSIT_HELPER]

Same behaviour and output lines as the official script. With ``HILLTOP_DROP_AFTER=N`` the
``open`` side drops its L2 connection once N bytes came back (a reconnect mid-stream), and
prints ``generations G`` at the end. ``HILLTOP_TRANSPORTS=a,b`` races only those transports
for L2 connections; each generation's winner is printed as ``dilation: connected: WHAT``.
``HILLTOP_TOR_CONTROL=ENDPOINT`` puts the mailbox and every L2 connection through that Tor
(as ``--tor-control-port``). ``HILLTOP_PAUSE_AT=N``: the ``open`` side pauses its subchannel
(``pauseProducing``, a consumer that stopped reading) for 2 s once N bytes came back, then
prints ``paused at N, M more bytes while paused``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any

from twisted.internet import defer, task
from twisted.internet.protocol import Factory, Protocol

from hilltop import TransitOptions, Wormhole, install_asyncio_reactor

APPID = "hilltop.example/dilation-test"


def payload(size: int) -> bytes:
    out = bytearray()
    block = b"seed"
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:size])


class Echo(Protocol):
    def connectionMade(self) -> None:
        self.seen = hashlib.sha256()
        self.count = 0

    def dataReceived(self, data: bytes) -> None:
        self.seen.update(data)
        self.count += len(data)
        assert self.transport is not None
        self.transport.write(data)

    def connectionLost(self, reason: Any = None) -> None:
        print(f"served {self.count} {self.seen.hexdigest()}", flush=True)
        self.factory.done.callback(None)  # type: ignore[attr-defined]


class Client(Protocol):
    def connectionMade(self) -> None:
        self.got = bytearray()
        self.dropped = False
        assert self.transport is not None
        self.transport.write(self.factory.data)  # type: ignore[attr-defined]

    def dataReceived(self, data: bytes) -> None:
        self.got += data
        f: Any = self.factory
        if f.pause_at and not f.paused_at and len(self.got) >= f.pause_at:
            f.paused_at = len(self.got)
            assert self.transport is not None
            self.transport.pauseProducing()  # type: ignore[attr-defined]
            task.deferLater(f.reactor, 2.0, self._resume).addErrback(print)
        if f.drop_after and not self.dropped and len(self.got) >= f.drop_after:
            self.dropped = True
            print(f"dropping the L2 connection at {len(self.got)}", flush=True)
            f.dilator.drop_connection()
        if len(self.got) >= len(f.data):
            print(f"echoed {len(self.got)} {hashlib.sha256(self.got).hexdigest()}", flush=True)
            assert self.transport is not None
            self.transport.loseConnection()

    def _resume(self) -> None:
        f: Any = self.factory
        print(f"paused at {f.paused_at}, {len(self.got) - f.paused_at} more bytes while paused",
              flush=True)
        assert self.transport is not None
        self.transport.resumeProducing()  # type: ignore[attr-defined]

    def connectionLost(self, reason: Any = None) -> None:
        self.factory.done.callback(None)  # type: ignore[attr-defined]


async def tor_from_environment(reactor: Any, options: TransitOptions
                               ) -> tuple[Any, TransitOptions, dict[str, Any]]:
    """With ``HILLTOP_TOR_CONTROL=ENDPOINT``, the mailbox and every connection through that
    Tor (as ``--tor-control-port``): its manager (to close), the options under ``--tor``, and
    the Wormhole's keyword arguments; without it, ``(None, options, {})``. Shared with
    integration/durable_sender.py."""
    if not os.environ.get("HILLTOP_TOR_CONTROL"):
        return None, options, {}
    from hilltop.cli.tor import start_tor
    from hilltop.tor.settings import TorSettings

    manager, options = await start_tor(
        reactor, TorSettings(control_port=os.environ["HILLTOP_TOR_CONTROL"]), options)
    return manager, options, {"endpoint_factory": manager.endpoint_factory}


async def main(reactor: Any, url: str, code: str, mode: str, *rest: str) -> None:
    helpers = [r for r in rest if r.startswith("tcp:")]
    only = os.environ.get("HILLTOP_TRANSPORTS")
    options = TransitOptions(transit_helpers=helpers,
                             transports=only.split(",") if only else None)
    manager, options, extra = await tor_from_environment(reactor, options)
    w = Wormhole(APPID, url, reactor=reactor, dilation=True, **extra)
    w.set_code(code)
    dilated = w.dilate(transit=options)
    done: defer.Deferred[None] = defer.Deferred()
    dilator = await dilated.dilator()
    dilator.on_status = lambda text: print(f"dilation: {text}", flush=True)
    if mode == "listen":
        f: Any = Factory.forProtocol(Echo)
        f.done = done
        await dilated.listener_for("echo").listen(f)
    else:
        f = Factory.forProtocol(Client)
        f.done = done
        f.data = payload(int(rest[0]))
        f.drop_after = int(os.environ.get("HILLTOP_DROP_AFTER", "0"))
        f.pause_at = int(os.environ.get("HILLTOP_PAUSE_AT", "0"))
        f.paused_at, f.reactor = 0, reactor
        f.dilator = dilator
        await dilated.when_dilated()
        await dilated.connector_for("echo").connect(f)
    await done
    print(f"generations {dilator.generation_count}", flush=True)
    await task.deferLater(reactor, 0.5, lambda: None)
    await w.close()
    if manager is not None:
        await manager.close()


if __name__ == "__main__":
    install_asyncio_reactor()
    task.react(lambda reactor: defer.ensureDeferred(main(reactor, *sys.argv[1:])))
