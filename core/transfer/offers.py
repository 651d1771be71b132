"""File-transfer v1 application messages: the wire codec.

The v1 app protocol (protocol summary §4) is a handful of JSON objects, each sent as one
numbered mailbox phase with exactly one top-level key: ``transit``, ``offer``, ``answer`` or
``error``. Each becomes a frozen dataclass here so the CLI matches on types, and every way a peer
can get the JSON wrong ends in one :class:`~hilltop.errors.ProtocolError` (or its subclass
:class:`~hilltop.errors.UnknownOfferError`, which carries the text official receivers send back).

Where a received offer may be saved is filesystem policy and lives in
:mod:`hilltop.transfer.targets`; this module is pure (bytes in, dataclasses out).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import field
from typing import Any, Final, Literal, TypeVar

from hilltop._values import value
from hilltop.errors import ProtocolError, UnknownOfferError
from hilltop.transfer.manifest import FILES_KIND, files_from_body
from hilltop.transfer.manifest import FilesOffer as FilesOffer  # part of the offer family

DIRECTORY_MODE: Final = "zipfile/deflated"
"""The only directory mode 0.24 and wormhole-william send (the zip is STORED all the same)."""

MESSAGE_ACK: Final = "message_ack"
FILE_ACK: Final = "file_ack"
RESUME_KEY: Final = "hilltop-resume"
"""Beside ``file_ack`` in an answer: the receiver asks to continue (feature ``resume-v1``)."""


def _encode(obj: dict[str, Any]) -> bytes:
    # Official peers use json.dumps defaults (ASCII-escaped); spacing does not matter on the wire.
    return json.dumps(obj).encode("utf-8")


def _is_count(value: object) -> bool:
    # JSON booleans decode to bool, a subclass of int: a "filesize": true is still garbage.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _want_count(body: dict[str, Any], key: str, what: str) -> int:
    value = body.get(key)
    if not _is_count(value):
        raise ProtocolError(f"peer sent a {what} offer with a bad {key!r}: {value!r}")
    assert isinstance(value, int)  # _is_count said so
    return value


def _want_str(body: dict[str, Any], key: str, what: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise ProtocolError(f"peer sent a {what} offer with a bad {key!r}: {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# Messages


@value
class TransitMsg:
    """``{"transit": {"abilities-v1": [...], "hints-v1": [...]}}``.

    Abilities and hints stay raw dicts: `hilltop.hints` parses hints leniently and drops types it
    does not know, so this layer must not judge them. Non-dict items are dropped here already.
    """

    abilities: tuple[dict[str, Any], ...] = ()
    hints: tuple[dict[str, Any], ...] = ()

    def to_wire(self) -> bytes:
        return _encode({"transit": {"abilities-v1": list(self.abilities),
                                    "hints-v1": list(self.hints)}})

    @classmethod
    def from_wire(cls, data: bytes) -> TransitMsg:
        return _expect(cls, data)

    @classmethod
    def _from_body(cls, body: object) -> TransitMsg:
        if not isinstance(body, dict):
            raise ProtocolError(f"peer sent a transit message that is not an object: {body!r}")
        return cls(abilities=_dict_items(body, "abilities-v1"), hints=_dict_items(body, "hints-v1"))


def _dict_items(body: dict[str, Any], key: str) -> tuple[dict[str, Any], ...]:
    # A Go nil slice marshals as null, so null means "none" rather than garbage.
    value = body.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ProtocolError(f"peer sent a transit message whose {key!r} is not a list")
    return tuple(item for item in value if isinstance(item, dict))


@value
class TextOffer:
    """``{"offer": {"message": TEXT}}``: a text message, no transit involved."""

    message: str

    def __post_init__(self) -> None:
        if not isinstance(self.message, str):
            raise TypeError("TextOffer.message must be str")

    def to_wire(self) -> bytes:
        return _encode({"offer": {"message": self.message}})

    @classmethod
    def from_wire(cls, data: bytes) -> TextOffer:
        return _expect(cls, data)


@value
class FileOffer:
    """``{"offer": {"file": {"filename": NAME, "filesize": N}}}``.

    ``filename`` is exactly what the peer sent; pass it through
    :func:`hilltop.transfer.targets.safe_name` before use.
    """

    filename: str
    filesize: int

    def __post_init__(self) -> None:
        if not isinstance(self.filename, str) or not _is_count(self.filesize):
            raise TypeError("FileOffer needs a str filename and a non-negative int filesize")

    def to_wire(self) -> bytes:
        return _encode({"offer": {"file": {"filename": self.filename,
                                           "filesize": self.filesize}}})

    @classmethod
    def from_wire(cls, data: bytes) -> FileOffer:
        return _expect(cls, data)


@value
class DirectoryOffer:
    """``{"offer": {"directory": {...}}}``: a directory sent as one zip stream.

    ``zipsize`` is the number of bytes on the wire, ``numbytes`` the sum of the file sizes inside
    and ``numfiles`` the count of non-directory entries. Official senders write
    ``mode="zipfile/deflated"`` even though their entries are STORED; receivers accept any zip.
    """

    dirname: str
    zipsize: int
    numbytes: int
    numfiles: int
    mode: str = DIRECTORY_MODE

    def __post_init__(self) -> None:
        if not isinstance(self.dirname, str) or not isinstance(self.mode, str):
            raise TypeError("DirectoryOffer needs str dirname and mode")
        if not all(_is_count(n) for n in (self.zipsize, self.numbytes, self.numfiles)):
            raise TypeError("DirectoryOffer sizes and counts must be non-negative ints")

    def to_wire(self) -> bytes:
        return _encode({"offer": {"directory": {
            "mode": self.mode, "dirname": self.dirname, "zipsize": self.zipsize,
            "numbytes": self.numbytes, "numfiles": self.numfiles}}})

    @classmethod
    def from_wire(cls, data: bytes) -> DirectoryOffer:
        return _expect(cls, data)


MAX_STREAM_NAME: Final = 1024
"""Characters a stream's name may have on the wire (the receiver's own name rules are
stricter: :func:`hilltop.transfer.targets.safe_name`)."""
STREAM_KIND: Final = "hilltop-stream"


@value
class StreamOffer:
    """``{"offer": {"hilltop-stream": {"name": NAME}}}``: bytes of unknown length (a pipe).

    Only between hilltop peers that both list ``stream-v1``; the transit records carry the end
    (:mod:`hilltop.transfer.streamcodec`). ``name`` is what a receiver saving to a file calls
    it (``stdin`` unless the sender chose one); keys we do not know are ignored, so a later
    version may add some.
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or len(self.name) > MAX_STREAM_NAME:
            raise TypeError(f"StreamOffer.name must be a str of at most {MAX_STREAM_NAME} chars")

    def to_wire(self) -> bytes:
        return _encode({"offer": {STREAM_KIND: {"name": self.name}}})

    @classmethod
    def from_wire(cls, data: bytes) -> StreamOffer:
        return _expect(cls, data)


