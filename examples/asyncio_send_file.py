"""Send a file from a plain asyncio program with hilltop's library API.

    python examples/asyncio_send_file.py PATH      (then `wormhole receive CODE` elsewhere)

WORMHOLE_RELAY_URL / WORMHOLE_TRANSIT_HELPER override the public defaults, as for the CLI.
"""

import asyncio
import os
import sys

from hilltop import install_asyncio_reactor


async def main(path: str) -> None:
    from hilltop import TransitOptions, Wormhole
    from hilltop.api import RELAY_URL, TRANSIT_HELPER

    w = Wormhole(relay_url=os.environ.get("WORMHOLE_RELAY_URL", RELAY_URL))
    helper = os.environ.get("WORMHOLE_TRANSIT_HELPER", TRANSIT_HELPER)
    try:
        code = await w.allocate_code()  # or w.set_code("7-guitarist-revenge")
        print(f"Wormhole code is: {code}", flush=True)
        print("verifier:", (await w.get_verifier()).hex(), flush=True)
        digest = await w.send_file(path, transit=TransitOptions(transit_helpers=[helper]))
        # None between two hilltop peers: their authenticated records replace the file hash
        print("sent and confirmed" + (f", sha256 {digest}" if digest else ""), flush=True)
    finally:
        await w.close()


loop = asyncio.new_event_loop()
install_asyncio_reactor(loop)  # Twisted and asyncio share this one loop
loop.run_until_complete(main(sys.argv[1]))
