"""A sender with a valid code whose transit records go wrong on purpose, one way per run.

Built on hilltop's library API: it offers a 2 MB file honestly, then its record sealer
misbehaves from the third record on, so a test can check the receiver's side of it.
Usage: hostile_transit_peer.py RELAY_URL TRANSIT_HELPER CODE MODE, where MODE is

* ``skip-nonce``: the third record's nonce is one too high;
* ``bad-mac``: the third record has one ciphertext bit flipped;
* ``huge-length``: the third record's length prefix says 4 GiB;
* ``short``: the file ends after 1 MB, and the sender hangs up without a word (a hilltop
  sender would say why in an ``error`` message first; a hostile or crashed one does not).
"""

from __future__ import annotations

import io
import sys
from typing import Any

SIZE = 2_000_000
BAD_RECORD = 3


def hang_up_silently() -> None:
    from hilltop.transfer import engine

    real = engine.TransferEngine.failed

    def failed(self: Any, error: BaseException, now: float | None = None, *,
               tell_peer: bool = True) -> None:
        real(self, error, now, tell_peer=False)

    engine.TransferEngine.failed = failed  # type: ignore[method-assign]


def misbehave(mode: str) -> None:
    from hilltop.transit import records

    real = records.RecordSealer.seal_into
    count = {"n": 0}

    def seal_into(self: Any, plaintext: Any, buffer: Any) -> memoryview:
        count["n"] += 1
        if count["n"] != BAD_RECORD:
            return real(self, plaintext, buffer)
        if mode == "skip-nonce":
            self.counter += 1
        frame = real(self, plaintext, buffer)
        if mode == "bad-mac":
            frame[-1] ^= 0x01
        elif mode == "huge-length":
            frame[:4] = b"\xff\xff\xff\xff"
        return frame

    records.RecordSealer.seal_into = seal_into  # type: ignore[method-assign]


async def main(reactor: Any, relay_url: str, helper: str, code: str, mode: str) -> None:
    from hilltop.api import Wormhole
    from hilltop.cli.send import close_quietly
    from hilltop.transfer import session
    from hilltop.transfer.offers import FileOffer
    from hilltop.transfer.source import FileSource

    data = (bytes(range(256)) * (SIZE // 256 + 1))[:SIZE]
    if mode == "short":
        data = data[:SIZE // 2]
        hang_up_silently()
    else:
        misbehave(mode)
    w = Wormhole(relay_url=relay_url, reactor=reactor)
    w.set_code(code)
    await w.get_peer_versions()
    source = FileSource(FileOffer("payload.bin", SIZE), "payload.bin", io.BytesIO(data))
    try:
        await session.send(reactor, w, source,
                           session.TransitOptions(transit_helpers=[helper]))
    finally:
        await close_quietly(w)


if __name__ == "__main__":
    from hilltop.cli.common import run

    args = sys.argv[1:]
    run(lambda reactor: main(reactor, *args))
