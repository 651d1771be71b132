"""hilltop.transfer.zipreader and DirectorySink against damaged and hostile archives.

Valid archives from every writer a peer uses are damaged at random (bytes flipped, inserted,
deleted, duplicated, header fields set to extreme values, truncation) and fed in random
chunks. The reader must give back exactly the original members or raise ProtocolError,
with a bounded buffer; the sink must raise a HilltopError and leave nothing behind, and never
touch anything outside its hidden folder.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zip_writers import Unseekable, every_writer
from zipstream.ng import ZipStream

from hilltop.errors import HilltopError, ProtocolError
from hilltop.transfer import filesink, foldersink, partials
from hilltop.transfer.foldersink import DirectorySink
from hilltop.transfer.offers import DirectoryOffer
from hilltop.transfer.zipreader import (
    ArchiveEnd,
    CentralEntry,
    MemberData,
    MemberEnd,
    MemberStart,
    ZipFormatError,
    ZipStreamReader,
)

SIGNATURES = (b"PK\x03\x04", b"PK\x01\x02", b"PK\x07\x08", b"PK\x06\x06", b"PK\x06\x07",
              b"PK\x05\x06")
BUFFER_SLACK = 200_000  # the biggest record the reader holds whole: a central record, ~196 KB


def _inner_zip() -> bytes:
    zs = ZipStream(sized=True)
    zs.add(b"inner data PK\x07\x08 more", "inner.txt")
    return bytes(zs)


CONTENT = {
    "d/": b"",
    "d/a.txt": b"hello " * 300,
    "empty": b"",
    "rand.bin": bytes(range(256)) * 7 + b"\x00\xff" * 50,
    "tricky": b"PK\x07\x08" * 20 + b"PK\x07\x08\x00\x00\x00\x00" * 5,
    "nested.zip": _inner_zip(),
    "über.txt": b"non-ASCII name",
}
FILES = {name: data for name, data in CONTENT.items() if not name.endswith("/")}


ARCHIVES = every_writer(CONTENT)
EXTREMES = (0, 1, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF)


def chunks(data: bytes, sizes: list[int]) -> list[bytes]:
    out, pos, turn = [], 0, 0
    while pos < len(data):
        step = sizes[turn % len(sizes)]
        out.append(data[pos:pos + step])
        pos += step
        turn += 1
    return out


def read(parts: list[bytes]) -> list[tuple[str, bytes]]:
    """Members in order, checking the event sequence and the buffer bound as it goes."""
    reader = ZipStreamReader()
    members: list[tuple[str, bytearray]] = []
    current = False
    central = ended = 0
    for part in parts:
        for event in reader.feed(part):
            assert len(reader._buf) <= len(part) + BUFFER_SLACK
            assert not ended
            if isinstance(event, MemberStart):
                assert not current and not central
                members.append((event.name, bytearray()))
                current = True
            elif isinstance(event, MemberData):
                assert current and len(event.data) <= 1024 * 1024
                members[-1][1].extend(event.data)
            elif isinstance(event, MemberEnd):
                assert current and event.size == len(members[-1][1])
                current = False
            elif isinstance(event, CentralEntry):
                assert not current  # its name is checked at the end record, not here
                central += 1
            else:
                assert isinstance(event, ArchiveEnd)
                ended += 1
        assert len(reader._buf) <= len(part) + BUFFER_SLACK
    reader.close()
    assert ended == 1 and central == len(members)
    return [(name, bytes(body)) for name, body in members]


# --- damage ---------------------------------------------------------------------------------

@st.composite
def damaged(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(sorted(ARCHIVES)))
    data = bytearray(ARCHIVES[kind])
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        op = draw(st.sampled_from(
            ["flip", "insert", "delete", "truncate", "field", "field", "field", "duplicate",
             "signature"]))
        at = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 16))]
        elif op == "truncate":
            del data[at:]
        elif op == "duplicate":  # a copy of a stretch elsewhere: records twice, or out of order
            length = draw(st.integers(1, 400))
            data[draw(st.integers(0, len(data))):0] = data[at:at + length]
        elif op == "signature":  # a record signature where data or another record was
            data[at:at] = draw(st.sampled_from(SIGNATURES))
        else:  # a header field set to an extreme value, or to a size past the end
            starts = [i for sig in SIGNATURES for i in _find_all(data, sig)]
            if not starts:
                continue
            start = draw(st.sampled_from(starts)) + draw(st.integers(4, 44))
            width = draw(st.sampled_from([1, 2, 4, 8]))
            value = draw(st.sampled_from(EXTREMES + (len(data), len(data) - start + 1)))
            value &= (1 << 8 * width) - 1
            data[start:start + width] = value.to_bytes(width, "little")
    return kind, bytes(data)


def _find_all(data: bytearray, sig: bytes) -> list[int]:
    out, at = [], data.find(sig)
    while at >= 0:
        out.append(at)
        at = data.find(sig, at + 1)
    return out


SIZES = st.lists(st.integers(1, 5000), min_size=1, max_size=4) | st.just([1 << 30])


@settings(max_examples=300, deadline=None)
@given(case=damaged(), sizes=SIZES)
def test_damaged_archive_reads_back_or_is_refused(case: tuple[str, bytes],
                                                   sizes: list[int]) -> None:
    _, data = case
    try:
        members = read(chunks(data, sizes))
    except ProtocolError:
        return
    assert members == list(CONTENT.items())


# --- DirectorySink --------------------------------------------------------------------------

class _GuardedOs:
    """filesink's ``os``, refusing to create or change anything outside the hidden folder
    (and the target itself, which publishing creates)."""

    def __init__(self, temp: str, target: str) -> None:
        self._temp = temp
        self._target = target

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)

    def _check(self, path: object) -> None:
        real = os.path.realpath(os.fspath(path))  # type: ignore[arg-type]
        assert real in (self._temp, self._target) or real.startswith(self._temp + os.sep), real

    def open(self, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        self._check(path)
        return os.open(path, *args, **kwargs)

    def mkdir(self, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        self._check(path)
        return os.mkdir(path, *args, **kwargs)

    def makedirs(self, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        self._check(path)
        return os.makedirs(path, *args, **kwargs)

    def chmod(self, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        self._check(path)
        return os.chmod(path, *args, **kwargs)

    def rename(self, src, dst):  # type: ignore[no-untyped-def]
        self._check(src)
        self._check(dst)
        return os.rename(src, dst)


def tree(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root) + "/"] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = Path(path).read_bytes()
    return out


def unpack(data: bytes, sizes: list[int], zipsize: int | None = None,
           numbytes: int | None = None, numfiles: int | None = None
           ) -> dict[str, bytes | None] | None:
    """Into a fresh folder through a guarded sink: the tree it made, or None if it refused
    (after checking the refusal was a HilltopError that left nothing behind)."""
    offer = DirectoryOffer(
        "recv", len(data) if zipsize is None else zipsize,
        sum(map(len, FILES.values())) if numbytes is None else numbytes,
        len(FILES) if numfiles is None else numfiles)
    with tempfile.TemporaryDirectory() as tmp:
        outer = Path(tmp) / "outer"
        box = outer / "box"
        box.mkdir(parents=True)
        (outer / "bystander.txt").write_text("untouched")
        sink = DirectorySink(str(box / "recv"), offer)
        guard = _GuardedOs(os.path.realpath(sink.temp_path), os.path.realpath(box / "recv"))
        real_os = os
        filesink.os = foldersink.os = partials.os = guard  # type: ignore[assignment]
        scratch = bytearray(max(map(len, chunks(data, sizes)), default=0))
        try:
            for part in chunks(data, sizes):
                # as the transit layer does: a view of one buffer, refilled after each write
                scratch[:len(part)] = part
                sink.write(memoryview(scratch)[:len(part)])  # type: ignore[arg-type]
                scratch[:] = b"\xee" * len(scratch)
                assert os.listdir(box) == [".recv.hilltop-dir"]
            sink.finish()
        except HilltopError:
            assert os.listdir(box) == []
            assert sorted(os.listdir(outer)) == ["box", "bystander.txt"]
            return None
        finally:
            filesink.os = foldersink.os = partials.os = real_os
        assert os.listdir(box) == ["recv"]
        return tree(box / "recv")


EXPECTED_TREE = {name: None if name.endswith("/") else data for name, data in CONTENT.items()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=damaged(), sizes=SIZES)
def test_damaged_archive_unpacks_whole_or_leaves_nothing(case: tuple[str, bytes],
                                                         sizes: list[int]) -> None:
    _, data = case
    got = unpack(data, sizes)
    assert got is None or got == EXPECTED_TREE


@pytest.mark.parametrize("kind", sorted(ARCHIVES))
def test_undamaged_archives_unpack(kind: str) -> None:
    assert unpack(ARCHIVES[kind], [777]) == EXPECTED_TREE


NAMES = st.lists(st.text(st.sampled_from("a/.\\:\x00\x1bÉé\u0301ß~ "), min_size=0, max_size=8),
                 min_size=1, max_size=5)


@pytest.mark.filterwarnings("ignore:Duplicate name")
@settings(max_examples=60, deadline=None)
@given(names=NAMES, method=st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]),
       utf8=st.booleans())
def test_hostile_names_unpack_inside_or_leave_nothing(names: list[str], method: int,
                                                      utf8: bool) -> None:
    """Names built from path separators, dots, drive letters, controls and look-alikes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for i, name in enumerate(names):
            info = zipfile.ZipInfo("x")
            info.filename = name  # as given: ZipInfo() would cut it at a NUL
            info.compress_type = method
            if utf8:
                info.flag_bits |= 0x800
            zf.writestr(info, b"" if name.endswith("/") else b"%d" % i)
    # NAMES never repeats bytes in one member, and the guard checks every path made
    got = unpack(buf.getvalue(), [300], numbytes=10, numfiles=len(names))
    if got is not None:
        files = {k: v for k, v in got.items() if v is not None}
        assert len(files) == sum(not n.endswith("/") for n in names)


