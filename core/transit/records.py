"""Transit records: length-prefixed secretbox frames with a per-direction nonce counter.

Wire shape (protocol summary §5.4)::

    [4-byte big-endian N][24-byte nonce][16-byte tag][ciphertext]      N = 24 + 16 + len(plaintext)

The nonce is a counter starting at 0 for each direction, written as a 24-byte **big-endian**
integer (both real implementations do this, whatever the protocols repo text says). The reader
insists on the exact next counter: a replayed, dropped or reordered record ends the connection.
Between two hilltop peers that both can, the box is AES-256-GCM instead (:func:`record_cipher`):
same layout, ciphertext before tag, GCM nonce = the low 12 bytes of the counter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from nacl.exceptions import CryptoError
from nacl.secret import SecretBox

from hilltop.errors import BadRecordError
from hilltop.rendezvous.capabilities import AES_RECORDS, BIG_RECORDS, UNHASHED_ACK, PeerCapabilities
from hilltop.rendezvous.key import derive_key

if TYPE_CHECKING:
    from hilltop.hookspecs import Role

try:  # libsodium's *_easy calls on caller buffers: no padding copies, GIL released
    from nacl._sodium import ffi as _ffi
    from nacl._sodium import lib as _lib
except ImportError:  # pragma: no cover - PyNaCl always ships it today
    _ffi = _lib = None

NONCE_SIZE = 24
TAG_SIZE = 16
LENGTH_SIZE = 4
OVERHEAD = LENGTH_SIZE + NONCE_SIZE + TAG_SIZE
"""Bytes a framed record adds to its plaintext."""

V1_RECORD_SIZE = 64 * 1024
"""Plaintext bytes per record towards peers that do not list :data:`BIG_RECORDS` (official
0.24, wormhole-william, others).

Official senders use 16384 (w-w 16368), but readers must accept any size (protocol summary
§5.4) and every one we know does: official 0.24's ``Connection.dataReceivedRECORDS``,
wormhole-william's ``readRecord`` and magic-wormhole.rs read whatever length the frame says.
With 64 KiB records official 0.24's receiving code (its own classes, run in-process on 256 MiB)
spent ~11% less CPU per GiB (1.63-1.72 s against 1.85-1.92 s) and it is the bottleneck when we
send to it. Larger records stop helping: it appends every socket read to one ``bytes``
buffer, so its copying grows with the square of the record (1 MiB records cost 2.9 s per GiB).
"""
BIG_RECORD_SIZE = 256 * 1024
"""Plaintext bytes per record when both sides list :data:`BIG_RECORDS`.

Big enough that per-record Python work (a queue hop, a syscall, a callback) disappears
against the crypto, small enough that a few records in flight keep memory flat.
"""
# Records are 16-256 KiB in practice; anything near this cap is garbage or an attack, and we
# would rather fail than buffer it.
MAX_RECORD_SIZE = 64 * 1024 * 1024

SENDER_PURPOSE = b"transit_record_sender_key"
RECEIVER_PURPOSE = b"transit_record_receiver_key"

Cipher = Literal["secretbox", "aes256gcm"]
SECRETBOX: Cipher = "secretbox"
"""XSalsa20-Poly1305, the v1 protocol's record cipher (every peer)."""
AES256GCM: Cipher = "aes256gcm"
"""AES-256-GCM, only between peers that both list
:data:`~hilltop.rendezvous.capabilities.AES_RECORDS`."""
_AES_KEY_PREFIX = b"hilltop/aes256gcm/"
_AES_NONCE = 12  # GCM's nonce: the low 96 bits of the 24-byte counter on the wire


def record_keys(transit_key: bytes, role: Role, cipher: Cipher = SECRETBOX) -> tuple[bytes, bytes]:
    """(key we write with, key we read with): each side writes with its own role's key.

    AES-256-GCM keys come from their own purposes, so no key ever serves two algorithms.
    """
    prefix = _AES_KEY_PREFIX if cipher == AES256GCM else b""
    sender = derive_key(transit_key, prefix + SENDER_PURPOSE)
    receiver = derive_key(transit_key, prefix + RECEIVER_PURPOSE)
    if role == "sender":
        return sender, receiver
    if role == "receiver":
        return receiver, sender
    raise ValueError(f"role must be 'sender' or 'receiver', got {role!r}")


