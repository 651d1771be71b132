"""The transfer engine alone: plain inputs, the actions that come out (no reactor, no I/O).

Two engines back to back (``pair``), as h11's ConnectionPair, and single engines fed the
peer's messages by hand for the hostile orders.
"""

from __future__ import annotations

import json

import pytest

from hilltop.errors import (
    PeerRejectedError,
    ProtocolError,
    SilentPeerError,
    StalledError,
    TransferError,
    TransitError,
    UnsendableError,
)
from hilltop.rendezvous import capabilities
from hilltop.transfer import engine as eng
from hilltop.transfer import offers
from hilltop.transfer.streamcodec import END_MARKER, Trailer
from hilltop.transit import records

PLAN = eng.Plan(records.BIG_RECORD_SIZE, True, records.SECRETBOX, idle_timeout=5.0)
TRANSIT = offers.TransitMsg(({"type": "direct-tcp-v1"},), ()).to_wire()
SHA = "ab" * 32


def ack(digest: str | None) -> bytes:
    """The receiver's final record, as the engine builds it."""
    r = eng.TransferEngine.receiver(PLAN, 0.0)
    r._offered(offers.FileOffer("f", 1))  # noqa: SLF001 - straight to the point under test
    r._trailer = None  # noqa: SLF001
    r.stage = eng.Stage.COMMITTING
    r.sink_done(digest)
    (record,) = [a for a in r.actions() if isinstance(a, eng.SendRecord)]
    assert record.final
    return record.data


def confirming(digest: str | None, *, resumed: bool = False) -> eng.TransferEngine:
    """A sender whose bytes all left, waiting for the ack."""
    s = eng.TransferEngine.sender(PLAN, offers.FileOffer("f", 10), size=10)
    s.stage = eng.Stage.MOVING
    s._resumed = resumed  # noqa: SLF001
    s.bulk_done(digest, 0.0)
    assert isinstance(s.actions()[-1], eng.ReadRecord)
    return s


def outcome(e: eng.TransferEngine) -> eng.Done | eng.Failed:
    ends = [a for a in e.actions() if isinstance(a, eng.Done | eng.Failed)]
    assert len(ends) == 1, ends
    return ends[0]


def check_ack(record: bytes, digest: str | None, *, resumed: bool = False) -> None:
    """What story._check_ack was: raise the engine's failure, if any."""
    s = confirming(digest, resumed=resumed)
    s.record(record, 1.0)
    end = outcome(s)
    if isinstance(end, eng.Failed):
        raise end.error


# --- moved from test_datapath (story's ack helpers) ---------------------------------------------
def test_ack_carries_sha256_only_when_hashed() -> None:
    assert json.loads(ack("ab" * 32)) == {"ack": "ok", "sha256": "ab" * 32}
    assert json.loads(ack(None)) == {"ack": "ok"}
    check_ack(ack(None), None)
    check_ack(ack("ab" * 32), "ab" * 32)
    check_ack(ack(None), "ab" * 32)  # optional, as for official
    with pytest.raises(TransferError, match="SHA-256 mismatch"):
        check_ack(ack("cd" * 32), "ab" * 32)
    with pytest.raises(TransferError):
        check_ack(b'{"ack": "no"}', None)


def test_a_resumed_ack_must_carry_the_sha256() -> None:
    with pytest.raises(TransferError, match="resumed file's SHA-256"):
        check_ack(ack(None), SHA, resumed=True)
    check_ack(ack(SHA), SHA, resumed=True)


def test_a_hostile_ack_is_shown_short_and_escaped() -> None:
    """A receiver may answer with any record up to 64 MiB: the sender's one error line shows
    its start, escaped (the CLI's terminal_safe comes on top)."""
    record = json.dumps({"ack": "\x1b[2J" + "x" * 10_000_000}).encode()
    with pytest.raises(TransferError) as info:
        check_ack(record, None)
    assert len(str(info.value)) < 300 and "\\x1b[2J" in str(info.value)
    assert "\x1b" not in str(info.value)