# --- specific hostile cases -----------------------------------------------------------------

def _local(name: bytes, data: bytes, flags: int = 0, method: int = 0, crc: int | None = None,
           sizes: tuple[int, int] | None = None) -> bytes:
    crc = zlib.crc32(data) if crc is None else crc
    compressed, size = sizes or (len(data), len(data))
    return struct.pack("<4s5HI2I2H", b"PK\x03\x04", 20, flags, method, 0, 0, crc, compressed,
                       size, len(name), 0) + name


def _central(name: bytes, crc: int, size: int, flags: int = 0, compressed: int | None = None,
             mode: int = 0o100644) -> bytes:
    return struct.pack("<4s4B4HI2I5H2I", b"PK\x01\x02", 20, 3, 20, 0, flags, 0, 0, 0, crc,
                       size if compressed is None else compressed, size, len(name), 0, 0, 0,
                       0, mode << 16, 0) + name


def _end(count: int = 0, comment: bytes = b"") -> bytes:
    return struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, count, count, 0, 0,
                       len(comment)) + comment


def read_all(data: bytes, step: int = 1 << 30) -> list[tuple[str, bytes]]:
    return read(chunks(data, [step]))


def test_empty_archive_is_an_empty_folder() -> None:
    assert read_all(_end()) == []
    assert unpack(_end(), [5], numbytes=0, numfiles=0) == {}