def record_size(our_features: Iterable[str], peer: PeerCapabilities) -> int:
    """Plaintext bytes per record to send to ``peer``.

    Every reader must accept any record size: hilltop peers get :data:`BIG_RECORD_SIZE`,
    everyone else :data:`V1_RECORD_SIZE` (see there why not 16 KiB).
    """
    if BIG_RECORDS in peer.shared_features(our_features):
        return BIG_RECORD_SIZE
    return V1_RECORD_SIZE


def whole_file_sha256(our_features: Iterable[str], peer: PeerCapabilities) -> bool:
    """Whether the sender hashes the file and the receiver's ack carries that ``sha256``.

    Always towards official and wormhole-william peers (they hash, and compare when the ack
    has it); never between two peers that both list :data:`UNHASHED_ACK`, whose records
    already authenticate every byte (see that feature's note).
    """
    return UNHASHED_ACK not in peer.shared_features(our_features)


def record_cipher(our_features: Iterable[str], peer: PeerCapabilities) -> Cipher:
    """The record cipher for this connection: AES-256-GCM only when both sides list
    :data:`~hilltop.rendezvous.capabilities.AES_RECORDS` (the rule is symmetric, so both pick the
    same)."""
    return AES256GCM if AES_RECORDS in peer.shared_features(our_features) else SECRETBOX


def _check_cipher(cipher: Cipher) -> bool:
    """True for AES-256-GCM, which needs libsodium's hardware-AES support here."""
    if cipher == SECRETBOX:
        return False
    if cipher != AES256GCM:
        raise ValueError(f"unknown record cipher {cipher!r}")
    if _lib is None or not _lib.crypto_aead_aes256gcm_is_available():
        raise ValueError("AES-256-GCM records need hardware AES, which this machine lacks")
    return True


def _nonce(counter: int) -> bytes:
    return counter.to_bytes(NONCE_SIZE, "big")


class RecordSealer:
    """Seals plaintexts into complete framed records, counting nonces from 0.

    Not thread-safe, but it may be handed from one thread to another between calls (the
    file-transfer pipeline seals on a worker thread, then the reactor seals the ack).
    """

    def __init__(self, key: bytes, cipher: Cipher = SECRETBOX) -> None:
        self._key = bytes(key)
        self._aes = _check_cipher(cipher)
        self._box = SecretBox(self._key) if _lib is None else None
        self._clen = _ffi.new("unsigned long long *") if self._aes else None
        self.counter = 0

    def seal(self, plaintext: Any) -> bytes:
        """One framed record (``len || nonce || tag || ciphertext``) as bytes."""
        if _lib is None:  # pragma: no cover - fallback without libsodium's easy API
            nonce = _nonce(self.counter)
            self.counter += 1
            sealed = bytes(self._box.encrypt(bytes(plaintext), nonce))  # type: ignore[union-attr]
            return len(sealed).to_bytes(LENGTH_SIZE, "big") + sealed
        return bytes(self.seal_into(plaintext, bytearray(OVERHEAD + len(plaintext))))

    def seal_into(self, plaintext: Any, buffer: bytearray | memoryview) -> memoryview:
        """Like :meth:`seal`, written into ``buffer`` (at least ``OVERHEAD + len(plaintext)``
        bytes, reusable); returns the frame as a view of it."""
        n = len(plaintext)
        if _lib is None:  # pragma: no cover
            frame = self.seal(plaintext)
            buffer[: len(frame)] = frame
            return memoryview(buffer)[: len(frame)]
        if len(buffer) < OVERHEAD + n:
            raise ValueError("buffer too small for the record")
        nonce = _nonce(self.counter)
        buffer[:LENGTH_SIZE] = (NONCE_SIZE + TAG_SIZE + n).to_bytes(LENGTH_SIZE, "big")
        buffer[LENGTH_SIZE : LENGTH_SIZE + NONCE_SIZE] = nonce
        out = _ffi.from_buffer("unsigned char[]", buffer) + (LENGTH_SIZE + NONCE_SIZE)
        src = _ffi.from_buffer(plaintext) if n else _ffi.NULL
        if self._aes:  # ciphertext || tag, the same length as secretbox's tag || ciphertext
            failed = _lib.crypto_aead_aes256gcm_encrypt(
                out, self._clen, src, n, _ffi.NULL, 0, _ffi.NULL, nonce[-_AES_NONCE:], self._key)
        else:
            failed = _lib.crypto_secretbox_easy(out, src, n, nonce, self._key)
        if failed:
            raise ValueError("the record cipher refused to seal")  # only for absurd sizes
        self.counter += 1
        return memoryview(buffer)[: OVERHEAD + n]