def _stream_from_body(body: object) -> StreamOffer:
    if not isinstance(body, dict):
        raise ProtocolError("peer sent a stream offer that is not an object")
    name = _want_str(body, "name", "stream")
    if len(name) > MAX_STREAM_NAME:
        raise ProtocolError(f"peer sent a stream offer whose name is over {MAX_STREAM_NAME} "
                            "characters")
    return StreamOffer(name)


INLINE_KIND: Final = "hilltop-inline-file"
INLINE_ACK: Final = "hilltop-inline-ack"
INLINE_LIMIT: Final = 16 * 1024
"""Bytes a file may have to ride in its offer (``inline-file-v1``), on both sides.

Why 16 KiB: the mailbox server keeps every message in its database until the mailbox closes
and relays it as hex of the encrypted body, so this file crosses as ~44 kB of JSON (base64,
then hex: 2.7x), the size of a long text message and far below any WebSocket limit of ours
(:data:`hilltop.rendezvous.messages.MAX_FRAME_CHARS`) or the public server's. Above it the
fixed cost saved (the transit warm-up, listening, hints, race and handshake: ~130 ms of a
3-byte receive, bench/README.md) is small beside the bytes, and transit is the better path."""
_INLINE_CHARS = 4 * -(-INLINE_LIMIT // 3)  # base64 of INLINE_LIMIT bytes, padded
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


@value
class InlineFileOffer:
    """``{"offer": {"hilltop-inline-file": {"filename": NAME, "filesize": N, "data": B64}}}``:
    a file of at most :data:`INLINE_LIMIT` bytes inside its offer (feature
    ``inline-file-v1``; :mod:`hilltop.transfer.inline` says when). ``data`` is standard
    base64; ``filesize`` repeats its length so a receiver can show the offer as any file's."""

    filename: str
    data: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.filename, str) or not isinstance(self.data, bytes):
            raise TypeError("InlineFileOffer needs a str filename and bytes")
        if len(self.data) > INLINE_LIMIT:
            raise TypeError(f"an inline file has at most {INLINE_LIMIT} bytes")

    @property
    def file(self) -> FileOffer:
        """The offer as the receiver's checks and questions see it."""
        return FileOffer(self.filename, len(self.data))

    def to_wire(self) -> bytes:
        return _encode({"offer": {INLINE_KIND: {
            "filename": self.filename, "filesize": len(self.data),
            "data": base64.b64encode(self.data).decode("ascii")}}})


