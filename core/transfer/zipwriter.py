"""Lay out a STORED zip whose exact size is known before its first byte (pure, no I/O).

The v1 protocol offers a folder as a zip and states its size (``zipsize``) up front, so the
sender must know every byte count before reading any file. Official 0.24 uses zipstream-ng,
which writes every member with a *data descriptor* (CRC-32 and sizes after the data, zeros in
the local header). A receiver that unpacks as the bytes arrive must then search each member's
data for the descriptor's signature to find where it ends: on a tree of 10,000 small files
that search alone was a third of hilltop's zip-reading time, on the thread that paces the
whole transfer.

So members up to :data:`SMALL_MEMBER` bytes are read whole before their header is written and
carry their CRC-32 and sizes in the local header, with no descriptor (as Python's zipfile
writes to a seekable file); a receiver copies exactly that many bytes. Bigger members are
streamed with a descriptor (as zipstream-ng does), zip64 where a size needs it. Every receiver
reads both: Python's zipfile (official) and Go's archive/zip (wormhole-william) through the
central directory, :mod:`hilltop.transfer.zipreader` front to back.

Each entry keeps the Unix mode in its external attributes (create system 3), as zipstream-ng
does: official 0.24 chmods every file it unpacks from them. Its time comes in as local calendar
fields, as zipfile's ``ZipInfo.date_time``: turning an mtime into local time reads the
machine's time zone, which the caller (:mod:`hilltop.transfer.source`) does.
"""

from __future__ import annotations

import stat
import struct
from array import array
from collections.abc import Iterator, Sequence

from hilltop._values import value
from hilltop.transfer.zipformat import (
    CENTRAL,
    CENTRAL_HEADER,
    DESCRIPTOR,
    DESCRIPTOR_32,
    DESCRIPTOR_64,
    END,
    END_RECORD,
    EXTRA_HEADER,
    FLAG_DESCRIPTOR,
    FLAG_UTF8,
    LOCAL,
    LOCAL_HEADER,
    MAX_16,
    MAX_32,
    STORED,
    ZIP64_END,
    ZIP64_END_RECORD,
    ZIP64_EXTRA,
    ZIP64_LOCATOR,
    ZIP64_LOCATOR_RECORD,
)

SMALL_MEMBER = 1024 * 1024
"""Members up to this size are read whole first (the sender's buffer is at most this big) so
their header can hold their CRC-32; bigger ones are streamed with a data descriptor."""
ZIP64_LIMIT = (1 << 31) - 1
"""Sizes and offsets above this use zip64 fields (the limit Python's zipfile uses)."""
VERSION = 20  # 2.0: folders and STORED members
VERSION_ZIP64 = 45  # 4.5: zip64 fields
UNIX = 3  # the "version made by" high byte that says external attributes hold a Unix mode
MSDOS_DIRECTORY = 0x10
_ZIP64_LOCAL_EXTRA = EXTRA_HEADER.pack(ZIP64_EXTRA, 16) + bytes(16)  # sizes in the descriptor


DateTime = tuple[int, int, int, int, int, int]
"""Local year, month, day, hour, minute, second: ``time.localtime(mtime)[:6]``."""


@value(slots=True)
class Entry:
    """One member: a file (``size`` bytes) or, when ``arcname`` ends with "/", a folder."""

    arcname: str
    size: int
    mode: int  # st_mode: type and permission bits
    date_time: DateTime  # when it was last modified, in local time

    @property
    def is_dir(self) -> bool:
        return self.arcname.endswith("/")


def _name_and_flags(arcname: str) -> tuple[bytes, int]:
    try:
        return arcname.encode("ascii"), 0
    except UnicodeEncodeError:
        return arcname.encode("utf-8"), FLAG_UTF8


