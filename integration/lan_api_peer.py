"""One side of a file transfer through hilltop's library API, with deliberately wrong hints.

``python lan_api_peer.py send RELAY_URL CODE FILE`` or ``... receive RELAY_URL CODE DIR``.
Both sides advertise a direct-tcp address nobody can reach (TEST-NET-2), so only the ``lan``
transport's mDNS discovery can connect them. Prints ``connected: <description>`` and exits 0
when the transfer is complete.
"""

from __future__ import annotations

import sys

from hilltop import install_asyncio_reactor

WRONG_ADDRESS = "198.51.100.7"


def main() -> None:
    reactor = install_asyncio_reactor()
    from twisted.internet.defer import ensureDeferred

    from hilltop import api
    from hilltop.transfer import session
    from hilltop.transfer.source import open_source

    role, relay_url, code, path = sys.argv[1:5]
    # webrtc left out: on one LAN its host candidates would race (and may beat) lan
    options = session.TransitOptions(local_addresses=[WRONG_ADDRESS],
                                          transports=["direct-tcp", "lan", "relay"])
    status = {"rc": 1}

    def connected(desc: str) -> None:
        print(f"connected: {desc}", flush=True)

    async def run() -> None:
        w = api.Wormhole(api.APPID, relay_url, reactor=reactor)
        try:
            w.set_code(code)
            await w.get_peer_versions()
            if role == "send":
                with open_source(path) as source:
                    await session.send(reactor, w, source, options,
                                       listener=session.Listener(on_connected=connected))
            else:
                incoming = await session.receive_offer(reactor, w)
                prepared = session.prepare(incoming.offer, session.ReceiveChoices(path))
                await incoming.receive(prepared.open_sink(), options,
                                       listener=session.Listener(on_connected=connected))
            print("done", flush=True)
            status["rc"] = 0
        finally:
            try:
                await w.close()
            except Exception as err:  # noqa: BLE001
                print(f"close: {err}", flush=True)

    def stop(result: object) -> None:
        if hasattr(result, "getErrorMessage"):
            print(f"ERROR: {result.getErrorMessage()}", flush=True)  # type: ignore[attr-defined]
        reactor.stop()

    reactor.callWhenRunning(lambda: ensureDeferred(run()).addBoth(stop))
    reactor.run()
    sys.exit(status["rc"])


if __name__ == "__main__":
    main()