def _inline_from_body(body: object) -> InlineFileOffer:
    what = "inline file"
    if not isinstance(body, dict):
        raise ProtocolError("peer sent an inline file offer that is not an object")
    name = _want_str(body, "filename", what)
    size = _want_count(body, "filesize", what)
    if size > INLINE_LIMIT:
        raise ProtocolError(f"peer sent an inline file of {size} bytes, over the "
                            f"{INLINE_LIMIT} an offer may carry")
    text = body.get("data")
    if not isinstance(text, str) or len(text) > _INLINE_CHARS:
        raise ProtocolError("peer sent an inline file whose data is not a string of at most "
                            f"{_INLINE_CHARS} characters")
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise ProtocolError("peer sent an inline file whose data is not base64") from None
    if len(data) != size:
        raise ProtocolError(f"peer sent an inline file of {len(data)} bytes that says it has "
                            f"{size}")
    return InlineFileOffer(name, data)


@value
class InlineAck:
    """``{"answer": {"hilltop-inline-ack": "ok", "sha256": HEX}}``: the receiver saved an
    inline file (on disk, synced); ``sha256`` is what it wrote, for the sender to compare."""

    sha256: str

    def to_wire(self) -> bytes:
        return _encode({"answer": {INLINE_ACK: "ok", "sha256": self.sha256}})

    @classmethod
    def _from_body(cls, body: dict[str, Any]) -> InlineAck:
        digest = body.get("sha256")
        if body[INLINE_ACK] != "ok" or not isinstance(digest, str) \
                or not _SHA256_HEX.fullmatch(digest):
            raise ProtocolError("peer sent an inline file acknowledgement we do not "
                                f"understand: {body!r}"[:300])
        return cls(digest)


Offer = TextOffer | FileOffer | DirectoryOffer | StreamOffer | FilesOffer


def _offer_from_body(body: object) -> Offer | InlineFileOffer:
    if not isinstance(body, dict):
        raise ProtocolError(f"peer sent an offer that is not an object: {body!r}")
    if "message" in body:
        message = body["message"]
        if not isinstance(message, str):
            raise ProtocolError("peer sent a text offer whose message is not a string")
        return TextOffer(message)
    if "file" in body:
        file = body["file"]
        if not isinstance(file, dict):
            raise ProtocolError("peer sent a file offer that is not an object")
        return FileOffer(_want_str(file, "filename", "file"),
                         _want_count(file, "filesize", "file"))
    if "directory" in body:
        folder = body["directory"]
        if not isinstance(folder, dict):
            raise ProtocolError("peer sent a directory offer that is not an object")
        mode = _want_str(folder, "mode", "directory")
        if not mode.startswith("zipfile"):
            raise UnknownOfferError(
                f"peer offered a directory in an unknown mode {mode!r}", reply="unknown mode")
        return DirectoryOffer(
            dirname=_want_str(folder, "dirname", "directory"),
            zipsize=_want_count(folder, "zipsize", "directory"),
            numbytes=_want_count(folder, "numbytes", "directory"),
            numfiles=_want_count(folder, "numfiles", "directory"),
            mode=mode)
    if STREAM_KIND in body:
        return _stream_from_body(body[STREAM_KIND])
    if FILES_KIND in body:
        return files_from_body(body[FILES_KIND])
    if INLINE_KIND in body:
        return _inline_from_body(body[INLINE_KIND])
    kinds = ", ".join(sorted(map(str, body))) or "nothing"
    raise UnknownOfferError(f"peer offered something we do not know how to receive ({kinds})")


