"""Leak-test peer: joins a wormhole through Tor, prints the sender's first two decrypted
messages (its ``transit`` message and its offer) as JSON lines, then answers with a ``transit``
message full of clear-net bait and a ``file_ack``, and stays ``LINGER`` seconds so the sender
gets to try every hint it is willing to dial before we close.

Usage: python tor_leak_peer.py RELAY_URL CONTROL_ENDPOINT CODE HINTS_JSON LINGER
"""

from __future__ import annotations

import json
import sys

from twisted.internet.defer import ensureDeferred
from twisted.internet.task import deferLater, react

from hilltop import api
from hilltop.tor.manager import TorManager
from hilltop.tor.settings import TorSettings


async def main(reactor, relay_url: str, control: str, code: str, hints: str,
               linger: str) -> None:
    manager = TorManager(reactor, TorSettings(control_port=control))
    await manager.ready()
    w = api.Wormhole(api.APPID, relay_url, reactor=reactor,
                     endpoint_factory=manager.endpoint_factory)
    w.set_code(code)
    await w.get_verifier()
    for _ in range(2):
        print(json.dumps(json.loads(await w.get_message())), flush=True)
    abilities = [{"type": t} for t in ("direct-tcp-v1", "relay-v1", "tor-tcp-v1")]
    w.send_message(json.dumps({"transit": {"abilities-v1": abilities,
                                           "hints-v1": json.loads(hints)}}).encode())
    w.send_message(json.dumps({"answer": {"file_ack": "ok"}}).encode())
    await deferLater(reactor, float(linger), lambda: None)
    await w.close("happy")
    await manager.close()


if __name__ == "__main__":
    from hilltop import install_asyncio_reactor

    install_asyncio_reactor()
    react(lambda reactor, *args: ensureDeferred(main(reactor, *args)), sys.argv[1:])