# --- moved from test_resume_record (story._start_proof) -----------------------------------------
class _FileLike:
    size = 100


@pytest.mark.parametrize(("negotiated", "resumable_source", "offset"), [
    (False, True, 50),  # the receiver asks although we never listed resume-v1
    (True, False, 50),  # a folder's zip has no prefix to prove
    (True, True, 0),
    (True, True, 100),  # nothing would be left to send
    (True, True, 1000),
])
def test_a_sender_refuses_a_resume_request_it_cannot_honour(
        negotiated: bool, resumable_source: bool, offset: int) -> None:
    plan = eng.Plan(records.BIG_RECORD_SIZE, True, records.SECRETBOX, resumable=negotiated)
    s = eng.TransferEngine.sender(plan, offers.FileOffer("f", 100), size=100,
                                  source_resumable=resumable_source)
    s.start_offer(TRANSIT, frozenset(), False)
    s.actions()
    s.message(TRANSIT, 0.0)
    s.message(offers.Answer(offers.FILE_ACK, resume=(offset, b"s" * 32)).to_wire(), 0.0)
    end = outcome(s)
    assert isinstance(end, eng.Failed) and isinstance(end.error, ProtocolError)


def test_a_sender_without_a_request_proves_nothing() -> None:
    plan = eng.Plan(records.BIG_RECORD_SIZE, True, records.SECRETBOX, resumable=True)
    s = eng.TransferEngine.sender(plan, offers.FileOffer("f", 100), size=100,
                                  source_resumable=True)
    s.start_offer(TRANSIT, frozenset(), False)
    s.actions()
    s.message(TRANSIT, 0.0)
    s.message(offers.Answer(offers.FILE_ACK).to_wire(), 0.0)
    acts = s.actions()
    assert not any(isinstance(a, eng.ProvePrefix) for a in acts)
    assert isinstance(acts[-1], eng.Connect)


# --- the whole story, both sides back to back ----------------------------------------------------
def pair(offer: offers.Offer, *, plan: eng.Plan = PLAN, size: int | None = 10
         ) -> tuple[eng.TransferEngine, eng.TransferEngine, list[tuple[str, object]]]:
    """A sender and a receiver exchanging their messages and records until both wait for
    the shell (bulk or sink); returns them and what reached the shells, in order."""
    s = eng.TransferEngine.sender(plan, offer, size=size)
    r = eng.TransferEngine.receiver(plan, 0.0)
    s.start_offer(TRANSIT, frozenset(capabilities.FEATURES), False)
    seen: list[tuple[str, object]] = []
    for _ in range(50):
        moved = False
        for me, peer, name in ((s, r, "s"), (r, s, "r")):
            for a in me.actions():
                moved = True
                seen.append((name, a))
                if isinstance(a, eng.SendMessage):
                    peer.message(a.data, 0.0)
                elif isinstance(a, eng.SendRecord):
                    peer.record(a.data, 0.0)
                elif isinstance(a, eng.OfferArrived):
                    me.accept(TRANSIT, size=size)
                elif isinstance(a, eng.Connect):
                    me.channel_up("test", 0.0)
        if not moved:
            break
    return s, r, seen


def test_a_file_crosses_in_the_official_order() -> None:
    s, r, seen = pair(offers.FileOffer("f", 10))
    sent = [offers.parse_app_message(a.data) for n, a in seen
            if n == "s" and isinstance(a, eng.SendMessage)]
    assert [type(m) for m in sent] == [offers.TransitMsg, offers.FileOffer]
    answered = [offers.parse_app_message(a.data) for n, a in seen
                if n == "r" and isinstance(a, eng.SendMessage)]
    assert [type(m) for m in answered] == [offers.TransitMsg, offers.Answer]
    assert [a for n, a in seen if isinstance(a, eng.StartBulk)] == [
        eng.StartBulk(0, 10), eng.StartBulk(0, 10)]
    s.bulk_done(SHA, 1.0)
    r.bulk_done(None, 1.0)
    assert r.actions() == [eng.FinishSink()]
    r.sink_done(SHA)
    (record, done) = r.actions()
    assert done == eng.Done(SHA)
    s.actions()
    s.record(record.data, 2.0)
    assert s.actions() == [eng.Done(SHA)]


