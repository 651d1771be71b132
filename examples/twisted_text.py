"""Exchange raw messages from a Twisted program (Deferreds, no asyncio code at all).

    python examples/twisted_text.py CODE      # run it on both sides with the same code
"""

import os
import sys

from hilltop import install_asyncio_reactor

reactor = install_asyncio_reactor()

from twisted.internet.defer import ensureDeferred  # noqa: E402
from twisted.internet.task import react  # noqa: E402


async def main(reactor, code: str) -> None:
    from hilltop import Wormhole
    from hilltop.api import RELAY_URL

    # an appid of its own: the mailbox keeps its nameplates apart from the CLI users
    w = Wormhole("example.org/hilltop-chat", os.environ.get("WORMHOLE_RELAY_URL", RELAY_URL),
                 reactor=reactor)
    w.set_code(code)
    await w.get_peer_versions()  # the peer is here and the key is confirmed
    w.send_message(f"hello from pid {os.getpid()}".encode())
    print((await w.get_message()).decode(), flush=True)
    await w.close()


react(lambda r: ensureDeferred(main(r, sys.argv[1])))
