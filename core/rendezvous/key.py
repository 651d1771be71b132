"""Key agreement and every key derived from it.

SPAKE2 (symmetric, Ed25519 group) turns the weak code into a strong shared key; HKDF-SHA256
with no salt derives one key per purpose from it; NaCl secretbox seals each mailbox phase.
Pure: randomness (SPAKE2 entropy, nonces) is always passed in.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import unicodedata
from collections.abc import Callable

from nacl.exceptions import CryptoError
from nacl.secret import SecretBox
from spake2 import SPAKE2_Symmetric
from spake2.ed25519_basic import NotOnCurve
from spake2.spake2 import SPAKEError

from hilltop.errors import LocalError, WrongCodeError

APPID = "lothar.com/wormhole/text-or-file-xfer"


def hkdf(key: bytes, length: int, info: bytes) -> bytes:
    """RFC 5869 HKDF-SHA256 with an empty salt (which the RFC defines as 32 zero bytes)."""
    if not 0 < length <= 255 * 32:
        raise ValueError(f"HKDF-SHA256 can give 1..8160 bytes, not {length}")
    prk = hmac.new(b"\x00" * 32, key, hashlib.sha256).digest()
    out, block = b"", b""
    counter = 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def derive_key(key: bytes, purpose: bytes, length: int = 32) -> bytes:
    """One independent key per purpose, so no two uses ever share a key."""
    return hkdf(key, length, purpose)


def derive_phase_key(key: bytes, side: str, phase: str) -> bytes:
    """The secretbox key for one mailbox phase, bound to the *sending* side."""
    side_hash = hashlib.sha256(side.encode("ascii")).digest()
    phase_hash = hashlib.sha256(phase.encode("ascii")).digest()
    return derive_key(key, b"wormhole:phase:" + side_hash + phase_hash)


def seal(key: bytes, plaintext: bytes, nonce: bytes) -> bytes:
    """nonce || secretbox(plaintext): the body format of every encrypted phase."""
    return bytes(SecretBox(key).encrypt(plaintext, nonce))


def open_sealed(key: bytes, data: bytes) -> bytes:
    """Undo :func:`seal`. Failure means the peer derived another key: a wrong code."""
    try:
        return SecretBox(key).decrypt(data)
    except (CryptoError, ValueError):  # bad tag, or too short to hold nonce and tag
        raise WrongCodeError() from None


def verifier(key: bytes) -> bytes:
    """What users compare out of band (``--verify``) to rule out a man in the middle."""
    return derive_key(key, b"wormhole:verifier")


def transit_key(key: bytes, appid: str = APPID) -> bytes:
    """The transit key: ``appid + "/transit-key"``. Official 0.24 always uses the CLI appid here
    (its issue #339) while wormhole-william uses the configured one; they agree on the default
    appid, which both CLIs use."""
    return derive_key(key, (appid + "/transit-key").encode("utf-8"))


def _utf8(text: str) -> bytes:
    """NFC then UTF-8, as the official client hashes passwords and appids."""
    return unicodedata.normalize("NFC", text).encode("utf-8")


PAKE_MSG_LEN = 33  # b"S" + one 32-byte Ed25519 element


def gospake2_key(password: bytes, id_symmetric: bytes, msg_a: bytes, msg_b: bytes,
                 shared_element: bytes) -> bytes | None:
    """The session key gospake2 (wormhole-william's SPAKE2) derives, where it differs from ours.

    gospake2 0.2 encodes an element with Go's ``big.Int.Bytes()``, which drops leading zeros
    of the big-endian number: trailing zero bytes of the little-endian encoding. When the shared
    element K ends in a zero byte (1 session in 256), its transcript is built with that shorter
    length for every element slot, so the two sides derive different keys and the transfer dies
    as a "wrong code". Knowing the rule, we can derive its key too and let the peer's first
    encrypted message decide. ``None`` means both derivations agree.
    """
    size = len(shared_element.rstrip(b"\0"))
    if size == len(shared_element):
        return None
    first, second = sorted([msg_a, msg_b])
    transcript = b"".join([hashlib.sha256(password).digest(),
                           hashlib.sha256(id_symmetric).digest(),
                           first[:size], second[:size], shared_element[:size]])
    return hashlib.sha256(transcript).digest()


def written_by_python_json(body: bytes) -> bool:
    """Whether a ``pake`` body has Python's ``json.dumps`` spacing (official client, hilltop).

    Such peers use python-spake2 and derive the standard key; Go and Rust encoders write
    compact JSON, and only they may have derived the gospake2 variant.
    """
    return body.startswith(b'{"pake_v1": "')


class _KeepingSpake2(SPAKE2_Symmetric):  # type: ignore[misc]  # spake2 ships no types
    """python-spake2's symmetric side, keeping the shared element K for :func:`gospake2_key`."""

    shared_element: bytes | None = None

    def _finalize(self, K_bytes: bytes) -> bytes:  # noqa: N803 (spake2's parameter name)
        self.shared_element = K_bytes
        key: bytes = super()._finalize(K_bytes)
        return key


class Pake:
    """One side of the SPAKE2 exchange, speaking the ``pake`` phase body format."""

    def __init__(self, code: str, appid: str, entropy: Callable[[int], bytes]) -> None:
        self._spake = _KeepingSpake2(_utf8(code), idSymmetric=_utf8(appid), entropy_f=entropy)
        self._body: bytes | None = None
        self._finished = False
        self.gospake2_key: bytes | None = None
        """After :meth:`finish`: the key a gospake2 peer derived, if it differs (else None)."""

    def start(self) -> bytes:
        """The mailbox body of our ``pake`` message (computed once, so resends are identical)."""
        if self._body is None:
            msg = self._spake.start()
            self._body = json.dumps({"pake_v1": msg.hex()}).encode("utf-8")
        return self._body

    def finish(self, body: bytes) -> bytes:
        """The shared key, from the peer's ``pake`` body. Garbage counts as a wrong code.

        The peer's message is checked here (length, side byte) because spake2 only
        ``assert``s the side byte and silently ignores bytes past the element.
        """
        if self._finished:
            raise LocalError("the PAKE was already finished")
        self.start()
        try:
            peer = bytes.fromhex(json.loads(body.decode("utf-8"))["pake_v1"])
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, RecursionError):
            raise WrongCodeError("the peer's PAKE message is malformed") from None
        if len(peer) != PAKE_MSG_LEN or peer[:1] != b"S":
            raise WrongCodeError("the peer's PAKE message is not symmetric SPAKE2")
        self._finished = True
        try:
            shared: bytes = self._spake.finish(peer)
        except (SPAKEError, ValueError, NotOnCurve) as err:
            reason = str(err) or type(err).__name__
            raise WrongCodeError(f"PAKE failed: {reason}") from None
        spake = self._spake
        if spake.shared_element is None:
            raise LocalError("spake2 no longer calls _finalize: check the pinned version")
        self.gospake2_key = gospake2_key(spake.pw, spake.idSymmetric, spake.outbound_message,
                                         spake.inbound_message, spake.shared_element)
        return shared