class RecordOpener:
    """Opens frames (``nonce || tag || ciphertext``, no length) in order, checking each nonce.

    Raises :class:`BadRecordError` (and only that) for anything the peer could get wrong.
    """

    def __init__(self, key: bytes, cipher: Cipher = SECRETBOX) -> None:
        self._key = bytes(key)
        self._aes = _check_cipher(cipher)
        self._box = SecretBox(self._key) if _lib is None else None
        self._mlen = _ffi.new("unsigned long long *") if self._aes else None
        self.expected = 0

    def open(self, frame: Any, out: bytearray | memoryview | None = None) -> Any:
        """The plaintext of ``frame``; written into ``out`` (returned as a memoryview slice)
        when given and big enough, else a new bytes object."""
        size = len(frame)
        if size < NONCE_SIZE + TAG_SIZE:
            raise BadRecordError(f"transit record too short ({size} bytes)")
        view = memoryview(frame)
        nonce = bytes(view[:NONCE_SIZE])
        if nonce != _nonce(self.expected):
            raise BadRecordError(f"transit record out of order (nonce "
                                 f"{_short_count(int.from_bytes(nonce, 'big'))}, "
                                 f"expected {self.expected})")
        n = size - NONCE_SIZE - TAG_SIZE
        if _lib is None:  # pragma: no cover
            try:
                plain = self._box.decrypt(bytes(view))  # type: ignore[union-attr]
            except CryptoError:
                raise BadRecordError(
                    "transit record failed to decrypt (corrupted or forged)") from None
            self.expected += 1
            return plain
        target = out if out is not None and len(out) >= n else bytearray(max(n, 1))
        dst = _ffi.from_buffer("unsigned char[]", target)
        src = _ffi.from_buffer(view) + NONCE_SIZE
        if self._aes:
            failed = _lib.crypto_aead_aes256gcm_decrypt(
                dst, self._mlen, _ffi.NULL, src, n + TAG_SIZE, _ffi.NULL, 0,
                nonce[-_AES_NONCE:], self._key)
        else:
            failed = _lib.crypto_secretbox_open_easy(dst, src, n + TAG_SIZE, nonce, self._key)
        if failed:
            raise BadRecordError("transit record failed to decrypt (corrupted or forged)")
        self.expected += 1
        if target is out:
            return memoryview(target)[:n]
        return bytes(target[:n]) if n != len(target) else bytes(target)


def _short_count(n: int) -> str:
    """A record counter as it fits in an error line: forged or garbled nonces are 24 random
    bytes, up to 58 digits, which say nothing more in full than ``3.8e+57`` does."""
    return str(n) if n < 10**9 else f"{n:.1e}"


def checked_frame_size(size: int, limit: int = MAX_RECORD_SIZE) -> int:
    """``size`` from a record's length prefix, or :class:`BadRecordError` if no record can
    be that long or that short (every frame splitter reads lengths through this)."""
    if size < NONCE_SIZE + TAG_SIZE:
        raise BadRecordError(f"transit record too short ({size} bytes)")
    if size > limit:
        raise BadRecordError(f"transit record too long ({size} bytes, limit {limit})")
    return size


