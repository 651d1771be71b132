"""A peer whose words are hostile: its v1 ``error`` text carries terminal escape sequences.

Built on hilltop's library API. ``abandon`` plays a sender that gives up instead of offering;
``refuse`` plays a receiver that answers the offer with the error. The test then checks that
the hilltop CLI on the other side shows the text escaped. ``huge`` plays a sender whose text
offer is TEXT megabytes (1,000,000 bytes) of ``A``: our own size limit is lifted first.
Usage: hostile_text_peer.py RELAY_URL CODE abandon|refuse|huge TEXT
"""

from __future__ import annotations

import sys
from typing import Any


async def main(reactor: Any, relay_url: str, code: str, mode: str, text: str) -> None:
    from hilltop.api import Wormhole
    from hilltop.cli.send import close_quietly
    from hilltop.rendezvous import messages
    from hilltop.transfer.offers import ErrorMsg, TextOffer

    if mode == "huge":  # our client refuses to send (and receive) frames this big
        messages.MAX_FRAME_CHARS = 10**10

    w = Wormhole(relay_url=relay_url, reactor=reactor)
    try:
        w.set_code(code)
        await w.get_peer_versions()
        if mode == "huge":
            w.send_message(TextOffer("A" * (int(text) * 1_000_000)).to_wire())
            print("offered", flush=True)
            await w.get_message()  # no answer ever comes: the test kills us
            return
        if mode == "refuse":
            await w.get_message()  # the offer (a file's transit hints come first: any will do)
        elif mode != "abandon":
            raise SystemExit(f"unknown mode {mode}")
        w.send_message(ErrorMsg(text).to_wire())
    finally:
        await close_quietly(w)


if __name__ == "__main__":
    from hilltop.cli.common import run

    args = sys.argv[1:]
    run(lambda reactor: main(reactor, *args))
