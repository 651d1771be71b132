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
from spake2.spake2 import SPAKEError

from hilltop.errors import WrongCodeError

APPID = "lothar.com/wormhole/text-or-file-xfer"


def hkdf(key: bytes, length: int, info: bytes) -> bytes:
    """RFC 5869 HKDF-SHA256 with an empty salt (which the RFC defines as 32 zero bytes)."""
    prk = hmac.new(b"\x00" * 32, key, hashlib.sha256).digest()
    out, block = b"", b""
    counter = 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def derive_key(key: bytes, purpose: bytes, length: int = 32) -> bytes:
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
    except (CryptoError, ValueError, TypeError):
        raise WrongCodeError() from None


def verifier(key: bytes) -> bytes:
    return derive_key(key, b"wormhole:verifier")


def transit_key(key: bytes, appid: str = APPID) -> bytes:
    return derive_key(key, (appid + "/transit-key").encode("utf-8"))


def code_password(code: str) -> bytes:
    return unicodedata.normalize("NFC", code).encode("utf-8")


class Pake:
    """One side of the SPAKE2 exchange, speaking the ``pake`` phase body format."""

    def __init__(self, code: str, appid: str, entropy: Callable[[int], bytes]) -> None:
        self._spake = SPAKE2_Symmetric(
            code_password(code), idSymmetric=appid.encode("utf-8"), entropy_f=entropy
        )
        self._body: bytes | None = None

    def start(self) -> bytes:
        """The mailbox body of our ``pake`` message (computed once)."""
        if self._body is None:
            msg = self._spake.start()
            self._body = json.dumps({"pake_v1": msg.hex()}).encode("utf-8")
        return self._body

    def finish(self, body: bytes) -> bytes:
        """The shared key, from the peer's ``pake`` body. Garbage counts as a wrong code."""
        self.start()
        try:
            peer = bytes.fromhex(json.loads(body.decode("utf-8"))["pake_v1"])
        except (UnicodeDecodeError, ValueError, KeyError, TypeError):
            raise WrongCodeError("the peer's PAKE message is malformed") from None
        try:
            return self._spake.finish(peer)
        except (SPAKEError, ValueError) as err:
            raise WrongCodeError(f"PAKE failed: {err}") from None
