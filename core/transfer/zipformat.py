"""The zip records both the front-to-back reader and the sized writer use: signatures, flags
and fixed layouts (PKWARE's APPNOTE), in one place so the two cannot drift apart."""

from __future__ import annotations

import struct

LOCAL = b"PK\x03\x04"
CENTRAL = b"PK\x01\x02"
DESCRIPTOR = b"PK\x07\x08"
ZIP64_END = b"PK\x06\x06"
ZIP64_LOCATOR = b"PK\x06\x07"
END = b"PK\x05\x06"

STORED = 0
DEFLATED = 8
FLAG_ENCRYPTED = 0x1
FLAG_DESCRIPTOR = 0x8
FLAG_UTF8 = 0x800

LOCAL_HEADER = struct.Struct("<4s5HI2I2H")  # 30 bytes, then name and extra field
CENTRAL_HEADER = struct.Struct("<4s4B4HI2I5H2I")  # 46 bytes, then name, extra, comment
DESCRIPTOR_32 = struct.Struct("<4sIII")  # 16 bytes, with signature
DESCRIPTOR_64 = struct.Struct("<4sIQQ")  # 24 bytes, with signature
END_RECORD = struct.Struct("<4s4H2IH")  # 22 bytes, then a comment
ZIP64_END_FIXED = struct.Struct("<4sQ")  # signature and the size of the rest
ZIP64_END_RECORD = struct.Struct("<4sQ2H2I4Q")  # 56 bytes: the whole record as written
ZIP64_LOCATOR_RECORD = struct.Struct("<4sIQI")  # 20 bytes
ZIP64_EXTRA = 0x0001  # the extra field's tag
EXTRA_HEADER = struct.Struct("<2H")  # tag, length

MAX_32 = 0xFFFFFFFF  # a 32-bit field with this value defers to the zip64 field
MAX_16 = 0xFFFF
