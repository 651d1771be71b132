"""Small files in their offer (``inline-file-v1``): the decision, the message shapes and the
engine's order, with no reactor and no I/O."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from hilltop.errors import PeerRejectedError, ProtocolError, TransferError
from hilltop.rendezvous import capabilities
from hilltop.transfer import engine as eng
from hilltop.transfer import inline, offers
from hilltop.transfer.offers import INLINE_LIMIT
from hilltop.transit import records
from hilltop.transit.options import TransitOptions

PLAN = eng.Plan(records.BIG_RECORD_SIZE, False, records.SECRETBOX, idle_timeout=5.0,
                inline=True)
SHARED = frozenset({capabilities.INLINE})
DATA = b"hi\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- the decision --------------------------------------------------------------------------
def test_every_build_lists_the_feature_unless_told_not_to() -> None:
    listed = capabilities.default_advertisement("1")["hilltop"]["features"]
    assert capabilities.INLINE in listed
    left_out = capabilities.default_advertisement("1", inline=False)["hilltop"]["features"]
    assert capabilities.INLINE not in left_out


@pytest.mark.parametrize(("offer", "size", "options", "shared", "expected"), [
    (offers.FileOffer("a", 3), 3, TransitOptions(), SHARED, True),
    (offers.FileOffer("a", 0), 0, TransitOptions(), SHARED, True),
    (offers.FileOffer("a", INLINE_LIMIT), INLINE_LIMIT, TransitOptions(), SHARED, True),
    (offers.FileOffer("a", INLINE_LIMIT + 1), INLINE_LIMIT + 1, TransitOptions(), SHARED,
     False),
    (offers.FileOffer("a", 3), 3, TransitOptions(), frozenset(), False),  # official peer
    (offers.FileOffer("a", 3), 3, TransitOptions(transports=["direct-tcp"]), SHARED, False),
    (offers.FileOffer("a", 3), 3, TransitOptions(durable=True), SHARED, False),
    (offers.FileOffer("a", 3), 3, TransitOptions(tor=True), SHARED, True),
    (offers.FileOffer("a", 3), 3, TransitOptions(no_listen=True, transit_helpers=["x"]),
     SHARED, True),
    (offers.DirectoryOffer("d", 100, 3, 1), 100, TransitOptions(), SHARED, False),
    (offers.StreamOffer("s"), None, TransitOptions(), SHARED, False),
])
def test_which_transfers_ride_in_the_offer(offer: object, size: int | None,
                                           options: TransitOptions, shared: frozenset[str],
                                           expected: bool) -> None:
    assert inline.chosen(offer, size, options, shared) is expected


# --- the message shapes --------------------------------------------------------------------
def body(filename: object = "a.txt", filesize: object = 3, data: object = None) -> bytes:
    encoded = base64.b64encode(DATA).decode() if data is None else data
    return json.dumps({"offer": {offers.INLINE_KIND: {
        "filename": filename, "filesize": filesize, "data": encoded}}}).encode()


def test_an_inline_offer_round_trips() -> None:
    wire = offers.InlineFileOffer("a.txt", DATA).to_wire()
    assert wire == body()
    parsed = offers.parse_app_message(wire)
    assert parsed == offers.InlineFileOffer("a.txt", DATA)
    assert isinstance(parsed, offers.InlineFileOffer)
    assert parsed.file == offers.FileOffer("a.txt", 3)
    ack = offers.InlineAck(sha(DATA))
    assert offers.parse_app_message(ack.to_wire()) == ack


@pytest.mark.parametrize(("wire", "why"), [
    (body(filesize=4), "of 3 bytes that says it has 4"),
    (body(filesize=2), "of 3 bytes that says it has 2"),
    (body(filesize=INLINE_LIMIT + 1,
          data=base64.b64encode(b"x" * (INLINE_LIMIT + 1)).decode()), "over the 16384"),
    (body(data="aGk*"), "not base64"),
    (body(data="aGkK" + "A" * 30_000), "not a string of at most"),
    (body(data=3), "not a string"),
    (body(filename=None), "bad 'filename'"),
    (body(filesize=True), "bad 'filesize'"),
    (json.dumps({"offer": {offers.INLINE_KIND: []}}).encode(), "not an object"),
])
def test_a_hostile_inline_offer_is_one_clear_error(wire: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        offers.parse_app_message(wire)


@pytest.mark.parametrize("answer", [
    {offers.INLINE_ACK: "no", "sha256": "ab" * 32},
    {offers.INLINE_ACK: "ok"},
    {offers.INLINE_ACK: "ok", "sha256": "AB" * 32},
    {offers.INLINE_ACK: "ok", "sha256": "ab"},
])
def test_a_garbled_inline_ack_is_refused(answer: dict[str, str]) -> None:
    with pytest.raises(ProtocolError, match="acknowledgement"):
        offers.parse_app_message(json.dumps({"answer": answer}).encode())


# --- the engine ----------------------------------------------------------------------------
def kinds(actions: list[eng.Action]) -> list[str]:
    return [type(a).__name__ for a in actions]


def sending(data: bytes = DATA) -> tuple[eng.TransferEngine, list[eng.Action]]:
    s = eng.TransferEngine.sender(PLAN, offers.FileOffer("a.txt", len(data)), size=len(data))
    s.start_inline(data)
    return s, s.actions()


def test_a_small_file_crosses_in_the_offer_and_is_acknowledged() -> None:
    s, out = sending()
    assert kinds(out) == ["Connected", "SendMessage", "ReadMessage"]
    assert out[0] == eng.Connected(inline.MAILBOX_PATH)
    r = eng.TransferEngine.receiver(PLAN, 0.0)
    r.actions()
    offer = next(a for a in out if isinstance(a, eng.SendMessage)).data
    r.message(offer, 0.0)
    assert r.actions() == [eng.OfferArrived(offers.FileOffer("a.txt", 3))]
    assert r.inline
    r.accept_inline()
    assert r.actions() == [eng.PrepareSink(skip_hash=False, direct_io=False),
                           eng.Connected(inline.MAILBOX_PATH), eng.WriteSink(DATA),
                           eng.FinishSink()]
    r.sink_done(sha(DATA))
    answer, done = r.actions()
    assert done == eng.Done(sha(DATA))
    assert isinstance(answer, eng.SendMessage)
    s.message(answer.data, 1.0)
    assert s.actions() == [eng.Done(sha(DATA))]
    assert s.next_deadline() is None and r.next_deadline() is None


def test_a_kept_partial_of_the_name_starts_over() -> None:
    _, out = sending()
    r = eng.TransferEngine.receiver(PLAN, 0.0)
    r.message(next(a for a in out if isinstance(a, eng.SendMessage)).data, 0.0)
    r.actions()
    r.accept_inline(resume_offset=2)
    assert eng.ResumeSinkAt(0, True) in r.actions()


def test_an_inline_offer_we_did_not_list_is_refused() -> None:
    r = eng.TransferEngine.receiver(eng.Plan(records.BIG_RECORD_SIZE, False, records.SECRETBOX),
                                    0.0)
    r.actions()
    r.message(offers.InlineFileOffer("a.txt", DATA).to_wire(), 0.0)
    out = r.actions()
    assert out[0] == eng.SendMessage(offers.ErrorMsg(eng.REJECTED).to_wire())
    assert isinstance(out[-1], eng.Failed) and isinstance(out[-1].error, ProtocolError)
    assert "did not list inline-file-v1" in str(out[-1].error)


def test_a_hostile_inline_offer_tells_the_sender_and_fails() -> None:
    r = eng.TransferEngine.receiver(PLAN, 0.0)
    r.actions()
    r.message(body(filesize=4), 0.0)
    out = r.actions()
    assert isinstance(out[0], eng.SendMessage) and b"error" in out[0].data
    assert isinstance(out[-1], eng.Failed) and "says it has 4" in str(out[-1].error)


def test_a_receiver_that_could_not_save_tells_the_sender() -> None:
    _, out = sending()
    r = eng.TransferEngine.receiver(PLAN, 0.0)
    r.message(next(a for a in out if isinstance(a, eng.SendMessage)).data, 0.0)
    r.accept_inline()
    r.actions()
    r.failed(OSError("No space left on device"))
    told, failed = r.actions()
    assert told == eng.SendMessage(offers.ErrorMsg("No space left on device").to_wire())
    assert isinstance(failed, eng.Failed)
    s, _ = sending()
    s.message(told.data, 1.0)
    (end,) = s.actions()
    assert isinstance(end, eng.Failed) and isinstance(end.error, PeerRejectedError)
    assert "refused the transfer: No space left" in str(end.error)


@pytest.mark.parametrize(("answer", "error", "why"), [
    (offers.InlineAck("cd" * 32).to_wire(), TransferError, "SHA-256 mismatch"),
    (offers.ErrorMsg(eng.REJECTED).to_wire(), PeerRejectedError,
     "refused the transfer: transfer rejected"),
    (offers.Answer(offers.FILE_ACK).to_wire(), ProtocolError, "as if it were to come"),
])
def test_the_sender_checks_the_answer(answer: bytes, error: type, why: str) -> None:
    s, _ = sending()
    s.message(answer, 1.0)
    (end,) = s.actions()
    assert isinstance(end, eng.Failed) and isinstance(end.error, error)
    assert why in str(end.error)


# --- the sender's early guess, before the file is opened (session) ---------------------------
def test_the_early_guess_looks_at_the_path(tmp_path: Path) -> None:
    from hilltop.transfer import session

    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(b"x" * INLINE_LIMIT)
    big.write_bytes(b"x" * (INLINE_LIMIT + 1))
    assert session.may_go_inline(str(small), TransitOptions())
    assert not session.may_go_inline(str(small), TransitOptions(transports=["relay"]))
    assert not session.may_go_inline(str(big), TransitOptions())
    assert not session.may_go_inline(str(tmp_path), TransitOptions())  # a folder
    assert not session.may_go_inline(str(tmp_path / "missing"), TransitOptions())
    assert not session.may_go_inline(None, TransitOptions())
    with session.open_source(str(small)) as source:
        assert session.inline_eligible(source, TransitOptions())
        assert session.read_inline(source) == b"x" * INLINE_LIMIT