def test_end_record_before_the_central_directory_is_refused() -> None:
    data = _local(b"a", b"x") + b"x" + _end(1)
    with pytest.raises(ZipFormatError, match="does not match"):
        read_all(data)


@pytest.mark.parametrize("listed", [0, 2])
def test_central_directory_with_fewer_or_more_entries_is_refused(listed: int) -> None:
    crc = zlib.crc32(b"x")
    data = _local(b"a", b"x") + b"x" + _central(b"a", crc, 1) * listed + _end(listed)
    with pytest.raises(ZipFormatError, match="central directory"):
        read_all(data)


def test_cp437_and_utf8_names() -> None:
    name = "é".encode()  # two bytes, two characters in cp437
    body = _local(name, b"x", flags=0x800) + b"x"
    good = body + _central(name, zlib.crc32(b"x"), 1, flags=0x800) + _end(1)
    assert read_all(good) == [("é", b"x")]
    # the central directory says cp437: another name, so not the member that was read
    bad = body + _central(name, zlib.crc32(b"x"), 1) + _end(1)
    with pytest.raises(ZipFormatError, match="does not match"):
        read_all(bad)
    with pytest.raises(ZipFormatError, match="not UTF-8"):
        read_all(_local(b"\xff", b"x", flags=0x800) + b"x")
    cp437 = _local(b"\x82", b"x") + b"x" + _central(b"\x82", zlib.crc32(b"x"), 1) + _end(1)
    assert read_all(cp437) == [("é", b"x")]


