"""Transit records: official vectors, big-endian nonce counter, and hostile input."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nacl.secret import SecretBox

from hilltop.errors import BadRecordError
from hilltop.rendezvous.capabilities import (
    AES_RECORDS,
    FEATURES,
    UNHASHED_ACK,
    PeerCapabilities,
    advertisement,
    from_app_versions,
)
from hilltop.rendezvous.key import derive_key
from hilltop.transit.records import (
    AES256GCM,
    BIG_RECORD_SIZE,
    BIG_RECORDS,
    MAX_RECORD_SIZE,
    OVERHEAD,
    SECRETBOX,
    V1_RECORD_SIZE,
    RecordDecoder,
    RecordFramer,
    RecordOpener,
    RecordSealer,
    record_cipher,
    record_keys,
    record_size,
    whole_file_sha256,
)

TK = bytes.fromhex("9329a646acaba7172c557c7971191ec6a1e287f84abe58c60dce2659c44c2925")
SENDER_KEY = bytes.fromhex("4860c8f20d819f7caff59f3e9c6c90c7d70405c6e1247fc6eebb6686768b0d75")
RECEIVER_KEY = bytes.fromhex("31b1d3d847b354590e5db2d5f1fa0c018f175e569925258ecaeb456b3ce7de39")
HELLO = bytes.fromhex("0000002d" + "00" * 24 + "c4c7142d3b1c49ae2ef740567bff62b0e6bdbe5baa")


def test_record_keys_follow_role() -> None:
    assert record_keys(TK, "sender") == (SENDER_KEY, RECEIVER_KEY)
    assert record_keys(TK, "receiver") == (RECEIVER_KEY, SENDER_KEY)
    with pytest.raises(ValueError):
        record_keys(TK, "x")  # type: ignore[arg-type]


def test_first_record_vector() -> None:
    assert RecordSealer(SENDER_KEY).seal(b"hello") == HELLO
    assert RecordDecoder(SENDER_KEY).feed(HELLO) == [b"hello"]


def test_nonce_is_big_endian_counter() -> None:
    enc = RecordSealer(SENDER_KEY)
    frames = [enc.seal(b"x") for _ in range(258)]
    assert frames[1][4:28] == bytes(23) + b"\x01"
    assert frames[257][4:28] == bytes(22) + b"\x01\x01"
    dec = RecordDecoder(SENDER_KEY)
    assert dec.feed(b"".join(frames)) == [b"x"] * 258


def test_split_anywhere() -> None:
    enc = RecordSealer(RECEIVER_KEY)
    stream = b"".join(enc.seal(bytes([i]) * i) for i in range(20))
    dec = RecordDecoder(RECEIVER_KEY)
    got = []
    for i in range(0, len(stream), 7):
        got += dec.feed(stream[i : i + 7])
    assert got == [bytes([i]) * i for i in range(20)]
    assert dec.buffered == 0


def test_empty_plaintext() -> None:
    enc, dec = RecordSealer(SENDER_KEY), RecordDecoder(SENDER_KEY)
    assert dec.feed(enc.seal(b"")) == [b""]


def test_replayed_record_rejected() -> None:
    enc, dec = RecordSealer(SENDER_KEY), RecordDecoder(SENDER_KEY)
    first = enc.seal(b"a")
    dec.feed(first)
    with pytest.raises(BadRecordError, match="nonce 0, expected 1"):
        dec.feed(first)
    with pytest.raises(BadRecordError):  # stays broken
        dec.feed(enc.seal(b"b"))


def test_skipped_record_rejected() -> None:
    enc, dec = RecordSealer(SENDER_KEY), RecordDecoder(SENDER_KEY)
    enc.seal(b"lost")
    with pytest.raises(BadRecordError, match="expected 0"):
        dec.feed(enc.seal(b"b"))


def test_a_forged_nonce_is_reported_short() -> None:
    """A forged or garbled record's nonce is 24 arbitrary bytes: up to 58 digits in full, which
    drowned the error line (issue 27, item 26). The line says the record is out of order and
    gives the nonce's magnitude."""
    dec = RecordDecoder(SENDER_KEY)
    dec.feed(RecordSealer(SENDER_KEY).seal(b"first"))
    forged = bytes(range(100, 124)) + bytes(SecretBox(SENDER_KEY).encrypt(b"hi"))[24:]
    with pytest.raises(BadRecordError) as caught:
        dec.feed(len(forged).to_bytes(4, "big") + forged)
    message = str(caught.value)
    assert message == "transit record out of order (nonce 2.5e+57, expected 1)"
    assert len(str(int.from_bytes(bytes(range(100, 124)), "big"))) == 58  # what it was


def test_little_endian_nonce_rejected() -> None:
    le_nonce = (1).to_bytes(24, "little")
    box = bytes(SecretBox(SENDER_KEY).encrypt(b"hi", le_nonce))
    dec = RecordDecoder(SENDER_KEY)
    dec.feed(RecordSealer(SENDER_KEY).seal(b"first"))
    with pytest.raises(BadRecordError):
        dec.feed(len(box).to_bytes(4, "big") + box)