def test_a_stream_ends_with_its_marker_and_trailer() -> None:
    plan = eng.Plan(records.BIG_RECORD_SIZE, True, records.SECRETBOX, stream=True,
                    idle_timeout=5.0)
    s, r, _ = pair(offers.StreamOffer("x"), plan=plan, size=None)
    s.bulk_done((7, SHA), 1.0)
    acts = s.actions()
    assert acts[:2] == [eng.SendRecord(END_MARKER), eng.SendRecord(Trailer(7, SHA).to_record())]
    r.bulk_done(Trailer(7, SHA), 1.0)
    assert r.actions() == [eng.FinishSink(7, SHA)]
    r.sink_done(SHA)
    record, done = r.actions()
    assert done == eng.Done(Trailer(7, SHA))
    s.record(record.data, 2.0)
    assert s.actions() == [eng.Done(Trailer(7, SHA))]


@pytest.mark.parametrize("stream", [False, True])
def test_a_receiver_that_never_acks_fails_the_sender_after_the_idle_time_out(
        stream: bool) -> None:
    """Streams too: the wait for the ack is a deadline of the engine, like a file's."""
    plan = eng.Plan(records.BIG_RECORD_SIZE, True, records.SECRETBOX, stream=stream,
                    idle_timeout=5.0)
    s, _r, _ = pair(offers.StreamOffer("x") if stream else offers.FileOffer("f", 10),
                    plan=plan, size=None if stream else 10)
    s.bulk_done((3, SHA) if stream else SHA, 100.0)
    s.actions()
    assert s.next_deadline() == 105.0
    s.handle_timer(104.9)
    assert s.actions() == []
    s.handle_timer(105.0)
    end = outcome(s)
    assert isinstance(end, eng.Failed) and isinstance(end.error, StalledError)
    what = "confirming the stream" if stream else "confirming the transfer"
    assert what in str(end.error)
    assert s.next_deadline() is None


def test_a_channel_lost_before_the_ack_says_the_receiver_did_not_confirm() -> None:
    s = confirming(SHA)
    from hilltop.errors import TransitError

    s.channel_lost(TransitError("transit connection lost"))
    end = outcome(s)
    assert isinstance(end, eng.Failed)
    assert "without confirming the transfer" in str(end.error)


def test_a_sender_silent_after_the_key_is_given_up_on() -> None:
    r = eng.TransferEngine.receiver(PLAN, 10.0, offer_timeout=3.0)
    assert r.actions() == [eng.ReadMessage()]
    assert r.next_deadline() == 13.0
    r.handle_timer(13.0)
    end = outcome(r)
    assert isinstance(end, eng.Failed) and isinstance(end.error, SilentPeerError)


def test_an_offer_before_transit_hints_is_refused_with_the_official_words() -> None:
    r = eng.TransferEngine.receiver(PLAN, 0.0)
    r.actions()
    r.message(offers.FileOffer("f", 1).to_wire(), 0.0)
    acts = r.actions()
    assert acts[0] == eng.SendMessage(offers.ErrorMsg("transfer rejected").to_wire())
    assert isinstance(acts[1], eng.Failed) and isinstance(acts[1].error, ProtocolError)


def test_a_refusal_reaches_the_sender() -> None:
    s = eng.TransferEngine.sender(PLAN, offers.FileOffer("f", 1), size=1)
    s.start_offer(TRANSIT, frozenset(), False)
    s.actions()
    s.message(offers.ErrorMsg("transfer rejected").to_wire(), 0.0)
    end = outcome(s)
    assert isinstance(end, eng.Failed) and isinstance(end.error, PeerRejectedError)


