"""Zips as every writer a peer uses would make them, for the zip reader's tests.

Python's zipfile to a seekable file (sizes in the local header) or to a socket-like stream
(data descriptors), STORED or DEFLATED, zip64 or not; zipstream-ng sized (official 0.24 and
hilltop senders: STORED members with descriptors) and unsized (DEFLATED, zip64 descriptors).
"""

from __future__ import annotations

import io
import zipfile

from zipstream.ng import ZipStream


class Unseekable(io.RawIOBase):
    """What a socket looks like to zipfile: it must write data descriptors."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[override]
        self.data += b
        return len(b)


def python_zip(content: dict[str, bytes], method: int, seekable: bool,
               zip64: bool = False) -> bytes:
    """``content`` maps names to bytes; a name ending in "/" is a folder."""
    out: io.BytesIO | Unseekable = io.BytesIO() if seekable else Unseekable()
    with zipfile.ZipFile(out, "w", method) as zf:
        for name, data in content.items():
            if name.endswith("/"):
                zf.mkdir(name)
                continue
            info = zipfile.ZipInfo(name)
            info.compress_type = method
            info.external_attr = 0o100640 << 16
            with zf.open(info, "w", force_zip64=zip64) as member:
                member.write(data)
    return bytes(out.getvalue() if isinstance(out, io.BytesIO) else out.data)


def zipstream_zip(content: dict[str, bytes], sized: bool) -> bytes:
    zs = ZipStream(sized=sized, compress_type=zipfile.ZIP_STORED if sized
                   else zipfile.ZIP_DEFLATED)
    for name, data in content.items():
        if name.endswith("/"):
            zs.mkdir(name)
        elif sized:
            zs.add(data, name)
        else:
            zs.add(iter([data]), name)
    return bytes(zs)


def every_writer(content: dict[str, bytes]) -> dict[str, bytes]:
    """The same content from each writer, by a short name."""
    return {
        "python-stored": python_zip(content, zipfile.ZIP_STORED, True),
        "python-deflated": python_zip(content, zipfile.ZIP_DEFLATED, True),
        "python-stored-descriptors": python_zip(content, zipfile.ZIP_STORED, False),
        "python-deflated-descriptors": python_zip(content, zipfile.ZIP_DEFLATED, False),
        "python-stored-zip64-descriptors": python_zip(content, zipfile.ZIP_STORED, False,
                                                      zip64=True),
        "python-deflated-zip64": python_zip(content, zipfile.ZIP_DEFLATED, True, zip64=True),
        "zipstream-sized": zipstream_zip(content, True),
        "zipstream-deflated-zip64": zipstream_zip(content, False),
    }