def test_wrong_key_rejected() -> None:
    with pytest.raises(BadRecordError, match="decrypt"):
        RecordDecoder(RECEIVER_KEY).feed(HELLO)


def test_absurd_length_rejected_without_waiting() -> None:
    with pytest.raises(BadRecordError, match="too long"):
        RecordDecoder(SENDER_KEY).feed(b"\xff\xff\xff\xff")
    with pytest.raises(BadRecordError, match="too short"):
        RecordDecoder(SENDER_KEY).feed(b"\x00\x00\x00\x05")


@given(st.lists(st.binary(max_size=200), max_size=8))
def test_garbage_raises_only_bad_record(chunks: list[bytes]) -> None:
    dec = RecordDecoder(SENDER_KEY)
    try:
        for chunk in chunks:
            assert dec.feed(chunk) == []
    except BadRecordError:
        pass


@given(st.binary(min_size=1, max_size=60), st.integers(min_value=0, max_value=44))
def test_bit_flips_are_caught(plain: bytes, where: int) -> None:
    frame = bytearray(RecordSealer(SENDER_KEY).seal(plain))
    frame[where % len(frame)] ^= 0x01
    dec = RecordDecoder(SENDER_KEY)
    with contextlib.suppress(BadRecordError):
        assert dec.feed(bytes(frame)) == []  # a longer length just waits for more


# --- record size negotiation and the bulk data path pieces ------------------------------------
def caps(features: list[str] | None) -> PeerCapabilities:
    if features is None:
        return from_app_versions({})  # what official and wormhole-william send
    return from_app_versions({"hilltop": {"version": "0.1.0", "features": features}})


def test_v1_peers_get_official_record_size() -> None:
    assert record_size(FEATURES, caps(None)) == V1_RECORD_SIZE == 65536
    assert record_size(FEATURES, from_app_versions({"hilltop": "garbage"})) == V1_RECORD_SIZE


def test_big_records_need_both_sides() -> None:
    assert record_size(FEATURES, caps([BIG_RECORDS])) == BIG_RECORD_SIZE
    assert record_size(FEATURES, caps(["something-else"])) == V1_RECORD_SIZE
    assert record_size((), caps([BIG_RECORDS])) == V1_RECORD_SIZE  # we did not advertise it


def test_whole_file_sha256_is_skipped_only_when_both_sides_list_it() -> None:
    assert whole_file_sha256(FEATURES, caps(None)) is True  # official / wormhole-william
    assert whole_file_sha256(FEATURES, caps([BIG_RECORDS])) is True  # an older hilltop
    assert whole_file_sha256((), caps([UNHASHED_ACK])) is True  # we did not advertise it
    assert whole_file_sha256(FEATURES, caps([UNHASHED_ACK])) is False
    # what two default hilltop peers tell each other
    ours = advertisement("0.1.0", [], FEATURES)
    assert whole_file_sha256(FEATURES, from_app_versions(ours)) is False


def test_we_advertise_big_records() -> None:
    assert BIG_RECORDS in FEATURES
    assert BIG_RECORD_SIZE + OVERHEAD <= MAX_RECORD_SIZE


def test_seal_into_matches_seal_and_reuses_the_buffer() -> None:
    buffer = bytearray(OVERHEAD + 10)
    sealer, other = RecordSealer(SENDER_KEY), RecordSealer(SENDER_KEY)
    assert bytes(sealer.seal_into(b"hello", buffer)) == HELLO == other.seal(b"hello")
    second = bytes(sealer.seal_into(b"0123456789", memoryview(buffer)))
    assert second == other.seal(b"0123456789")
    with pytest.raises(ValueError):
        sealer.seal_into(b"x" * 11, buffer)
    assert sealer.counter == 2  # a refused seal uses no nonce


def test_framer_zero_copy_and_gathering() -> None:
    enc = RecordSealer(SENDER_KEY)
    stream = b"".join(enc.seal(bytes([i]) * (i * 100)) for i in range(30))
    gathered: list[int] = []

    def alloc(size: int) -> bytearray:
        gathered.append(size)
        return bytearray(size + 7)  # bigger than asked, as a pool's buffers are

    for step in (1, 5, 97, 4096, len(stream)):
        framer, opener = RecordFramer(alloc=alloc), RecordOpener(SENDER_KEY)
        out = bytearray(4000)
        got = []
        for i in range(0, len(stream), step):
            for frame in framer.feed(stream[i : i + step]):
                got.append(bytes(opener.open(frame, out)))
        assert got == [bytes([i]) * (i * 100) for i in range(30)]
        assert framer.buffered == 0
    assert gathered  # small steps gathered frames; the whole stream at once did not need to


