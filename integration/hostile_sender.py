"""A deliberately hostile sender, built on hilltop's own library API.

It offers a directory whose zip contains one dangerous entry (chosen on the command line) next
to an innocent one, so a test can check that a hilltop receiver refuses it and writes nothing
outside its target. Usage: hostile_sender.py RELAY_URL TRANSIT_HELPER CODE KIND
"""

from __future__ import annotations

import io
import sys
import zipfile

from hilltop.transfer.offers import DirectoryOffer
from hilltop.transfer.source import Source


def hostile_zip(kind: str) -> tuple[bytes, int]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("innocent.txt", b"fine")
        if kind == "dotdot":
            zf.writestr("../escaped.txt", b"outside")
        elif kind == "absolute":
            zf.writestr("/tmp/hilltop-absolute-escape.txt", b"outside")
        elif kind == "symlink":
            info = zipfile.ZipInfo("link")
            info.external_attr = (0o120777 << 16)
            zf.writestr(info, b"/etc/passwd")
        elif kind == "duplicate":
            zf.writestr("innocent.txt", b"second copy")
        else:
            raise SystemExit(f"unknown kind {kind}")
    data = buf.getvalue()
    return data, len(zf.infolist())


class BytesSource(Source):
    def __init__(self, data: bytes, offer: DirectoryOffer) -> None:
        super().__init__(offer, "<hostile>")
        self._buf = io.BytesIO(data)

    def read(self, n: int) -> bytes:
        data = self._buf.read(n)
        self.position += len(data)
        return data

    def close(self) -> None:
        pass


async def main(reactor, relay_url: str, helper: str, code: str, kind: str) -> None:
    from hilltop.api import Wormhole
    from hilltop.transfer import session

    data, count = hostile_zip(kind)
    offer = DirectoryOffer("loot", len(data), 20, count)
    w = Wormhole(relay_url=relay_url, reactor=reactor)
    w.set_code(code)
    await w.get_peer_versions()
    try:
        await session.send(
            reactor, w, BytesSource(data, offer),
            session.TransitOptions(transit_helpers=[helper]))
    finally:
        from hilltop.cli.send import close_quietly

        await close_quietly(w)


if __name__ == "__main__":
    from hilltop.cli.common import run

    args = sys.argv[1:]
    run(lambda reactor: main(reactor, *args))