def open_into(opener: RecordOpener, frames: Iterable[Any], out: memoryview,
              write: Callable[[memoryview], None]) -> int:
    """Open ``frames`` in order into ``out`` and hand ``write`` each full stretch of it, and
    the rest at the end; returns the plaintext bytes.

    So 16 KiB v1 records cost one ``write`` (one sink call, one hash update) per ``len(out)``
    instead of one each (65,536 calls per GiB were a second of CPU). A frame bigger than
    ``out`` (never ours) is opened into a buffer of its own and written alone.
    """
    used = plain = 0
    for frame in frames:
        n = len(frame) - NONCE_SIZE - TAG_SIZE
        if used + n > len(out) and used:
            write(out[:used])
            used = 0
        if n > len(out):
            write(opener.open(frame))
        else:
            used += len(opener.open(frame, out[used:]))
        plain += n
    if used:
        write(out[:used])
    return plain


class RecordFramer:
    """Splits a byte stream into frames (``nonce || tag || ciphertext``) without opening them.

    A frame that lies inside one fed chunk comes back as a memoryview of that chunk (no copy);
    one spread over several chunks is gathered once into a buffer from ``alloc(size)`` (at
    least ``size`` bytes; a pool lets the caller reuse them) and comes back as a memoryview of
    exactly the frame. After a :class:`BadRecordError` the framer stays broken and the
    connection must close.
    """

    def __init__(self, max_record_size: int = MAX_RECORD_SIZE,
                 alloc: Callable[[int], bytearray] = bytearray) -> None:
        self._max = max_record_size
        self.alloc = alloc
        self._head = bytearray()  # a partial 4-byte length
        self._frame: memoryview | None = None  # a partial frame being gathered
        self._filled = 0
        self._broken: str | None = None

    @property
    def buffered(self) -> int:
        """Bytes held waiting for the rest of a record."""
        return len(self._head) + self._filled

    def feed(self, data: Any) -> list[Any]:
        if self._broken is not None:
            raise BadRecordError(self._broken)
        view = memoryview(data)
        out: list[Any] = []
        pos, end = 0, len(view)
        while pos < end:
            if self._frame is not None:  # finish the frame being gathered
                take = min(len(self._frame) - self._filled, end - pos)
                self._frame[self._filled : self._filled + take] = view[pos : pos + take]
                self._filled += take
                pos += take
                if self._filled == len(self._frame):
                    out.append(self._frame)
                    self._frame, self._filled = None, 0
                continue
            if self._head or end - pos < LENGTH_SIZE:
                take = min(LENGTH_SIZE - len(self._head), end - pos)
                self._head += view[pos : pos + take]
                pos += take
                if len(self._head) < LENGTH_SIZE:
                    break
                size = self._check(int.from_bytes(self._head, "big"))
                self._head.clear()
            else:
                size = self._check(int.from_bytes(view[pos : pos + LENGTH_SIZE], "big"))
                pos += LENGTH_SIZE
            if end - pos >= size:
                out.append(view[pos : pos + size])
                pos += size
            else:
                self._frame, self._filled = memoryview(self.alloc(size))[:size], 0
        return out

    def _check(self, size: int) -> int:
        try:
            return checked_frame_size(size, self._max)
        except BadRecordError as err:
            reason = str(err)
        self._break(reason)

    def _break(self, reason: str) -> NoReturn:
        self._broken = reason
        self._head.clear()
        self._frame = None
        self._filled = 0
        raise BadRecordError(reason)


class RecordDecoder:
    """Splits a byte stream into records and opens them, checking each nonce.

    :meth:`feed` raises :class:`~hilltop.errors.BadRecordError` (and only that) for anything the
    peer could have sent wrong; after that the decoder stays broken and the connection must close.
    ``framer`` and ``opener`` are exposed so a caller may take over opening (on a worker thread)
    and later hand back, with the nonce count carried along.
    """

    def __init__(self, key: bytes, max_record_size: int = MAX_RECORD_SIZE,
                 cipher: Cipher = SECRETBOX) -> None:
        self.framer = RecordFramer(max_record_size)
        self.opener = RecordOpener(key, cipher)
        self._broken: str | None = None

    @property
    def buffered(self) -> int:
        """Bytes held waiting for the rest of a record (for flow-control decisions)."""
        return self.framer.buffered

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes from the wire; return every plaintext that is now complete, in order."""
        if self._broken is not None:
            raise BadRecordError(self._broken)
        try:
            return [bytes(self.opener.open(frame)) for frame in self.framer.feed(data)]
        except BadRecordError as err:
            self._broken = str(err)
            raise