def test_zip64_end_record_with_a_huge_size_is_refused() -> None:
    data = struct.pack("<4sQ", b"PK\x06\x06", 1 << 62) + b"\0" * 100
    with pytest.raises(ZipFormatError, match="oversized"):
        read_all(data)


def test_many_zip64_records_are_refused_not_recursed() -> None:
    """Each zip64 end record used to be skipped by a recursive call: a few thousand
    locators in one feed raised RecursionError."""
    locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, 0, 1)
    with pytest.raises(ZipFormatError, match="two zip64"):
        read_all(locator * 5000 + _end())
    with pytest.raises(ZipFormatError, match="after the zip64"):
        read_all(locator + _local(b"a", b"x") + b"x")


def test_deflated_member_with_a_descriptor_without_signature() -> None:
    raw = b"hello " * 100
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflated = packer.compress(raw) + packer.flush()
    crc = zlib.crc32(raw)

    def archive(size: int) -> bytes:
        return (_local(b"a", b"", flags=8, method=8, crc=0, sizes=(0, 0)) + deflated
                + struct.pack("<III", crc, len(deflated), size)
                + _central(b"a", crc, len(raw), flags=8, compressed=len(deflated)) + _end(1))

    for step in (1, 7, 1 << 30):
        assert read_all(archive(len(raw)), step) == [("a", raw)]
    with pytest.raises(ZipFormatError, match="damaged"):
        read_all(archive(len(raw) + 1))


def test_dot_slash_for_a_file_is_refused() -> None:
    data = _local(b"./", b"x") + b"x" + _central(b"./", zlib.crc32(b"x"), 1) + _end(1)
    assert unpack(data, [1000], numbytes=1, numfiles=1) is None


