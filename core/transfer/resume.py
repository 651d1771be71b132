"""Resuming an interrupted file receive between hilltop peers (feature ``resume-v1``): the
record kept beside a partial, the decision whether to offer it, and the prefix proof.

Decisions:

* **What is kept.** A receiver that both peers allowed to resume writes a small record
  (``.NAME.hilltop-resume``) beside its hidden partial *before* the first byte, and rewrites
  it every :data:`RECORD_EVERY` bytes, so even a SIGKILLed receiver leaves one behind. The
  record holds the offer identity (name and size as the sender offered them), how many bytes
  were written when it was last updated, and when. Nothing secret: no code, no key, no hash
  of the data (a later sender proves the prefix; the receiver never tells what it holds).
* **Whose partial.** The record also names the partial's file (device and inode). A later
  receive writes into a kept partial only if it is still that file, a regular file with one
  link, owned by us (:func:`hilltop.transfer.partials.claim_resumable`): anyone who can
  write to the folder can plant a hard link to another file under the hidden name, and
  writing into it would fill (and hand over) that other file.
* **How far to continue.** From the partial's length on disk (capped below the size): every
  byte in it arrived through authenticated records and was written in order, and whatever
  a crash might have damaged is caught by the proof, which then restarts from zero.
* **Who proves what.** The receiver sends a fresh random salt with the offset; the sender
  answers ``SHA-256(salt || prefix)`` over its own first ``offset`` bytes; the receiver
  compares that with its own computation over the partial. A fresh salt means an old
  answer cannot be replayed, and the receiver reveals nothing about its data.
* **The end result is checked whole.** A resumed transfer always hashes, even where both
  peers agreed to skip the whole-file SHA-256 (``ack-without-sha256``): the records
  authenticate only the bytes of this session, not the prefix kept from an earlier one.
  The hash is the proof's, continued: ``SHA-256(salt || whole file)``, so the prefix is
  read and hashed once for both jobs (two separate hashes made a resumed 1 GiB on
  loopback slower than starting over). The receiver's covers the prefix it read back and
  every byte that arrived; the sender compares it in the final ack with its own.
* **How long.** A kept partial with its record is left alone by other receives of the same
  name for :data:`KEEP_FOR` (7 days: long enough for "try again tomorrow", short enough that
  forgotten multi-GB partials go); after that it is cleaned like any leftover.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeGuard

from hilltop._values import value
from hilltop.errors import ProtocolError
from hilltop.rendezvous.capabilities import RESUME

if TYPE_CHECKING:
    from hilltop.rendezvous.capabilities import PeerCapabilities

RECORD_VERSION = 1
KEEP_FOR = 7 * 24 * 3600.0
"""Seconds a kept partial (one with a record) survives other receives of the same name."""
RECORD_EVERY = 32 * 1024 * 1024
"""Bytes written between two updates of the record (a rename of a ~150-byte file)."""
SALT_SIZE = 32
MAX_RECORD = 4096
"""A record is a few hundred bytes; anything bigger is not ours."""
_HEX64 = re.compile(r"[0-9a-f]{64}")


def negotiated(ours: Iterable[str], peer: PeerCapabilities) -> bool:
    """Both sides listed ``resume-v1``: only then is a partial kept or continued."""
    return RESUME in ours and RESUME in peer.features


@value
class PartialRecord:
    """What a kept partial is: the sender's offer identity and the bytes written so far."""

    filename: str
    filesize: int
    on_disk: int
    updated: float
    device: int | None = None
    """``st_dev`` and ``st_ino`` of the partial this record belongs to (None in a record
    written before they were kept: such a partial is never written into again)."""
    inode: int | None = None

    def to_bytes(self) -> bytes:
        body: dict[str, Any] = {"hilltop-resume": RECORD_VERSION, "filename": self.filename,
                                "filesize": self.filesize, "on_disk": self.on_disk,
                                "updated": round(self.updated, 3)}
        if self.device is not None and self.inode is not None:
            body.update(device=self.device, inode=self.inode)
        return json.dumps(body).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> PartialRecord | None:
        """The record, or None for anything that is not a well-formed version-1 record."""
        if len(data) > MAX_RECORD:
            return None
        try:
            obj = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None
        if not isinstance(obj, dict) or obj.get("hilltop-resume") != RECORD_VERSION:
            return None
        name, size, on_disk, updated = (obj.get(k) for k in
                                        ("filename", "filesize", "on_disk", "updated"))
        if not isinstance(name, str) or not _count(size) or not _count(on_disk) \
                or not isinstance(updated, int | float) or isinstance(updated, bool):
            return None
        device, inode = obj.get("device"), obj.get("inode")
        if not (_count(device) and _count(inode)):
            device = inode = None
        return cls(name, size, on_disk, float(updated), device, inode)

    def matches(self, filename: str, filesize: int) -> bool:
        return self.filename == filename and self.filesize == filesize

    def names_file(self, device: int, inode: int) -> bool:
        """This record was written for the file ``device``/``inode``."""
        return self.device == device and self.inode == inode