def _dos_time(date_time: DateTime) -> tuple[int, int]:
    """(time, date) in MS-DOS form, clamped to what it can hold (1980-2107)."""
    year, month, day, hour, minute, second = date_time
    if year < 1980:
        return 0, (1 << 5) | 1  # 1980-01-01 00:00
    if year > 2107:
        return (23 << 11) | (59 << 5) | 29, (127 << 9) | (12 << 5) | 31
    return ((hour << 11) | (minute << 5) | (second // 2),
            ((year - 1980) << 9) | (month << 5) | day)


class ZipLayout:
    """The byte layout of a STORED zip of ``entries``, in order.

    :attr:`size` is exact from the start. The caller sends, for each entry in turn,
    :meth:`local_header`, the entry's bytes, and :meth:`descriptor` (empty for small members
    and folders), then :meth:`central_directory`; a member's CRC-32 is given to the first of
    them that needs it, and the central directory repeats what the local headers said.
    ``small`` and ``zip64_limit`` are parameters so tests can reach every layout with little
    data.
    """

    def __init__(self, entries: Sequence[Entry], small: int = SMALL_MEMBER,
                 zip64_limit: int = ZIP64_LIMIT) -> None:
        self.entries = entries
        self._small = small
        self._zip64_limit = zip64_limit
        self._crcs = array("I", [0]) * len(entries)  # filled in as members are written
        self._times = array("I", [0]) * len(entries)  # DOS date << 16 | time, likewise
        self._offsets = array("Q")
        self._names: list[tuple[bytes, int]] = []
        offset = 0
        for entry in entries:
            name, flags = _name_and_flags(entry.arcname)
            self._names.append((name, flags))
            self._offsets.append(offset)
            offset += LOCAL_HEADER.size + len(name) + entry.size
            if self.streamed(entry):
                offset += self._descriptor_size(entry)
                if self._local_zip64(entry):
                    offset += len(_ZIP64_LOCAL_EXTRA)
        self._central_offset = offset
        self._central_size = sum(
            CENTRAL_HEADER.size + len(name) + self._central_extra_size(entry, i)
            for i, (entry, (name, _)) in enumerate(zip(entries, self._names, strict=True)))
        self.size = (offset + self._central_size + END_RECORD.size
                     + (ZIP64_END_RECORD.size + ZIP64_LOCATOR_RECORD.size
                        if self._needs_zip64_end() else 0))

    # --- which layout an entry gets ---------------------------------------------------------
    def streamed(self, entry: Entry) -> bool:
        """Whether the member is written before its CRC is known (header, data, descriptor)."""
        return not entry.is_dir and entry.size > self._small

    def _local_zip64(self, entry: Entry) -> bool:
        return self.streamed(entry) and entry.size > self._zip64_limit

    def _descriptor_size(self, entry: Entry) -> int:
        return (DESCRIPTOR_64 if self._local_zip64(entry) else DESCRIPTOR_32).size

    def _central_zip64_values(self, entry: Entry, index: int) -> list[int]:
        values = [entry.size, entry.size] if entry.size > self._zip64_limit else []
        if self._offsets[index] > self._zip64_limit:
            values.append(self._offsets[index])
        return values

    def _central_extra_size(self, entry: Entry, index: int) -> int:
        values = self._central_zip64_values(entry, index)
        return EXTRA_HEADER.size + 8 * len(values) if values else 0

    def _needs_zip64_end(self) -> bool:
        return (len(self.entries) >= MAX_16 or self._central_offset > self._zip64_limit
                or self._central_size > self._zip64_limit)

    # --- records ----------------------------------------------------------------------------
    def local_header(self, index: int, crc: int = 0) -> bytes:
        """The local header; ``crc`` is the member's CRC-32 unless :meth:`streamed`."""
        entry = self.entries[index]
        name, flags = self._names[index]
        extra = b""
        size = entry.size
        if self.streamed(entry):
            flags |= FLAG_DESCRIPTOR
            crc = size = 0
            if self._local_zip64(entry):
                extra, size = _ZIP64_LOCAL_EXTRA, MAX_32
        else:
            self._crcs[index] = crc
        version = VERSION_ZIP64 if extra else VERSION
        dos_time, dos_date = _dos_time(entry.date_time)
        self._times[index] = dos_date << 16 | dos_time
        return LOCAL_HEADER.pack(LOCAL, version, flags, STORED, dos_time, dos_date, crc,
                                 size, size, len(name), len(extra)) + name + extra

    def descriptor(self, index: int, crc: int) -> bytes:
        """What follows a streamed member's data (nothing for the others)."""
        entry = self.entries[index]
        if not self.streamed(entry):
            return b""
        self._crcs[index] = crc
        layout = DESCRIPTOR_64 if self._local_zip64(entry) else DESCRIPTOR_32
        return layout.pack(DESCRIPTOR, crc, entry.size, entry.size)

    def central_directory(self) -> Iterator[bytes]:
        """The central directory and end records, a piece per entry."""
        for index, entry in enumerate(self.entries):
            yield self._central_record(index, entry)
        count = len(self.entries)
        if self._needs_zip64_end():
            end64_at = self._central_offset + self._central_size
            yield ZIP64_END_RECORD.pack(
                ZIP64_END, ZIP64_END_RECORD.size - 12, (UNIX << 8) | VERSION_ZIP64,
                VERSION_ZIP64, 0, 0, count, count, self._central_size, self._central_offset)
            yield ZIP64_LOCATOR_RECORD.pack(ZIP64_LOCATOR, 0, end64_at, 1)
        yield END_RECORD.pack(END, 0, 0, min(count, MAX_16), min(count, MAX_16),
                              min(self._central_size, MAX_32),
                              min(self._central_offset, MAX_32), 0)

    def _central_record(self, index: int, entry: Entry) -> bytes:
        name, flags = self._names[index]
        if self.streamed(entry):
            flags |= FLAG_DESCRIPTOR
        values = self._central_zip64_values(entry, index)
        extra = b""
        if values:
            extra = EXTRA_HEADER.pack(ZIP64_EXTRA, 8 * len(values)) + struct.pack(
                f"<{len(values)}Q", *values)
        size = MAX_32 if entry.size > self._zip64_limit else entry.size
        offset = self._offsets[index]
        version = VERSION_ZIP64 if values or self._local_zip64(entry) else VERSION
        attributes = (stat.S_IFMT(entry.mode) | stat.S_IMODE(entry.mode)) << 16
        if entry.is_dir:
            attributes |= MSDOS_DIRECTORY
        dos_date, dos_time = divmod(self._times[index], 1 << 16)
        return CENTRAL_HEADER.pack(
            CENTRAL, version, UNIX, version, 0, flags, STORED, dos_time, dos_date,
            self._crcs[index], size, size, len(name), len(extra), 0, 0, 0, attributes,
            MAX_32 if offset > self._zip64_limit else offset) + name + extra
