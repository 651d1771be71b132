"""Key schedule: known-answer vectors from the protocol summary, and hostile PAKE bodies."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilltop.errors import LocalError, WrongCodeError
from hilltop.rendezvous import key

K = bytes(range(32))
SIDE = "abcdef0123"
CODE = "7-guitarist-revenge"
MSG_A = "5322b13d0111adbd58bb6d1e3c685d710201f0df7b78caa7a314fd8df696944912"
MSG_B = "533f0d34c9d7d6563feaa9dd341710066b1a90f1c278ca748556c9c291a42701f1"
SHARED = "26d3c5fb75f3fd2d2ec036bd0a8e3094381309fe3aa486a8fb6911534c975700"


def fixed(byte: int):
    return lambda n: bytes([byte]) * n


def pair(code_a: str = CODE, code_b: str = CODE) -> tuple[key.Pake, key.Pake]:
    return key.Pake(code_a, key.APPID, fixed(1)), key.Pake(code_b, key.APPID, fixed(2))


# -- HKDF purposes -----------------------------------------------------------------------------

def test_phase_keys() -> None:
    assert key.derive_phase_key(K, SIDE, "version").hex() == (
        "fb0634a65fc823a06c93860cac98f8281255f0d897e9024984e68715b7cdf94b")
    assert key.derive_phase_key(K, SIDE, "0").hex() == (
        "1f8ddc17c9c811c962d0d910f8024045ba4831ab9e51ae71376172b42ee9f1cd")


def test_verifier() -> None:
    assert key.verifier(K).hex() == (
        "116c6e41d0faf2886a5b488079748585db2c4d6d151cca6c580055e1bd176459")


def test_transit_key() -> None:
    assert key.transit_key(K).hex() == (
        "9329a646acaba7172c557c7971191ec6a1e287f84abe58c60dce2659c44c2925")
    assert key.transit_key(K, "example.com/other") != key.transit_key(K)


def test_hkdf_rfc5869_case_3() -> None:
    """RFC 5869 A.3: SHA-256, no salt, no info."""
    okm = key.hkdf(bytes([0x0B]) * 22, 42, b"")
    assert okm.hex() == (
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d"
        "9d201395faa4b61a96c8")


def test_hkdf_lengths() -> None:
    assert len(key.hkdf(K, 1, b"x")) == 1
    long = key.hkdf(K, 100, b"x")
    assert len(long) == 100 and long[:32] == key.hkdf(K, 32, b"x")
    for bad in (0, 255 * 32 + 1):
        with pytest.raises(ValueError):
            key.hkdf(K, bad, b"x")


def test_derive_key_is_hkdf_with_purpose() -> None:
    assert key.derive_key(K, b"wormhole:verifier") == key.verifier(K)
    assert len(key.derive_key(K, b"app", 16)) == 16


# -- seal / open -------------------------------------------------------------------------------

def test_boxed_version_body() -> None:
    phase_key = key.derive_phase_key(K, SIDE, "version")
    body = key.seal(phase_key, b'{"app_versions": {}}', bytes(24))
    assert body.hex() == (
        "000000000000000000000000000000000000000000000000b744d7c2df7466868affdd287f862a8c"
        "0b7d0a5e8db1570507e3707d09e7e445d1480a06")
    assert len(body) == 60
    assert key.open_sealed(phase_key, body) == b'{"app_versions": {}}'


@pytest.mark.parametrize(
    "mangle",
    [
        lambda b: b[:-1] + bytes([b[-1] ^ 1]),  # flipped ciphertext bit
        lambda b: bytes([b[0] ^ 1]) + b[1:],     # flipped nonce bit
        lambda b: b[:30],                        # shorter than nonce + tag
        lambda b: b"",
    ],
)
def test_open_sealed_failure_is_wrong_code(mangle) -> None:
    phase_key = key.derive_phase_key(K, SIDE, "0")
    body = key.seal(phase_key, b"hello", bytes(range(24)))
    with pytest.raises(WrongCodeError):
        key.open_sealed(phase_key, mangle(body))


def test_open_with_other_key_is_wrong_code() -> None:
    body = key.seal(key.derive_phase_key(K, SIDE, "0"), b"hello", bytes(24))
    with pytest.raises(WrongCodeError, match="wrong code"):
        key.open_sealed(key.derive_phase_key(K, "0000000000", "0"), body)


@given(st.binary(max_size=200), st.binary(min_size=24, max_size=24))
def test_seal_open_round_trip(plaintext: bytes, nonce: bytes) -> None:
    body = key.seal(K, plaintext, nonce)
    assert body[:24] == nonce and len(body) == 24 + 16 + len(plaintext)
    assert key.open_sealed(K, body) == plaintext


# -- SPAKE2 ------------------------------------------------------------------------------------

def test_pake_known_answer() -> None:
    a, b = pair()
    body_a, body_b = a.start(), b.start()
    assert body_a == json.dumps({"pake_v1": MSG_A}).encode()
    assert body_b == json.dumps({"pake_v1": MSG_B}).encode()
    assert len(body_a) == 81
    assert a.finish(body_b).hex() == SHARED
    assert b.finish(body_a).hex() == SHARED


def test_pake_entropy_is_asked_for_64_bytes_once() -> None:
    calls: list[int] = []

    def entropy(n: int) -> bytes:
        calls.append(n)
        return b"\x01" * n

    pake = key.Pake(CODE, key.APPID, entropy)
    assert pake.start() == pake.start()  # computed once: a resend is identical
    assert calls == [64]


def test_pake_wrong_code_gives_different_keys() -> None:
    a, b = pair(CODE, "7-guitarist-revengE")
    assert a.finish(b.start()) != b.finish(a.start())


def test_pake_password_is_nfc_normalised() -> None:
    a, b = pair("5-caf\u00e9", "5-cafe\u0301")
    assert a.finish(b.start()) == b.finish(a.start())


def test_pake_appid_matters() -> None:
    a = key.Pake(CODE, key.APPID, fixed(1))
    b = key.Pake(CODE, "example.com/other", fixed(2))
    assert a.finish(b.start()) != b.finish(a.start())


def body_of(msg_hex: object) -> bytes:
    return json.dumps({"pake_v1": msg_hex}).encode()


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"\xff\xfe",
        b"[1, 2]",
        b'{"pake_v2": "53"}',
        body_of(None),
        body_of(5),
        body_of("zz"),
        body_of("53"),                              # too short
        body_of(MSG_B + "00"),                      # trailing byte
        body_of("41" + MSG_B[2:]),                  # side A byte
        body_of("42" + MSG_B[2:]),                  # side B byte
        body_of("00" + MSG_B[2:]),                  # unknown side byte
        body_of("53" + "00" * 32),                  # not a subgroup element
        body_of("53" + "01" + "00" * 31),           # identity
        body_of("53" + "ff" * 32),                  # not on the curve
        b"[" * 100000,                              # nesting bomb
    ],
)
def test_pake_garbage_is_wrong_code(body: bytes) -> None:
    a = key.Pake(CODE, key.APPID, fixed(1))
    with pytest.raises(WrongCodeError):
        a.finish(body)


def test_pake_reflection_is_wrong_code() -> None:
    a = key.Pake(CODE, key.APPID, fixed(1))
    with pytest.raises(WrongCodeError, match="PAKE failed"):
        a.finish(a.start())


def test_pake_finish_twice_is_misuse() -> None:
    a, b = pair()
    a.finish(b.start())
    with pytest.raises(LocalError):
        a.finish(b.start())


@given(st.binary(max_size=120))
def test_pake_random_bodies_raise_only_wrong_code(body: bytes) -> None:
    with pytest.raises(WrongCodeError):
        key.Pake(CODE, key.APPID, fixed(1)).finish(body)


# -- gospake2 (wormhole-william) compatibility -----------------------------------------------
# Entropy bytes 7 and 183 make a session whose shared element K ends in a zero byte (found
# by search; about 1 session in 256 does).
GO_CASE = (7, 183)


def go_element_bytes(little_endian: bytes) -> bytes:
    """What gospake2's Compress returns: Go's big.Int.Bytes() of the number, reversed."""
    number = int.from_bytes(little_endian, "little")
    return number.to_bytes((number.bit_length() + 7) // 8, "big")[::-1]


def go_symmetric_key(password: bytes, ids: bytes, own: bytes, inbound: bytes, k: bytes) -> bytes:
    """gospake2 0.2's transcriptSymmetric, step by step: slots sized by len(K), filled by copy."""
    own, k = go_element_bytes(own), go_element_bytes(k)
    size = len(k)
    buf = bytearray(64 + 3 * size)
    buf[:32] = hashlib.sha256(password).digest()
    buf[32:64] = hashlib.sha256(ids).digest()
    first, second = (own, inbound) if own < inbound else (inbound, own)
    for slot, value in enumerate((first, second, k)):
        start = 64 + slot * size
        n = min(size, len(value))
        buf[start:start + n] = value[:n]
    return hashlib.sha256(bytes(buf)).digest()