def test_many_tiny_deflated_members_in_one_feed() -> None:
    """Each member's end used to put the rest of the feed back behind the bytes already
    read: 3,000 tiny members in 256 KiB grew the buffer to 600 MB, and took seconds."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(3000):
            zf.writestr(str(i), b"x")
    members = read_all(buf.getvalue())  # read() checks the buffer against the feed's size
    assert members == [(str(i), b"x") for i in range(3000)]


def test_deflate_bomb_stops_at_the_offered_bytes() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb", b"\0" * (20 * 1024 * 1024))
    data = buf.getvalue()
    written: list[int] = []
    real = filesink.write_all

    def counting(fd: int, chunk: bytes) -> None:
        written.append(len(chunk))
        real(fd, chunk)

    filesink.write_all = counting
    try:
        assert unpack(data, [len(data)], numbytes=10, numfiles=1) is None
    finally:
        filesink.write_all = real
    assert max(written) <= 1024 * 1024
    assert sum(written) <= 10 + 1024 * 1024 + 1024 * 1024


@st.composite
def signature_laden(draw: st.DrawFn) -> bytes:
    """Data full of descriptor signatures, some followed by the right sizes (or CRC) of the
    bytes before them: only a descriptor right in CRC and both sizes may end a member."""
    data = bytearray()
    for _ in range(draw(st.integers(0, 30))):
        piece = draw(st.sampled_from(["sig", "bytes", "bad-crc", "bad-size", "bad-crc-64"]))
        crc, n = zlib.crc32(data), len(data)
        if piece == "sig":
            data += b"PK\x07\x08"
        elif piece == "bytes":
            data += draw(st.binary(max_size=40))
        elif piece == "bad-crc":
            data += struct.pack("<4sIII", b"PK\x07\x08", crc ^ 1, n, n)
        elif piece == "bad-size":
            data += struct.pack("<4sIII", b"PK\x07\x08", crc, n, n + 1)
        else:
            data += struct.pack("<4sIQQ", b"PK\x07\x08", crc ^ 1, n, n)
    return bytes(data)


@settings(max_examples=150, deadline=None)
@given(body=signature_laden(), zip64=st.booleans(),
       sizes=st.lists(st.integers(1, 300), min_size=1, max_size=4))
def test_descriptor_look_alikes_never_end_a_member(body: bytes, zip64: bool,
                                                   sizes: list[int]) -> None:
    if zip64:
        out = Unseekable()
        with zipfile.ZipFile(out, "w") as zf, zf.open("x", "w", force_zip64=True) as member:
            member.write(body)
        data = bytes(out.data)
    else:
        zs = ZipStream(sized=True)
        zs.add(body, "x")
        data = bytes(zs)
    assert read(chunks(data, sizes)) == [("x", body)]


def test_data_full_of_descriptor_signatures_is_not_split_per_signature() -> None:
    """Each signature inside a STORED member's data used to cost an event of its own (and a
    disk write in the sink): about a second per MiB of signatures."""
    zs = ZipStream(sized=True)
    zs.add(b"PK\x07\x08" * 100_000, "sigs")
    parts = chunks(bytes(zs), [64 * 1024])
    reader = ZipStreamReader()
    events = [event for part in parts for event in reader.feed(part)]
    reader.close()
    assert len(events) <= len(parts) + 10


MODES = st.integers(0, 0o777)


@settings(max_examples=40, deadline=None)
@given(entries=st.lists(st.tuples(st.sampled_from(["a/", "a/b/", "a/f", "a/b/g", "c", "d/"]),
                                  MODES), min_size=1, max_size=6, unique_by=lambda e: e[0]),
       appears=st.booleans())
def test_any_received_modes_are_cleaned_up(entries: list[tuple[str, int]],
                                           appears: bool) -> None:
    """Modes are set just before publishing: if publishing fails (the target appeared), the
    cleanup must still get through folders the peer made unreadable or unwritable."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, mode in sorted(entries):
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = ((0o40000 if name.endswith("/") else 0o100000) | mode) << 16
            zf.writestr(info, b"" if name.endswith("/") else b"x")
    data = buf.getvalue()
    files = sum(not name.endswith("/") for name, _ in entries)
    with tempfile.TemporaryDirectory() as tmp:
        sink = DirectorySink(os.path.join(tmp, "recv"), DirectoryOffer("recv", len(data), 1,
                                                                       files))
        sink.write(data)
        if appears:
            os.mkdir(os.path.join(tmp, "recv"))
            with pytest.raises(HilltopError):
                sink.finish()
            assert os.listdir(tmp) == ["recv"]
            assert os.listdir(os.path.join(tmp, "recv")) == []
        else:
            sink.finish()
            assert os.listdir(tmp) == ["recv"]
            for dirpath, _, _ in os.walk(os.path.join(tmp, "recv")):
                os.chmod(dirpath, 0o700)  # so that TemporaryDirectory can remove it


