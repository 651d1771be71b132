"""hilltop.transfer.zipwriter: the sized zip layout, read back by Python's zipfile (what official
receivers use) and by hilltop's own front-to-back reader, in every layout it can take."""

from __future__ import annotations

import io
import stat
import struct
import time
import zipfile
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hilltop.transfer.zipformat import DESCRIPTOR, LOCAL_HEADER
from hilltop.transfer.zipreader import MemberData, MemberStart, ZipStreamReader
from hilltop.transfer.zipwriter import Entry, ZipLayout

FILE = stat.S_IFREG | 0o644
FOLDER = stat.S_IFDIR | 0o755
MTIME = time.mktime((2024, 5, 17, 13, 45, 30, 0, 0, -1))


def local(mtime: float) -> tuple[int, int, int, int, int, int]:
    """What hilltop.transfer.source passes as an Entry's date_time."""
    year, month, day, hour, minute, second = time.localtime(mtime)[:6]
    return year, month, day, hour, minute, second


def write(layout: ZipLayout, contents: list[bytes]) -> bytes:
    """The archive as hilltop.transfer.source sends it: header, data, descriptor; then the end."""
    out = bytearray()
    for index, data in enumerate(contents):
        crc = zlib.crc32(data)
        out += layout.local_header(index, crc) + data + layout.descriptor(index, crc)
    for piece in layout.central_directory():
        out += piece
    return bytes(out)


def archive(files: dict[str, bytes], **limits: int) -> tuple[ZipLayout, bytes]:
    entries = [Entry(name, len(data), FOLDER if name.endswith("/") else FILE,
                     local(MTIME))
               for name, data in files.items()]
    layout = ZipLayout(entries, **limits)
    return layout, write(layout, list(files.values()))


def read_back(data: bytes) -> dict[str, bytes]:
    """Every member, read front to back by hilltop's reader."""
    reader, got, name = ZipStreamReader(), {}, None
    for event in reader.feed(data):
        if isinstance(event, MemberStart):
            name = event.name
            got[name] = b""
        elif isinstance(event, MemberData):
            got[name] += bytes(event.data)
    reader.close()
    return got


def test_the_size_is_known_first_and_every_reader_agrees() -> None:
    files = {"a/b/deep.txt": b"deep\n" * 1000, "empty/": b"", "zero": b"",
             "über ☃.txt": b"snow", "big.bin": bytes(range(256)) * 40}
    layout, data = archive(files, small=5000)  # big.bin (10,240 bytes) is streamed
    assert layout.size == len(data)
    zf = zipfile.ZipFile(io.BytesIO(data))
    assert zf.testzip() is None
    assert {i.filename: zf.read(i) for i in zf.infolist()} == files
    assert read_back(data) == files
    info = zf.getinfo("a/b/deep.txt")
    assert info.date_time == (2024, 5, 17, 13, 45, 30)
    assert (info.create_system, info.external_attr >> 16) == (3, FILE)
    assert zf.getinfo("empty/").external_attr == FOLDER << 16 | 0x10
    assert zf.getinfo("über ☃.txt").flag_bits & 0x800
    assert zf.getinfo("zero").flag_bits & 0x800 == 0


def test_small_members_say_their_size_before_their_data() -> None:
    """No data descriptor to search for: a member that holds one, with the very CRC and size
    of the bytes before it, still arrives whole (a searching reader would cut it there)."""
    head = b"x" * 100
    fake = DESCRIPTOR + struct.pack("<III", zlib.crc32(head), len(head), len(head))
    body = head + fake + b"the rest"
    layout, data = archive({"tricky": body, "after": b"z"})
    (_, _, flags, _, _, _, crc, compressed, size, _, _) = LOCAL_HEADER.unpack_from(data)
    assert (flags & 0x8, crc, compressed, size) == (0, zlib.crc32(body), len(body), len(body))
    assert read_back(data) == {"tricky": body, "after": b"z"}


def test_big_members_are_streamed_with_a_descriptor() -> None:
    layout, data = archive({"big": b"b" * 300}, small=200)
    (_, _, flags, _, _, _, crc, compressed, size, _, _) = LOCAL_HEADER.unpack_from(data)
    assert (flags & 0x8, crc, compressed, size) == (0x8, 0, 0, 0)
    assert layout.descriptor(0, 7) == struct.pack("<4sIII", DESCRIPTOR, 7, 300, 300)
    assert read_back(data) == {"big": b"b" * 300}


@pytest.mark.parametrize("what", ["member", "offset", "central size"])
def test_zip64_where_a_size_or_offset_needs_it(what: str) -> None:
    """A low limit stands in for 2 GiB: each zip64 field appears exactly where needed."""
    files = {
        "member": {"huge": b"h" * 500, "after": b"a"},
        "offset": {"first": b"f" * 150, "second": b"s" * 10},
        "central size": {f"n{i:03d}": b"" for i in range(10)},
    }[what]
    limit = {"member": 300, "offset": 100, "central size": 400}[what]
    layout, data = archive(files, small=200, zip64_limit=limit)
    assert layout.size == len(data)
    zf = zipfile.ZipFile(io.BytesIO(data))
    assert zf.testzip() is None
    assert {i.filename: zf.read(i) for i in zf.infolist()} == files
    assert read_back(data) == files
    (_, version, _, _, _, _, _, compressed, _, _, _) = LOCAL_HEADER.unpack_from(data)
    first = {"member": (45, 0xFFFFFFFF), "offset": (20, 150), "central size": (20, 0)}[what]
    assert (version, compressed) == first
    assert b"PK\x06\x06" in data  # every case has something past the limit


def test_more_than_65535_entries() -> None:
    files = {f"d{i}/": b"" for i in range(70_000)}
    layout, data = archive(files)
    assert layout.size == len(data) and b"PK\x06\x06" in data
    assert len(zipfile.ZipFile(io.BytesIO(data)).infolist()) == 70_000
    assert len(read_back(data)) == 70_000


@pytest.mark.parametrize(("mtime", "date_time"), [
    (0.0, (1980, 1, 1, 0, 0, 0)),  # before DOS time began
    (MTIME + 1, (2024, 5, 17, 13, 45, 30)),  # two-second resolution
])
def test_dos_times(mtime: float, date_time: tuple[int, ...]) -> None:
    layout = ZipLayout([Entry("f", 1, FILE, local(mtime))])
    data = write(layout, [b"1"])
    assert zipfile.ZipFile(io.BytesIO(data)).getinfo("f").date_time == date_time


NAME = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"),
               min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.tuples(NAME, st.booleans()), st.binary(max_size=400), max_size=12),
       st.integers(0, 300), st.integers(50, 3000))
def test_any_entries_any_limits(files: dict[tuple[str, bool], bytes], small: int,
                                limit: int) -> None:
    content = {f"{name}/" if folder else name: b"" if folder else data
               for (name, folder), data in files.items()}
    content = {k: v for k, v in content.items() if not (k.endswith("/") and k[:-1] in content)}
    layout, data = archive(content, small=small, zip64_limit=limit)
    assert layout.size == len(data)
    zf = zipfile.ZipFile(io.BytesIO(data))
    assert zf.testzip() is None
    assert {i.filename: zf.read(i) for i in zf.infolist()} == content
    assert read_back(data) == content