def test_a_stream_to_a_peer_without_stream_v1_is_refused_before_a_byte() -> None:
    plan = eng.Plan(records.V1_RECORD_SIZE, True, records.SECRETBOX, stream=True)
    s = eng.TransferEngine.sender(plan, offers.StreamOffer("x"), size=None)
    s.start_offer(b"", frozenset(), True)
    acts = s.actions()
    assert acts[0] == eng.SendMessage(offers.ErrorMsg(eng.NOT_A_STREAM_PEER).to_wire())
    assert isinstance(acts[1], eng.Failed) and isinstance(acts[1].error, UnsendableError)
    assert "official or wormhole-william" in str(acts[1].error)


def test_the_mailbox_lost_before_the_sender_was_heard_ends_the_receive() -> None:
    _s, r, _ = pair(offers.FileOffer("f", 10))
    err = RuntimeError("mailbox gone")
    r.mailbox_lost(err)
    assert outcome(r) == eng.Failed(err)


def test_the_mailbox_lost_once_data_flows_changes_nothing() -> None:
    _s, r, _ = pair(offers.FileOffer("f", 10))
    r.moved(0.0)
    r.mailbox_lost(RuntimeError("mailbox gone"))
    assert r.actions() == [] and not r.finished


def test_a_sender_that_fails_locally_tells_its_receiver_why() -> None:
    """The sender's read fails mid-file: an ``error`` message with its reason goes out before
    the failure (the shell then drops the channel), the sender's paths cut to their names;
    the receiver, which kept a message read open since it accepted, fails with that reason."""
    s, r, seen = pair(offers.FileOffer("f", 10))
    assert ("r", eng.ReadMessage()) in seen
    s.failed(OSError(5, "Input/output error: '/home/someone/secret/f'"), 1.0)
    told, failed = s.actions()
    assert isinstance(failed, eng.Failed)
    assert offers.parse_app_message(told.data) == offers.ErrorMsg(
        "[Errno 5] Input/output error: 'f'")
    r.message(told.data, 1.1)
    end = outcome(r)
    assert isinstance(end, eng.Failed) and isinstance(end.error, TransferError)
    assert str(end.error) == "the sender failed: [Errno 5] Input/output error: 'f'"


def test_an_interrupted_sender_tells_nothing() -> None:
    s, _r, _ = pair(offers.FileOffer("f", 10))
    s.failed(RuntimeError("cancelled"), 1.0, tell_peer=False)
    assert [type(a) for a in s.actions()] == [eng.Failed]


def test_a_broken_connection_waits_briefly_for_the_senders_reason() -> None:
    _s, r, _ = pair(offers.FileOffer("f", 10))
    broke = TransitError("the connection to the sender broke after 4 of 10 bytes")
    r.failed(broke, 1.0)
    assert r.actions() == [] and r.next_deadline() == 1.0 + eng.SENDER_REASON_GRACE
    r.message(offers.ErrorMsg("'f' got shorter while it was being sent").to_wire(), 1.2)
    end = outcome(r)
    assert isinstance(end, eng.Failed)
    assert str(end.error) == ("the sender failed: 'f' got shorter while it was being sent "
                              "(the connection to the sender broke after 4 of 10 bytes)")


def test_a_broken_connection_without_a_reason_fails_after_the_grace() -> None:
    _s, r, _ = pair(offers.FileOffer("f", 10))
    broke = TransitError("the connection to the sender broke after 4 of 10 bytes")
    r.failed(broke, 1.0)
    r.handle_timer(1.0 + eng.SENDER_REASON_GRACE / 2)
    assert not r.finished
    r.handle_timer(1.0 + eng.SENDER_REASON_GRACE)
    assert outcome(r) == eng.Failed(broke)


def test_other_messages_after_the_answer_are_skipped() -> None:
    _s, r, _ = pair(offers.FileOffer("f", 10))
    r.message(offers.FileOffer("again", 1).to_wire(), 1.0)
    r.message(b"not json", 1.0)
    assert r.actions() == [eng.ReadMessage(), eng.ReadMessage()] and not r.finished