def test_opener_checks_order_and_tags() -> None:
    enc = RecordSealer(SENDER_KEY)
    first, second = enc.seal(b"one")[4:], enc.seal(b"two")[4:]
    opener = RecordOpener(SENDER_KEY)
    with pytest.raises(BadRecordError, match="nonce 1, expected 0"):
        opener.open(second)
    assert opener.open(first) == b"one"
    broken = bytearray(second)
    broken[-1] ^= 1
    with pytest.raises(BadRecordError, match="decrypt"):
        opener.open(broken)
    with pytest.raises(BadRecordError, match="too short"):
        opener.open(b"\x00" * 39)


# --- AES-256-GCM records (hilltop to hilltop) ---------------------------------------------------
needs_aes = pytest.mark.skipif(AES_RECORDS not in FEATURES,
                               reason="libsodium reports no hardware AES on this machine")


def test_record_cipher_needs_both_sides() -> None:
    assert record_cipher([AES_RECORDS], caps([AES_RECORDS])) == AES256GCM
    assert record_cipher([AES_RECORDS], caps(None)) == SECRETBOX  # official, wormhole-william
    assert record_cipher([AES_RECORDS], caps([BIG_RECORDS])) == SECRETBOX  # no AES there
    assert record_cipher((), caps([AES_RECORDS])) == SECRETBOX  # we did not advertise it


def test_aes_keys_are_not_the_secretbox_keys() -> None:
    aes_send, aes_receive = record_keys(TK, "sender", AES256GCM)
    assert aes_send == derive_key(TK, b"hilltop/aes256gcm/transit_record_sender_key")
    assert aes_receive == derive_key(TK, b"hilltop/aes256gcm/transit_record_receiver_key")
    assert {aes_send, aes_receive}.isdisjoint({SENDER_KEY, RECEIVER_KEY})
    assert record_keys(TK, "receiver", AES256GCM) == (aes_receive, aes_send)


@needs_aes
def test_aes_record_matches_an_independent_aes_gcm() -> None:
    """Our frame is len || 24-byte counter || AES-GCM(ciphertext || tag) under the counter's
    low 12 bytes, checked against the ``cryptography`` package's AES-GCM."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    enc = RecordSealer(SENDER_KEY, AES256GCM)
    frames = [enc.seal(b"hello"), enc.seal(b""), enc.seal(b"x" * 70000)]
    for counter, (frame, plain) in enumerate(zip(frames, [b"hello", b"", b"x" * 70000],
                                                 strict=True)):
        nonce = counter.to_bytes(24, "big")
        expected = AESGCM(SENDER_KEY).encrypt(nonce[12:], plain, None)
        assert frame == (24 + len(expected)).to_bytes(4, "big") + nonce + expected
    dec = RecordDecoder(SENDER_KEY, cipher=AES256GCM)
    assert dec.feed(b"".join(frames)) == [b"hello", b"", b"x" * 70000]


@needs_aes
def test_aes_records_refuse_tampering_order_and_the_other_cipher() -> None:
    enc = RecordSealer(SENDER_KEY, AES256GCM)
    first, second = enc.seal(b"one"), enc.seal(b"two")
    with pytest.raises(BadRecordError, match="nonce 1, expected 0"):
        RecordDecoder(SENDER_KEY, cipher=AES256GCM).feed(second)
    flipped = bytearray(first)
    flipped[-1] ^= 1
    with pytest.raises(BadRecordError, match="failed to decrypt"):
        RecordDecoder(SENDER_KEY, cipher=AES256GCM).feed(bytes(flipped))
    with pytest.raises(BadRecordError, match="failed to decrypt"):  # a peer that disagreed
        RecordDecoder(SENDER_KEY).feed(first)
    with pytest.raises(BadRecordError, match="failed to decrypt"):
        RecordDecoder(SENDER_KEY, cipher=AES256GCM).feed(RecordSealer(SENDER_KEY).seal(b"x"))


@needs_aes
def test_aes_seal_into_and_open_into_buffers() -> None:
    sealer, opener = RecordSealer(SENDER_KEY, AES256GCM), RecordOpener(SENDER_KEY, AES256GCM)
    buffer, out = bytearray(OVERHEAD + 100), bytearray(100)
    for i in range(3):
        frame = sealer.seal_into(bytes([i]) * 100, buffer)
        assert bytes(opener.open(frame[4:], out)) == bytes([i]) * 100


def test_unknown_cipher_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown record cipher"):
        RecordSealer(SENDER_KEY, "rot13")  # type: ignore[arg-type]


def test_open_into_gathers_small_records_and_writes_big_ones_alone() -> None:
    from hilltop.transit.records import RecordFramer, RecordOpener, RecordSealer, open_into

    plains = [b"a" * 40, b"b" * 50, b"c" * 300, b"d" * 10, b"e" * 70]  # "c" exceeds out
    sealer = RecordSealer(SENDER_KEY)
    frames = RecordFramer().feed(b"".join(sealer.seal(p) for p in plains))
    writes: list[bytes] = []
    got = open_into(RecordOpener(SENDER_KEY), frames, memoryview(bytearray(100)),
                    lambda data: writes.append(bytes(data)))
    assert got == sum(len(p) for p in plains)
    assert writes == [b"a" * 40 + b"b" * 50, b"c" * 300, b"d" * 10 + b"e" * 70]
