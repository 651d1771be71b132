"""Read a zip archive front to back as it arrives, without seeking (pure, no I/O).

A received folder is a zip stream. Reading it through its central directory means keeping the
whole archive on disk until the last byte and reading it again; reading the local entries as
they arrive lets the receiver create each file while the rest is still on the wire.

Every writer a peer uses is covered: Python's zipfile and hilltop's own writer
(:mod:`hilltop.transfer.zipwriter`: sizes in the local header, a descriptor only after members over
1 MiB), zipstream-ng in official 0.24 senders (STORED members followed by a data descriptor,
zip64 when large), Go's archive/zip in wormhole-william (DEFLATED members with data
descriptors). A STORED member with a data descriptor has no length before its data, so its
end is found by looking for the descriptor's signature *and* checking that the CRC-32 and
both sizes it carries equal those of the bytes read so far; data that merely contains the
signature cannot pass that.

The central directory at the end is checked against the members read (same names, sizes and
CRCs, same order) and reported, because only it holds the Unix mode of each entry.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Iterator
from enum import Enum, auto
from typing import Any, Literal

from hilltop._values import value
from hilltop.errors import ProtocolError, ZipFormatError
from hilltop.transfer.zipformat import (
    CENTRAL,
    CENTRAL_HEADER,
    DEFLATED,
    DESCRIPTOR,
    DESCRIPTOR_32,
    DESCRIPTOR_64,
    END,
    END_RECORD,
    FLAG_DESCRIPTOR,
    FLAG_ENCRYPTED,
    FLAG_UTF8,
    LOCAL,
    LOCAL_HEADER,
    STORED,
    ZIP64_END,
    ZIP64_END_FIXED,
    ZIP64_EXTRA,
    ZIP64_LOCATOR,
    ZIP64_LOCATOR_RECORD,
)

_WITH_SIGNATURE = (DESCRIPTOR_32, DESCRIPTOR_64)
_WITHOUT_SIGNATURE = (struct.Struct("<III"), struct.Struct("<IQQ"))  # the signature is optional
_MAX_INFLATE = 1024 * 1024  # output per zlib call: a bomb never inflates in one go
# Compressed bytes given to zlib per call: at least this, at most what the member has used so
# far. What follows a member's end is given back, so this bounds the copying wasted per
# member by the member's own size: many tiny members in one big feed cost linear time.
_MIN_INFLATE_INPUT = 4096
_MAX_ZIP64_END = 64 * 1024  # the fixed part is 44 bytes; no writer adds more
_HELD_BACK = len(DESCRIPTOR) - 1  # a signature may straddle two feeds


@value(slots=True)
class MemberStart:
    """A member's local header: where its bytes go (the name is not checked here)."""

    name: str


@value(slots=True)
class MemberData:
    """Uncompressed bytes of the current member, in order."""

    data: bytes


@value(slots=True)
class MemberEnd:
    """The current member is complete and its CRC-32 and sizes were checked."""

    size: int


@value(slots=True)
class CentralEntry:
    """One central-directory record, for the member read at the same place. Whether all of
    them match the members (names, sizes, CRCs) is checked at the end of the archive."""

    name: str
    create_system: int
    external_attr: int
    flags: int


@value(slots=True)
class ArchiveEnd:
    """The end-of-central-directory record: nothing may follow."""


Event = MemberStart | MemberData | MemberEnd | CentralEntry | ArchiveEnd


class _State(Enum):
    SIGNATURE = auto()  # between records
    COPY = auto()  # STORED, size known
    SCAN = auto()  # STORED, size in the descriptor after the data
    INFLATE = auto()  # DEFLATED, ends where the deflate stream ends
    DESCRIPTOR = auto()  # after a DEFLATED member with FLAG_DESCRIPTOR
    DONE = auto()


@value(frozen=False, slots=True)
class _Member:
    """The member being read: its local header's fields and what was read of it so far."""

    name: str
    crc: int  # from the local header (0 with a descriptor)
    compressed: int  # from the local header, or -1 when a descriptor carries it
    size: int
    zip64: bool  # the local header has a zip64 field: expect a 24-byte descriptor first
    read_crc: int = 0
    read_compressed: int = 0
    read_size: int = 0


def _note(digest: Any, name: str, size: int, crc: int) -> None:
    encoded = name.encode("utf-8", "surrogateescape")
    digest.update(struct.pack("<QQI", len(encoded), size, crc) + encoded)


