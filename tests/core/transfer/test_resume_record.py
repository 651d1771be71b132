"""hilltop.transfer.resume (pure): the record kept beside a partial, whether to continue it,
the prefix proof and the two transit records; plus the answer that carries the request."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilltop.errors import ProtocolError
from hilltop.rendezvous import capabilities
from hilltop.transfer import offers, resume
from hilltop.transfer.resume import PartialRecord

SALT = bytes(range(32))


def test_a_record_round_trips_and_holds_nothing_secret() -> None:
    record = PartialRecord("a file.bin", 500_000_000, 250_000_000, 1_700_000_000.25)
    data = record.to_bytes()
    assert PartialRecord.from_bytes(data) == record
    assert set(json.loads(data)) == {"hilltop-resume", "filename", "filesize", "on_disk",
                                     "updated"}


@pytest.mark.parametrize("data", [
    b"", b"not json", b"[]", b"\xff\xfe", json.dumps({"filename": "f"}).encode(),
    json.dumps({"hilltop-resume": 2, "filename": "f", "filesize": 1, "on_disk": 0,
                "updated": 0}).encode(),
    json.dumps({"hilltop-resume": 1, "filename": "f", "filesize": -1, "on_disk": 0,
                "updated": 0}).encode(),
    json.dumps({"hilltop-resume": 1, "filename": "f", "filesize": True, "on_disk": 0,
                "updated": 0}).encode(),
    json.dumps({"hilltop-resume": 1, "filename": 3, "filesize": 1, "on_disk": 0,
                "updated": 0}).encode(),
    json.dumps({"hilltop-resume": 1, "filename": "f" * 5000, "filesize": 1, "on_disk": 0,
                "updated": 0}).encode(),
])
def test_anything_but_a_well_formed_record_is_none(data: bytes) -> None:
    assert PartialRecord.from_bytes(data) is None


@given(st.binary(max_size=300))
def test_garbage_records_never_raise(data: bytes) -> None:
    assert PartialRecord.from_bytes(data) is None or isinstance(
        PartialRecord.from_bytes(data), PartialRecord)


RECORD = PartialRecord("f.bin", 1000, 400, 0.0)


def test_a_matching_record_continues_from_what_is_on_disk() -> None:
    assert resume.decide(RECORD, 600, "f.bin", 1000, 60.0) == resume.Decision(600, "")


def test_a_complete_partial_still_leaves_the_last_byte_to_send() -> None:
    assert resume.decide(RECORD, 1000, "f.bin", 1000, 1.0).offset == 999
    assert resume.decide(RECORD, 5000, "f.bin", 1000, 1.0).offset == 999


@pytest.mark.parametrize(("record", "on_disk", "name", "size", "age", "why"), [
    (None, 600, "f.bin", 1000, 60.0, "no record"),
    (RECORD, 600, "g.bin", 1000, 60.0, "another file"),
    (RECORD, 600, "f.bin", 1001, 60.0, "another file"),
    (RECORD, 600, "f.bin", 1000, resume.KEEP_FOR + 1, "too old"),
    (RECORD, 0, "f.bin", 1000, 60.0, "empty"),
])
def test_what_starts_from_zero_and_why(record: PartialRecord | None, on_disk: int, name: str,
                                       size: int, age: float, why: str) -> None:
    decision = resume.decide(record, on_disk, name, size, age)
    assert decision.offset == 0
    assert why in decision.why


def test_the_proof_is_salted_and_its_hash_goes_on_over_the_rest() -> None:
    prefix, rest = b"a" * 1000, b"b" * 500
    proof = resume.PrefixProof(SALT)
    proof.update(prefix[:300])
    proof.update(prefix[300:])
    assert proof.proof() == hashlib.sha256(SALT + prefix).hexdigest()
    other = resume.PrefixProof(bytes(32))
    other.update(prefix)
    assert other.proof() != proof.proof()  # a fresh salt: an old answer does not replay
    proof.whole.update(rest)
    assert proof.whole.hexdigest() == hashlib.sha256(SALT + prefix + rest).hexdigest()


def test_only_both_listing_the_feature_negotiates_it() -> None:
    ours = capabilities.FEATURES
    assert capabilities.RESUME in ours
    hilltop = capabilities.from_app_versions(
        capabilities.advertisement("0.1.0", [], [capabilities.RESUME]))
    older = capabilities.from_app_versions(capabilities.advertisement("0.1.0", [], []))
    assert resume.negotiated(ours, hilltop)
    assert not resume.negotiated(ours, older)
    assert not resume.negotiated(ours, capabilities.V1_PEER)
    assert not resume.negotiated((), hilltop)


def test_the_answer_carries_the_request_beside_file_ack() -> None:
    answer = offers.Answer(offers.FILE_ACK, resume=(250, SALT))
    wire = json.loads(answer.to_wire())
    assert wire == {"answer": {"file_ack": "ok",
                               "hilltop-resume": {"offset": 250, "salt": SALT.hex()}}}
    assert offers.Answer.from_wire(answer.to_wire()) == answer
    plain = offers.Answer(offers.FILE_ACK)
    assert json.loads(plain.to_wire()) == {"answer": {"file_ack": "ok"}}
    assert offers.Answer.from_wire(plain.to_wire()).resume is None


@pytest.mark.parametrize("request_", [
    None, [], "x", {"offset": -1, "salt": SALT.hex()}, {"offset": 1, "salt": "00"},
    {"offset": 1, "salt": SALT.hex().upper()}, {"offset": 1.5, "salt": SALT.hex()},
    {"salt": SALT.hex()}, {"offset": True, "salt": SALT.hex()},
])
def test_a_malformed_request_is_a_protocol_error(request_: object) -> None:
    data = json.dumps({"answer": {"file_ack": "ok", "hilltop-resume": request_}}).encode()
    with pytest.raises(ProtocolError):
        offers.parse_app_message(data)


def test_only_a_file_ack_may_ask_to_resume() -> None:
    with pytest.raises(TypeError):
        offers.Answer(offers.MESSAGE_ACK, resume=(1, SALT))


def test_proof_and_decision_records_round_trip_strictly() -> None:
    proof = hashlib.sha256(b"x").hexdigest()
    assert resume.parse_proof(resume.proof_record(proof)) == proof
    assert resume.parse_decision(resume.decision_record(250), 250) == 250
    assert resume.parse_decision(resume.decision_record(0), 250) == 0
    with pytest.raises(ProtocolError):  # only the offset asked for, or zero
        resume.parse_decision(resume.decision_record(100), 250)


@pytest.mark.parametrize("record", [
    b"", b"[1]", b"{}", b'{"resume-proof": "abc"}', b'{"resume-proof": 5}', b"\xff",
    b'{"resume-from": -1}', b'{"resume-from": "250"}', b" " * 5000,
])
def test_garbage_transit_records_are_protocol_errors(record: bytes) -> None:
    with pytest.raises(ProtocolError):
        resume.parse_proof(record)
    with pytest.raises(ProtocolError):
        resume.parse_decision(record, 250)