@value
class Decision:
    """Where a receive starts: ``offset`` bytes are kept; ``why`` says so for a person."""

    offset: int
    why: str


def decide(record: PartialRecord | None, on_disk: int, filename: str, filesize: int,
           age: float) -> Decision:
    """Whether a kept partial of ``on_disk`` bytes (last changed ``age`` seconds ago) can
    continue the offer of ``filename``/``filesize``; offset 0 means start over."""
    if record is None:
        return Decision(0, "no record of what the partial is")
    if not record.matches(filename, filesize):
        return Decision(0, "the partial is of another file with the same name")
    if age > KEEP_FOR:
        return Decision(0, "the partial is too old")
    if on_disk <= 0:
        return Decision(0, "the partial is empty")
    # The whole file may be there (killed before renaming): still send the last byte, so
    # the transfer has a data phase and ends exactly as any other.
    return Decision(min(on_disk, filesize - 1), "")


class PrefixProof:
    """One SHA-256 that starts with the salt: over the prefix it gives the proof
    (``SHA-256(salt || prefix)``), and the same state, continued over the rest of the file,
    gives the whole-file check of a resumed transfer (``SHA-256(salt || file)``), so each
    byte is hashed once on each side."""

    def __init__(self, salt: bytes) -> None:
        self.whole = hashlib.sha256(salt)

    def update(self, data: bytes | memoryview) -> None:
        self.whole.update(data)

    def proof(self) -> str:
        return self.whole.copy().hexdigest()


# --- the answer's request and the two transit records ---------------------------------------
def request_to_wire(offset: int, salt: bytes) -> dict[str, Any]:
    """The ``hilltop-resume`` entry of the receiver's ``answer``."""
    return {"offset": offset, "salt": salt.hex()}


def request_from_wire(value: object) -> tuple[int, bytes]:
    """``(offset, salt)`` from the answer's ``hilltop-resume``; ProtocolError otherwise."""
    if not isinstance(value, dict):
        raise ProtocolError("peer sent a resume request that is not an object")
    offset, salt = value.get("offset"), value.get("salt")
    if not _count(offset) or not isinstance(salt, str) or not _HEX64.fullmatch(salt):
        raise ProtocolError("peer sent a malformed resume request")
    return offset, bytes.fromhex(salt)


def proof_record(proof: str) -> bytes:
    """The sender's first transit record of a resumed transfer."""
    return json.dumps({"resume-proof": proof}).encode("utf-8")


def parse_proof(record: bytes) -> str:
    obj = _record_object(record)
    proof = obj.get("resume-proof")
    if not isinstance(proof, str) or not _HEX64.fullmatch(proof):
        raise ProtocolError("the sender's resume proof is malformed")
    return proof


def decision_record(offset: int) -> bytes:
    """The receiver's reply: where the sender starts (the requested offset, or 0)."""
    return json.dumps({"resume-from": offset}).encode("utf-8")


def parse_decision(record: bytes, requested: int) -> int:
    obj = _record_object(record)
    offset = obj.get("resume-from")
    if not _count(offset) or offset not in (0, requested):
        raise ProtocolError("the receiver's resume decision is malformed")
    return offset


def _record_object(record: bytes) -> dict[str, Any]:
    if len(record) > MAX_RECORD:
        raise ProtocolError("peer sent an oversized resume record")
    try:
        obj = json.loads(bytes(record).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError("peer sent a resume record that is not JSON") from None
    if not isinstance(obj, dict):
        raise ProtocolError("peer sent a resume record that is not an object")
    return obj


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