RAW_NAMES = st.lists(st.lists(st.sampled_from(
    [b"/", b".", b"..", b"\\", b"\x00", b"\x7f", b"\xff", b"\x82", b"\xc3\xa9", b"C:", b"a"]),
    max_size=6).map(b"".join), min_size=1, max_size=4)


@pytest.mark.filterwarnings("ignore:Duplicate name")
@settings(max_examples=60, deadline=None)
@given(names=RAW_NAMES, utf8=st.booleans())
def test_raw_name_bytes_in_cp437_or_utf8(names: list[bytes], utf8: bool) -> None:
    """Name bytes as a hostile writer sends them, decoded as cp437 or (flagged) UTF-8."""
    flags = 0x800 if utf8 else 0
    body = central = b""
    for i, name in enumerate(names):
        data = b"" if name.endswith(b"/") else b"%d" % i
        body += _local(name, data, flags=flags) + data
        central += _central(name, zlib.crc32(data), len(data), flags=flags)
    data = body + central + _end(len(names))
    got = unpack(data, [50], numbytes=10, numfiles=len(names))
    if got is not None:
        assert len([v for v in got.values() if v is not None]) <= len(names)


@st.composite
def record_soup(draw: st.DrawFn) -> bytes:
    """Records of every kind with fields drawn freely (small and extreme), in any order."""
    small = st.integers(0, 40) | st.sampled_from(EXTREMES[:7])
    out = b""
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["local", "data", "descriptor", "central", "zip64-end",
                                     "locator", "end", "deflate"]))
        name = draw(st.binary(max_size=6))
        extra = draw(st.sampled_from([b"", struct.pack("<2H2Q", 1, 16, 3, 3),
                                      struct.pack("<2H", 1, 4) + b"\xff" * 4]))
        if kind == "local":
            out += struct.pack("<4s5HI2I2H", b"PK\x03\x04", 20,
                               draw(st.sampled_from([0, 8, 0x800, 0x808, 1])),
                               draw(st.sampled_from([0, 8, 12])), 0, 0, draw(small),
                               draw(small) & 0xFFFFFFFF, draw(small) & 0xFFFFFFFF, len(name),
                               len(extra)) + name + extra
        elif kind == "data":
            out += draw(st.binary(max_size=40))
        elif kind == "deflate":
            packer = zlib.compressobj(6, zlib.DEFLATED, -15)
            out += packer.compress(draw(st.binary(max_size=60))) + packer.flush()
        elif kind == "descriptor":
            out += struct.pack("<4sIII", b"PK\x07\x08", draw(small) & 0xFFFFFFFF,
                               draw(small) & 0xFFFFFFFF, draw(small) & 0xFFFFFFFF)
        elif kind == "central":
            out += struct.pack("<4s4B4HI2I5H2I", b"PK\x01\x02", 20, 3, 20, 0,
                               draw(st.sampled_from([0, 8, 0x800])), 0, 0, 0,
                               draw(small) & 0xFFFFFFFF, 0, draw(small) & 0xFFFFFFFF,
                               len(name), len(extra), 0, 0, 0, 0, 0) + name + extra
        elif kind == "zip64-end":
            out += struct.pack("<4sQ", b"PK\x06\x06", draw(small)) + b"\0" * 44
        elif kind == "locator":
            out += struct.pack("<4sIQI", b"PK\x06\x07", 0, 0, 1)
        else:
            out += _end(draw(st.integers(0, 3)))
    return out


@settings(max_examples=200, deadline=None)
@given(data=record_soup(), sizes=SIZES)
def test_record_soup_is_read_or_refused(data: bytes, sizes: list[int]) -> None:
    with contextlib.suppress(ProtocolError):
        read(chunks(data, sizes))