def _decode_name(raw: bytes, flags: int) -> str:
    if flags & FLAG_UTF8:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ZipFormatError("an entry name is not UTF-8") from None
    return raw.decode("cp437")


def _zip64_values(extra: bytes, wanted: int) -> list[int] | None:
    """The first ``wanted`` 8-byte values of the zip64 extra field (None if absent)."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<2H", extra, pos)
        body = extra[pos + 4:pos + 4 + length]
        if tag == ZIP64_EXTRA:
            count = min(wanted, len(body) // 8)
            return list(struct.unpack_from(f"<{count}Q", body))
        pos += 4 + length
    return None


class ZipStreamReader:
    """Feed bytes with :meth:`feed`, take events from what it returns, call :meth:`close`
    at the end of the stream. Raises :class:`ZipFormatError` on anything it cannot trust."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._state = _State.SIGNATURE
        self._trailer: set[bytes] = set()  # zip64 end records seen (each at most once)
        self._member: _Member | None = None
        self._inflater: zlib._Decompress | None = None
        # What the members were and what the central directory says they were, each as a
        # count and a running digest of (name, size, CRC): constant memory for any archive.
        self._members = 0
        self._members_digest = hashlib.sha256()
        self._central = 0
        self._central_digest = hashlib.sha256()

    @property
    def done(self) -> bool:
        return self._state is _State.DONE

    def feed(self, data: bytes | memoryview) -> Iterator[Event]:
        """Events for the bytes so far, lazily: a caller that stops on a bad event (too many
        bytes for the offer) never makes the reader inflate the rest of a zip bomb. Consume
        them all before the next :meth:`feed`."""
        if self._state is _State.DONE:
            if data:
                raise ZipFormatError("bytes after the end of the archive")
            return
        if self._pos:
            del self._buf[:self._pos]
            self._pos = 0
        self._buf += data
        yield from self._parse()

    def close(self) -> None:
        if self._state is not _State.DONE:
            raise ZipFormatError("the archive ends early")

    # --- parsing ------------------------------------------------------------------------------
    def _available(self) -> int:
        return len(self._buf) - self._pos

    def _take_record(self, fixed: int, name_len: int, extra_len: int, comment_len: int,
                     flags: int) -> tuple[str, bytes] | None:
        """Consume a header record: ``fixed`` bytes, then name, extra field and comment.
        Returns the name and the extra field, or None while not all of it is here."""
        total = fixed + name_len + extra_len + comment_len
        if self._available() < total:
            return None
        start = self._pos + fixed
        name = _decode_name(bytes(self._buf[start:start + name_len]), flags)
        extra = bytes(self._buf[start + name_len:start + name_len + extra_len])
        self._pos += total
        return name, extra

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[self._pos:self._pos + n])
        self._pos += n
        return out

    def _parse(self) -> Iterator[Event]:
        while True:
            state = self._state
            if state is _State.SIGNATURE:
                event = self._record()
                if event is None:
                    return
                yield event
            elif state is _State.COPY:
                yield from self._copy()
                if self._state is _State.COPY:
                    return
            elif state is _State.SCAN:
                yield from self._scan()
                if self._state is _State.SCAN:
                    return
            elif state is _State.INFLATE:
                yield from self._inflate()
                if self._state is _State.INFLATE:
                    return
            elif state is _State.DESCRIPTOR:
                event = self._descriptor_after_inflate()
                if event is None:
                    return
                yield event
            else:
                if self._available():
                    raise ZipFormatError("bytes after the end of the archive")
                return

    def _record(self) -> Event | None:
        """A local header, central record or end record, once all of it is here. A loop,
        not recursion, skips the zip64 end records."""
        while True:
            if self._available() < 4:
                return None
            sig = bytes(self._buf[self._pos:self._pos + 4])
            if sig in (ZIP64_END, ZIP64_LOCATOR):
                if sig in self._trailer:
                    raise ZipFormatError("two zip64 end records")
                if not self._skip_zip64(sig):
                    return None
                self._trailer.add(sig)
                continue
            if sig == END:
                return self._end_record()
            if self._trailer and sig in (LOCAL, CENTRAL):
                raise ZipFormatError("a record after the zip64 end record")
            if sig == LOCAL:
                return self._local_header()
            if sig == CENTRAL:
                return self._central_record()
            raise ZipFormatError("unexpected bytes where a zip record should start")

    def _local_header(self) -> Event | None:
        if self._central:
            raise ZipFormatError("a member after the central directory")
        if self._available() < LOCAL_HEADER.size:
            return None
        (_, _, flags, method, _, _, crc, compressed, size, name_len,
         extra_len) = LOCAL_HEADER.unpack_from(self._buf, self._pos)
        parts = self._take_record(LOCAL_HEADER.size, name_len, extra_len, 0, flags)
        if parts is None:
            return None
        name, extra = parts
        if flags & FLAG_ENCRYPTED:
            raise ProtocolError(f"refusing the received folder: entry {ascii(name)} is encrypted")
        if method not in (STORED, DEFLATED):
            raise ZipFormatError(f"entry {ascii(name)} uses compression method {method}")
        zip64 = _zip64_values(extra, 2)
        if zip64 is not None:
            values = iter(zip64)
            size = next(values, size) if size == 0xFFFFFFFF else size
            compressed = next(values, compressed) if compressed == 0xFFFFFFFF else compressed
        described = bool(flags & FLAG_DESCRIPTOR)
        self._member = _Member(name, crc, -1 if described else compressed, size,
                               zip64 is not None)
        if method == DEFLATED:
            self._inflater = zlib.decompressobj(-15)
            self._state = _State.INFLATE
        elif described:
            self._state = _State.SCAN
        else:
            if compressed != size:
                raise ZipFormatError(f"stored entry {ascii(name)} has two sizes")
            self._state = _State.COPY
        return MemberStart(name)

    def _data(self, data: bytes, compressed: int) -> MemberData:
        member = self._member
        assert member is not None
        member.read_crc = zlib.crc32(data, member.read_crc)
        member.read_size += len(data)
        member.read_compressed += compressed
        return MemberData(data)

    def _end_member(self, crc: int, compressed: int, size: int) -> MemberEnd:
        member = self._member
        assert member is not None
        if (member.read_crc, member.read_compressed, member.read_size) != (
                crc, compressed, size):
            raise ZipFormatError(f"entry {ascii(member.name)} is damaged (CRC or size)")
        self._members += 1
        _note(self._members_digest, member.name, member.read_size, member.read_crc)
        self._member = None
        self._inflater = None
        self._state = _State.SIGNATURE
        return MemberEnd(size)

    def _copy(self) -> Iterator[Event]:
        member = self._member
        assert member is not None
        want = member.compressed - member.read_compressed
        n = min(want, self._available())
        if n:
            yield self._data(self._take(n), n)
        if member.read_compressed == member.compressed:
            yield self._end_member(member.crc, member.compressed, member.size)

    def _scan(self) -> Iterator[Event]:
        """STORED with a data descriptor: data up to the descriptor that vouches for it.
        A signature whose size field cannot be the count of bytes before it is passed over
        at once: data full of signatures costs no event (and no disk write) per signature."""
        member = self._member
        assert member is not None
        search = self._pos
        while True:
            found = self._buf.find(DESCRIPTOR, search)
            if found < 0:
                n = self._available() - _HELD_BACK
                if n > 0:
                    yield self._data(self._take(n), n)
                return
            search = found + 1
            if not self._could_end(found):
                continue
            if found > self._pos:
                n = found - self._pos
                yield self._data(self._take(n), n)
            end = self._descriptor_match(exact=True)
            if end is None:
                return  # not enough bytes yet to tell
            if end:
                yield end
                return

    def _could_end(self, at: int) -> bool:
        """Whether a descriptor at ``at`` may hold the size of the member's bytes before it
        (True until enough bytes are here to tell). Both layouts start the compressed size at
        offset 8, so its low 32 bits must be that size's."""
        member = self._member
        assert member is not None
        if len(self._buf) - at < 12:
            return True
        size = member.read_compressed + at - self._pos
        low32: int = struct.unpack_from("<I", self._buf, at + 8)[0]
        return low32 == size & 0xFFFFFFFF

    def _descriptor_match(self, exact: bool) -> MemberEnd | Literal[False] | None:
        """At a descriptor candidate: the member's end if it vouches for what was read,
        False if it does not, None if more bytes are needed to tell."""
        member = self._member
        assert member is not None
        buf, pos, have = self._buf, self._pos, self._available()
        read = (member.read_crc, member.read_compressed, member.read_size)
        layouts = _WITH_SIGNATURE if buf[pos:pos + 4] == DESCRIPTOR else _WITHOUT_SIGNATURE
        if member.zip64:
            layouts = layouts[::-1]
        for layout in layouts:
            if have < layout.size:
                return None
            fields = layout.unpack_from(buf, pos)
            crc, compressed, size = fields[-3:]
            if (crc, compressed, size) == read:
                self._pos += layout.size
                return self._end_member(crc, compressed, size)
        if exact:
            return False
        raise ZipFormatError(f"entry {ascii(member.name)} is damaged (CRC or size)")

    def _inflate(self) -> Iterator[Event]:
        member = self._member
        inflater = self._inflater
        assert member is not None and inflater is not None
        while not inflater.eof:
            pending = inflater.unconsumed_tail
            if pending:
                chunk = pending
            elif self._available():
                window = max(_MIN_INFLATE_INPUT, member.read_compressed)
                chunk = self._take(min(self._available(), window))
            else:
                out = inflater.decompress(b"", _MAX_INFLATE)  # output zlib still holds
                if not out:
                    return
                yield self._data(out, 0)
                continue
            before = len(chunk)
            try:
                out = inflater.decompress(chunk, _MAX_INFLATE)
            except zlib.error as err:
                raise ZipFormatError(f"entry {ascii(member.name)}: {err}") from None
            # at the end CPython leaves the bytes after the stream in both attributes
            left = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
            used = before - len(left)
            if out or used:
                yield self._data(out, used)
            if inflater.unused_data:
                self._give_back(inflater.unused_data)
        if member.compressed < 0:
            self._state = _State.DESCRIPTOR
            return
        yield self._end_member(member.crc, member.compressed, member.size)

    def _give_back(self, rest: bytes) -> None:
        """The stream ended inside the last chunk: put its rest back in front of the buffer,
        over bytes already read (they were taken in this feed, so there is room), so the
        buffer never grows however many members one feed holds."""
        n = len(rest)
        if n <= self._pos:
            self._pos -= n
            self._buf[self._pos:self._pos + n] = rest
        else:
            self._buf[self._pos:self._pos] = rest

    def _descriptor_after_inflate(self) -> Event | None:
        result = self._descriptor_match(exact=False)
        return result if isinstance(result, MemberEnd) else None

    def _central_record(self) -> Event | None:
        if self._available() < CENTRAL_HEADER.size:
            return None
        fields = CENTRAL_HEADER.unpack_from(self._buf, self._pos)
        (_, _, create_system, _, _, flags, _, _, _, crc, compressed, size, name_len,
         extra_len, comment_len, _, _, external_attr, _) = fields
        parts = self._take_record(CENTRAL_HEADER.size, name_len, extra_len, comment_len,
                                  flags)
        if parts is None:
            return None
        name, extra = parts
        if size == 0xFFFFFFFF:
            size = (_zip64_values(extra, 1) or [size])[0]
        self._central += 1
        if self._central > self._members:
            raise ZipFormatError("its central directory lists more entries than it holds")
        _note(self._central_digest, name, size, crc)
        return CentralEntry(name, create_system, external_attr, flags)

    def _skip_zip64(self, sig: bytes) -> bool:
        """Step over a zip64 end record or locator (the end record has all we need);
        False if it is not all here yet."""
        if sig == ZIP64_END:
            if self._available() < ZIP64_END_FIXED.size:
                return False
            _, rest = ZIP64_END_FIXED.unpack_from(self._buf, self._pos)
            if rest > _MAX_ZIP64_END:
                raise ZipFormatError("an oversized zip64 end record")
            size = ZIP64_END_FIXED.size + rest
        else:
            size = ZIP64_LOCATOR_RECORD.size
        if self._available() < size:
            return False
        self._pos += size
        return True

    def _end_record(self) -> Event | None:
        if self._available() < END_RECORD.size:
            return None
        comment_len = END_RECORD.unpack_from(self._buf, self._pos)[-1]
        if self._available() < END_RECORD.size + comment_len:
            return None
        if self._central != self._members \
                or self._central_digest.digest() != self._members_digest.digest():
            raise ZipFormatError("its central directory does not match its entries")
        self._pos += END_RECORD.size + comment_len
        self._state = _State.DONE
        return ArchiveEnd()