def test_a_resumed_file_proves_its_prefix_both_ways() -> None:
    plan = eng.Plan(records.BIG_RECORD_SIZE, True, records.SECRETBOX, resumable=True,
                    idle_timeout=5.0)
    s = eng.TransferEngine.sender(plan, offers.FileOffer("f", 100), size=100,
                                  source_resumable=True)
    r = eng.TransferEngine.receiver(plan, 0.0)
    s.start_offer(TRANSIT, frozenset(), False)
    for a in s.actions():
        if isinstance(a, eng.SendMessage):
            r.message(a.data, 0.0)
    assert isinstance(r.actions()[-1], eng.OfferArrived)
    r.accept(TRANSIT, size=100, resume_offset=40, salt=b"s" * 32)
    racts = r.actions()
    assert eng.ProvePrefix(40, b"s" * 32) in racts
    for a in racts:
        if isinstance(a, eng.SendMessage):
            s.message(a.data, 0.0)
    sacts = s.actions()
    assert eng.ProvePrefix(40, b"s" * 32) in sacts

    class Proof:
        whole = "hasher"

        def proof(self) -> str:
            return "ab" * 32

    s.channel_up("t", 0.0)
    s.proof_ready(Proof(), 0.0)
    (proof_record, read) = s.actions()
    assert read == eng.ReadRecord()
    r.channel_up("t", 0.0)
    r.proof_ready("ab" * 32, 0.0)
    r.record(proof_record.data, 0.0)
    racts = r.actions()
    assert eng.ResumeSinkAt(40, True) in racts and eng.Resumed(40, "") in racts
    assert eng.StartBulk(40, 60) in racts
    decision = next(a for a in racts if isinstance(a, eng.SendRecord))
    s.record(decision.data, 0.0)
    sacts = s.actions()
    assert eng.StartBulk(40, 60, "hasher") in sacts and eng.Resumed(40, "") in sacts


# --- the bulk's idle deadline: the data path reports, the engine keeps the clock -------------
@pytest.mark.parametrize(("offer", "size", "why"), [
    (offers.FileOffer("f", 10), 10, eng.RECEIVE_STALLED),
    (offers.StreamOffer("x"), None, eng.STREAM_STALLED)])
def test_a_receiver_waits_on_the_sender_from_the_first_byte_it_expects(
        offer: offers.Offer, size: int | None, why: str) -> None:
    plan = eng.Plan(records.BIG_RECORD_SIZE, True, records.SECRETBOX, stream=size is None,
                    idle_timeout=5.0)
    _s, r, _ = pair(offer, plan=plan, size=size)
    assert r.stage is eng.Stage.MOVING and r.next_deadline() == 5.0
    r.moved(3.0)  # bytes arrived: the wait starts over, the timer finds it when it fires
    r.handle_timer(5.0)
    assert r.actions() == [] and r.next_deadline() == 8.0
    r.handle_timer(8.0)
    end = outcome(r)
    assert isinstance(end, eng.Failed) and isinstance(end.error, StalledError)
    assert str(end.error) == f"nothing moved for 5 s: {why}"


def test_a_senders_clock_runs_only_while_the_receiver_holds_it_back() -> None:
    s, _r, _ = pair(offers.FileOffer("f", 10))
    assert s.stage is eng.Stage.MOVING and s.next_deadline() is None  # a silent source: fine
    s.held(2.0)
    s.held(4.0)  # still the same wait
    assert s.next_deadline() == 7.0
    s.moved(6.0)  # the receiver took bytes: no wait on it now
    assert s.next_deadline() is None
    s.handle_timer(7.0)
    assert s.actions() == []
    s.held(10.0)
    s.handle_timer(15.0)
    end = outcome(s)
    assert isinstance(end, eng.Failed)
    assert str(end.error) == f"nothing moved for 5 s: {eng.SEND_STALLED}"
    s.moved(16.0)
    assert s.next_deadline() is None and s.actions() == []


def test_no_idle_limit_means_no_bulk_deadline() -> None:
    plan = eng.Plan(records.BIG_RECORD_SIZE, True, records.SECRETBOX)
    s, r, _ = pair(offers.FileOffer("f", 10), plan=plan)
    s.held(1.0)
    assert s.next_deadline() is None and r.next_deadline() is None