def go_view(pake: key.Pake) -> bytes:
    spake = pake._spake
    return go_symmetric_key(spake.pw, spake.idSymmetric, spake.outbound_message,
                            spake.inbound_message, spake.shared_element)


def test_gospake2_key_is_none_when_k_has_no_trailing_zero() -> None:
    a, b = pair()
    assert a.finish(b.start()).hex() == SHARED
    assert a._spake.shared_element[-1] != 0
    assert a.gospake2_key is None
    assert go_view(a).hex() == SHARED  # the oracle agrees with python-spake2 here


def test_gospake2_key_matches_what_go_derives_when_k_ends_in_zero() -> None:
    a = key.Pake(CODE, key.APPID, fixed(GO_CASE[0]))
    b = key.Pake(CODE, key.APPID, fixed(GO_CASE[1]))
    standard = a.finish(b.start())
    assert b.finish(a.start()) == standard
    assert a._spake.shared_element[-1] == 0
    assert a.gospake2_key is not None and a.gospake2_key != standard
    assert a.gospake2_key == b.gospake2_key == go_view(a) == go_view(b)


def test_python_json_spacing_is_recognised() -> None:
    a, _ = pair()
    assert key.written_by_python_json(a.start())
    assert not key.written_by_python_json(b'{"pake_v1":"' + MSG_A.encode() + b'"}')  # Go, Rust
