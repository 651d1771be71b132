"""Onion-lifecycle peer: sends one file with ``--tor`` through hilltop's library API while
recording every command its control connection sends to Tor, then asks that same connection
which onion services it still owns.

``GETINFO onions/current`` only lists the services of the connection that asks, so the question
must go over ours, after the transfer and before we let the connection go (closing it would
make Tor drop the service by itself and prove nothing about us).

Prints ``Wormhole code is: CODE`` on stderr, then one JSON line on stdout:
``{"connected": ..., "commands": [{"command": ..., "reply": ...}], "current": ...,
"detached": ...}``.

Usage: python tor_onion_peer.py RELAY_URL CONTROL_ENDPOINT FILE
"""

from __future__ import annotations

import json
import sys
from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.internet.task import react

from hilltop import TransitOptions, api
from hilltop.tor.manager import TorManager
from hilltop.tor.settings import TorSettings, TorTransitSettings
from hilltop.transfer import session
from hilltop.transfer.source import open_source
from hilltop.transit.settings import TransportSettings


def record_commands(protocol: Any) -> list[dict[str, str]]:
    """Wrap ``protocol.queue_command`` so each command and its reply land in the list."""
    seen: list[dict[str, str]] = []
    original = protocol.queue_command

    def queue_command(cmd: Any, *args: Any, **kwargs: Any) -> Any:
        entry = {"command": cmd.decode() if isinstance(cmd, bytes) else str(cmd)}
        seen.append(entry)
        d = original(cmd, *args, **kwargs)

        def got(reply: Any) -> Any:
            entry["reply"] = reply.decode() if isinstance(reply, bytes) else str(reply)
            return reply

        d.addCallback(got)
        return d

    protocol.queue_command = queue_command
    return seen


async def main(reactor: Any, relay_url: str, control: str, path: str) -> None:
    manager = TorManager(reactor, TorSettings(control_port=control))
    await manager.ready()
    commands = record_commands(manager.tor.protocol)
    w = api.Wormhole(api.APPID, relay_url, reactor=reactor,
                     endpoint_factory=manager.endpoint_factory)
    connected: list[str] = []
    try:
        code = await w.allocate_code()
        print(f"Wormhole code is: {code}", file=sys.stderr, flush=True)
        await w.get_verifier()
        shared = TorTransitSettings(manager=manager)
        options = TransitOptions(tor=True, settings=TransportSettings(shared))
        with open_source(path) as source:
            await session.send(reactor, w, source, options,
                               listener=session.Listener(on_connected=connected.append))
        current = await manager.tor.protocol.get_info("onions/current")
        detached = await manager.tor.protocol.get_info("onions/detached")
    finally:
        await w.close()
    print(json.dumps({"connected": connected, "commands": commands,
                      "current": current.get("onions/current", ""),
                      "detached": detached.get("onions/detached", "")}), flush=True)
    await manager.close()


if __name__ == "__main__":
    from hilltop import install_asyncio_reactor

    install_asyncio_reactor()
    react(lambda reactor, *args: ensureDeferred(main(reactor, *args)), sys.argv[1:])
