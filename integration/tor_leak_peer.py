"""Leak-test peer: joins a wormhole through Tor and prints the sender's first two decrypted
messages (its ``transit`` message and its offer) as JSON lines, then closes.

Usage: python tor_leak_peer.py RELAY_URL CONTROL_ENDPOINT CODE
"""

from __future__ import annotations

import json
import sys

from twisted.internet.defer import ensureDeferred
from twisted.internet.task import react

from hilltop import api
from hilltop.tor import TorManager, TorSettings


async def main(reactor, relay_url: str, control: str, code: str) -> None:
    manager = TorManager(reactor, TorSettings(control_port=control))
    await manager.ready()
    w = api.Wormhole(api.APPID, relay_url, reactor=reactor,
                     endpoint_factory=manager.endpoint_factory)
    w.set_code(code)
    await w.get_verifier()
    for _ in range(2):
        print(json.dumps(json.loads(await w.get_message())), flush=True)
    await w.close("happy")
    await manager.close()


if __name__ == "__main__":
    from hilltop.reactor import install_asyncio_reactor

    install_asyncio_reactor()
    react(lambda reactor, *args: ensureDeferred(main(reactor, *args)), sys.argv[1:])