@value
class Answer:
    """``{"answer": {"message_ack": "ok"}}`` or ``{"answer": {"file_ack": "ok"}}``.

    Anything but ``"ok"`` means the receiver did not accept; the sender reports the status.
    """

    kind: Literal["message_ack", "file_ack"]
    status: str = "ok"
    resume: tuple[int, bytes] | None = None
    """``(offset, salt)``: a hilltop receiver (``resume-v1``) asks to continue a kept
    partial (:mod:`hilltop.transfer.resume`); on the wire ``"hilltop-resume"`` beside
    ``file_ack``."""

    def __post_init__(self) -> None:
        if self.kind not in (MESSAGE_ACK, FILE_ACK) or not isinstance(self.status, str):
            raise TypeError("Answer.kind must be 'message_ack' or 'file_ack', status a str")
        if self.resume is not None and self.kind != FILE_ACK:
            raise TypeError("only a file_ack may ask to resume")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_wire(self) -> bytes:
        body: dict[str, Any] = {self.kind: self.status}
        if self.resume is not None:
            from hilltop.transfer.resume import request_to_wire

            body[RESUME_KEY] = request_to_wire(*self.resume)
        return _encode({"answer": body})

    @classmethod
    def from_wire(cls, data: bytes) -> Answer:
        return _expect(cls, data)

    @classmethod
    def _from_body(cls, body: object) -> Answer:
        if isinstance(body, dict):
            for kind in (FILE_ACK, MESSAGE_ACK):
                if kind in body:
                    status = body[kind]
                    if not isinstance(status, str):
                        raise ProtocolError(f"peer sent an answer with a bad {kind}: {status!r}")
                    resume = None
                    if kind == FILE_ACK and RESUME_KEY in body:
                        from hilltop.transfer.resume import request_from_wire

                        resume = request_from_wire(body[RESUME_KEY])
                    return cls(kind, status, resume)
        raise ProtocolError(f"peer sent an answer we do not understand: {body!r}")


@value
class ErrorMsg:
    """``{"error": TEXT}``: the peer gave up; show the text and stop."""

    text: str

    def to_wire(self) -> bytes:
        return _encode({"error": self.text})

    @classmethod
    def from_wire(cls, data: bytes) -> ErrorMsg:
        return _expect(cls, data)


@value
class UnknownMessage:
    """A JSON object with none of the v1 keys. Official peers log and skip these, so do we."""

    keys: tuple[str, ...] = field(default=())


AppMessage = (TransitMsg | TextOffer | FileOffer | DirectoryOffer | StreamOffer | FilesOffer
              | InlineFileOffer | Answer | InlineAck | ErrorMsg | UnknownMessage)


def parse_app_message(data: bytes) -> AppMessage:
    """Decode one decrypted app phase.

    Raises :class:`ProtocolError` for bytes that are not a UTF-8 JSON object, for a known key with
    a malformed value, and for two known keys in one message (the v1 rule is exactly one). An
    ``error`` key wins over everything: the peer has given up, whatever else it sent.
    Raises :class:`UnknownOfferError` for an offer of a kind or directory mode we cannot take.
    """
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("peer sent an app message that is not valid UTF-8") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise ProtocolError(f"peer sent an app message that is not JSON ({err.msg})") from None
    except (ValueError, RecursionError):
        raise ProtocolError("peer sent an app message that is not usable JSON") from None
    if not isinstance(obj, dict):
        raise ProtocolError("peer sent an app message that is not a JSON object")
    if "error" in obj:
        reason = obj["error"]
        return ErrorMsg(reason if isinstance(reason, str) else json.dumps(reason))
    known = [key for key in ("transit", "offer", "answer") if key in obj]
    if not known:
        return UnknownMessage(tuple(sorted(str(k) for k in obj)))
    if len(known) > 1:
        raise ProtocolError(f"peer sent one app message with several parts: {', '.join(known)}")
    key = known[0]
    if key == "transit":
        return TransitMsg._from_body(obj[key])
    if key == "offer":
        return _offer_from_body(obj[key])
    if isinstance(obj[key], dict) and INLINE_ACK in obj[key]:
        return InlineAck._from_body(obj[key])
    return Answer._from_body(obj[key])


_M = TypeVar("_M")


def _expect(cls: type[_M], data: bytes) -> _M:
    message = parse_app_message(data)
    if not isinstance(message, cls):
        raise ProtocolError(f"expected a {cls.__name__} message, got {type(message).__name__}")
    return message
