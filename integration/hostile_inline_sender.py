"""A sender whose small file in its offer (``inline-file-v1``) is hostile, on hilltop's
library API: it writes the offer's JSON itself.

``unlisted``: a well-formed inline offer (the test's receiver did not list the feature);
``long``: 4 bytes of data under a ``filesize`` of 3; ``huge``: 20,000 bytes, over the limit;
``garbage``: data that is not base64. Prints the receiver's answer.
Usage: hostile_inline_sender.py RELAY_URL CODE unlisted|long|huge|garbage
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

BODIES = {
    "unlisted": (3, base64.b64encode(b"hi\n").decode()),
    "long": (3, base64.b64encode(b"four").decode()),
    "huge": (20_000, base64.b64encode(b"x" * 20_000).decode()),
    "garbage": (3, "not*base64"),
}


async def main(reactor: Any, relay_url: str, code: str, mode: str) -> None:
    from hilltop.api import Wormhole
    from hilltop.cli.send import close_quietly

    size, data = BODIES[mode]
    w = Wormhole(relay_url=relay_url, reactor=reactor)
    try:
        w.set_code(code)
        await w.get_peer_versions()
        w.send_message(json.dumps({"offer": {"hilltop-inline-file": {
            "filename": "small.bin", "filesize": size, "data": data}}}).encode())
        print("answer", (await w.get_message()).decode(), flush=True)
    finally:
        await close_quietly(w)


if __name__ == "__main__":
    from hilltop.cli.common import run

    args = sys.argv[1:]
    run(lambda reactor: main(reactor, *args))
