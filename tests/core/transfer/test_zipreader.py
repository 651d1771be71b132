"""hilltop.transfer.zipreader: every zip writer a peer uses, read front to back in any chunking."""

from __future__ import annotations

import io
import os
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from zip_writers import every_writer

from hilltop.transfer.zipreader import (
    ArchiveEnd,
    CentralEntry,
    MemberData,
    MemberEnd,
    MemberStart,
    ZipFormatError,
    ZipStreamReader,
)

# The signature of a data descriptor, many times over, inside a STORED member's data: the
# reader must not end the member at any of them.
FAKE_DESCRIPTORS = b"PK\x07\x08" * 300 + b"PK\x07\x08\x00\x00\x00\x00" * 50
CONTENT = {
    "d/": b"",
    "d/a.txt": b"hello " * 700,
    "empty": b"",
    "random.bin": os.urandom(70_000),
    "tricky": FAKE_DESCRIPTORS,
    "über.txt": b"non-ASCII name",
}


ARCHIVES = every_writer(CONTENT)


def read(data: bytes, sizes: list[int] | None = None) -> tuple[dict[str, bytes], list[str]]:
    """Feed ``data`` in chunks of the given sizes (cycled); return members and central names."""
    reader = ZipStreamReader()
    members: dict[str, bytearray] = {}
    central: list[str] = []
    current: str | None = None
    ended = 0
    pos, turn = 0, 0
    steps = sizes or [len(data) or 1]
    while pos < len(data):
        step = max(1, steps[turn % len(steps)])
        turn += 1
        for event in reader.feed(data[pos:pos + step]):
            if isinstance(event, MemberStart):
                assert current is None
                current = event.name
                members[current] = bytearray()
            elif isinstance(event, MemberData):
                assert current is not None
                members[current] += event.data
            elif isinstance(event, MemberEnd):
                assert current is not None and event.size == len(members[current])
                current = None
            elif isinstance(event, CentralEntry):
                central.append(event.name)
            elif isinstance(event, ArchiveEnd):
                ended += 1
        pos += step
    reader.close()
    assert ended == 1 and reader.done
    return {name: bytes(body) for name, body in members.items()}, central


@pytest.mark.parametrize("kind", sorted(ARCHIVES))
@pytest.mark.parametrize("step", [3, 1000, None])
def test_every_writer_reads_back(kind: str, step: int | None) -> None:
    data = ARCHIVES[kind]
    members, central = read(data, [step] if step else None)
    assert members == CONTENT
    assert central == list(CONTENT)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:  # the same archive, read the usual way
        assert {i.filename: zf.read(i) for i in zf.infolist()} == CONTENT


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(sorted(ARCHIVES)),
       sizes=st.lists(st.integers(min_value=1, max_value=3000), min_size=1, max_size=8))
def test_any_chunking_gives_the_same_members(kind: str, sizes: list[int]) -> None:
    assert read(ARCHIVES[kind], sizes)[0] == CONTENT


def test_truncated_archive_is_refused() -> None:
    data = ARCHIVES["zipstream-sized"]
    reader = ZipStreamReader()
    list(reader.feed(data[:-10]))
    with pytest.raises(ZipFormatError, match="ends early"):
        reader.close()


def test_bytes_after_the_end_are_refused() -> None:
    with pytest.raises(ZipFormatError, match="after the end"):
        read(ARCHIVES["python-stored"] + b"junk")


def test_garbage_is_refused() -> None:
    with pytest.raises(ZipFormatError, match="where a zip record should start"):
        read(b"this is not a zip at all")


@pytest.mark.parametrize("kind", ["python-stored", "zipstream-sized", "python-deflated"])
def test_flipped_data_byte_is_refused(kind: str) -> None:
    data = bytearray(ARCHIVES[kind])
    where = data.index(b"hello " * 10) if kind != "python-deflated" else len(data) // 3
    data[where] ^= 0x01
    with pytest.raises(ZipFormatError):
        read(bytes(data))


def test_central_directory_naming_other_files_is_refused() -> None:
    data = bytearray(ARCHIVES["python-stored"])
    central = data.index(b"PK\x01\x02")
    name_at = data.index(b"d/a.txt", central)
    data[name_at:name_at + 7] = b"d/b.txt"
    with pytest.raises(ZipFormatError, match="central directory does not match"):
        read(bytes(data))


def test_unsupported_method_is_refused() -> None:
    data = bytearray(ARCHIVES["python-stored"])
    data[8:10] = (12).to_bytes(2, "little")  # bzip2, in the first local header
    with pytest.raises(ZipFormatError, match="compression method 12"):
        read(bytes(data))


def test_deflate_bomb_is_not_inflated_in_one_go() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb", b"\0" * (50 * 1024 * 1024))
    data = buf.getvalue()
    events = ZipStreamReader().feed(data)
    next(events)  # MemberStart
    first = next(events)
    assert isinstance(first, MemberData) and len(first.data) <= 1024 * 1024
