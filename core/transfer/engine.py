"""The file-transfer engine: the order of messages and records of one transfer, sans-I/O.

In the manner of :mod:`hilltop.rendezvous.mailbox` (and h11, aioquic): the shell
(:mod:`hilltop.transfer.session`) feeds it what happened, with ``now``, and drains what to do
(:meth:`TransferEngine.actions`) and when to wake it (:meth:`TransferEngine.next_deadline`,
then :meth:`TransferEngine.handle_timer`). It reads no clock, opens no file and touches no
socket, so every order of events is a plain test (tests/core/transfer/test_engine.py).

One engine for every form of v1 file transfer, as parts of one :class:`Plan`: a single file,
a folder (one zip), several files (``files-v1``, one manifest and one run of bytes), a stream
of unknown length (``stream-v1``: end marker and trailer), a resumed file (``resume-v1``: proof
of the kept prefix, then the decision) and the official peers' plain form (no extensions).

The order is fixed by the official peers (protocol summary, section 4): the sender's
``transit`` goes before its offer; the receiver answers with its own ``transit`` and
``file_ack``; both race transit connections; the sender sends the offered bytes as records
and the receiver replies with one record carrying the SHA-256 of what it got.

Every wait for the peer that has a limit is a deadline here: the offer after the key
(``offer_timeout``), each control record (proof, decision, ack) and the bulk's silence
(:attr:`Plan.idle_timeout`). For the bulk the data path reports what it sees and the engine
keeps the clock: :meth:`TransferEngine.moved` (bytes moved, reported as the progress is, so
a few times a second at most on the fast path) and, for the sender, :meth:`TransferEngine.held`
(the receiver holds us back). A sender's clock runs only while held: a pipe with nothing to
say is no stall of the receiver's. One place decides, one timer in the shell wakes it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import field
from enum import Enum, auto
from typing import Any

from hilltop._transitions import move
from hilltop._values import value
from hilltop.errors import (
    HilltopError,
    PeerRejectedError,
    ProtocolError,
    SilentPeerError,
    StalledError,
    TransferError,
    TransitError,
    UnknownOfferError,
    UnsendableError,
)
from hilltop.transfer import offers, resume
from hilltop.transfer.inline import MAILBOX_PATH
from hilltop.transfer.streamcodec import END_MARKER, Trailer

NOT_A_STREAM_PEER = ("the sender is streaming data of unknown length (a pipe), which only "
                     "hilltop receivers can take")
"""The ``error`` text a receiver without ``stream-v1`` gets."""
REJECTED = "transfer rejected"
"""The ``error`` text official receivers send when they refuse an offer."""
SEND_STALLED = "the receiver stopped taking data but kept the connection open"
RECEIVE_STALLED = ("the sender stopped sending but kept the connection open; "
                   "the file was not saved")
STREAM_STALLED = ("the sender sent nothing more but kept the connection open; what arrived "
                  "is incomplete (a pipe that is silent longer than that needs a larger "
                  "--idle-timeout)")
"""Why a stream receive stalled. The receiver cannot tell a frozen sender from a producer
with nothing to say, so a stream's silence has the file's limit (``--idle-timeout``)."""
SENDER_REASON_GRACE = 1.0
"""Seconds a receiver whose connection to the sender broke mid-transfer waits for the
sender's ``error`` message before failing with the broken connection: a sender that fails
locally sends it first, then drops the connection, and the mailbox is the slower path."""
_TELLING_STAGES = ("CONNECTING", "PROVING", "MOVING", "CONFIRMING")
_ABSOLUTE_PATH = re.compile(r"(?:/[^/\s'\"]+)+/([^/\s'\"]+)")


def reason_for_peer(error: BaseException) -> str:
    """The sender's error as the ``error`` text its receiver shows: its one line, with every
    absolute path cut to its last name (the receiver was offered only that name)."""
    text = str(error).splitlines()[0] if str(error).strip() else type(error).__name__
    text = _ABSOLUTE_PATH.sub(lambda m: m.group(1), text)
    return text if len(text) <= 300 else text[:300] + "..."


@value
class Plan:
    """What both peers' features and the offer decide for one transfer.

    ``record_size``, ``hashed``, ``cipher``: the data path (:mod:`hilltop.transit.records`).
    ``stream``: bytes of unknown length, ended by the end marker and the trailer.
    ``resumable``: both list ``resume-v1``. ``idle_timeout``: seconds the peer may stay
    silent while we wait for it (None: no limit).
    """

    record_size: int
    hashed: bool
    cipher: Any
    v1_peer: bool = False
    stream: bool = False
    resumable: bool = False
    idle_timeout: float | None = None
    inline: bool = False
    """Both list ``inline-file-v1``: a small file may ride in its offer
    (:mod:`hilltop.transfer.inline`)."""


# --- actions (what the shell does) ------------------------------------------------------------
@value
class SendMessage:
    """An app message through the encrypted mailbox."""
    data: bytes


@value
class ReadMessage:
    """Deliver the peer's next app message (:meth:`TransferEngine.message`)."""


@value
class Connect:
    """Race the peer's transit hints; then :meth:`TransferEngine.channel_up`."""
    peer: offers.TransitMsg


@value
class ProvePrefix:
    """Hash the kept prefix (on a thread): the sender its first ``offset`` bytes, the
    receiver its kept partial; then :meth:`TransferEngine.proof_ready`."""
    offset: int
    salt: bytes


@value
class SendRecord:
    """A record on the channel. ``final``: the receiver's ack; a channel already gone is
    then only a warning (:meth:`TransferEngine.ack_unsent`)."""
    data: bytes
    final: bool = False


@value
class ReadRecord:
    """Deliver the peer's next record (:meth:`TransferEngine.record`), or its loss."""


@value
class PrepareSink:
    """Before the first byte: whether the sink hashes and may write around the page cache."""
    skip_hash: bool
    direct_io: bool


@value
class ResumeSinkAt:
    """The receiver continues its kept partial at ``offset`` (0: starts over)."""
    offset: int
    hashed: bool


@value
class StartBulk:
    """Move the data: the sender from ``offset`` (continuing ``hasher`` if any), the
    receiver ``size`` bytes (None: a stream, to its trailer), reporting
    :meth:`TransferEngine.moved` and :meth:`TransferEngine.held`. Then
    :meth:`TransferEngine.bulk_done` or :meth:`TransferEngine.failed`; a stall is the
    engine's :class:`Failed`, after which the shell stops the data path."""
    offset: int
    size: int | None
    hasher: Any = None


@value
class WriteSink:
    """The receiver writes an inline file's bytes (they came in the offer) to its sink."""
    data: bytes


@value
class FinishSink:
    """The receiver commits what arrived (a stream: ``length`` bytes, checked against
    ``sha256``); then :meth:`TransferEngine.sink_done`."""
    length: int | None = None
    sha256: str | None = None


# --- notices for the user ---------------------------------------------------------------
@value
class OfferArrived:
    """The sender's offer; the session decides (:meth:`TransferEngine.accept`, ``reject``)."""
    offer: offers.Offer


@value
class Connected:
    """The transit connection is up: ``description`` says which path won."""
    description: str


@value
class Resumed:
    """Where the data starts (0 and why, when the kept prefixes differ)."""
    offset: int
    why: str


@value
class Unacknowledged:
    """Every byte arrived, but the ack could not be sent."""
    why: str


@value
class Done:
    """Succeeded: the agreed SHA-256 (or None), or a stream's :class:`Trailer`."""
    result: Any


@value
class Failed:
    """The transfer failed with ``error``; nothing more comes."""
    error: BaseException


Action = (SendMessage | ReadMessage | Connect | ProvePrefix | SendRecord | ReadRecord
          | PrepareSink | ResumeSinkAt | StartBulk | WriteSink | FinishSink | OfferArrived
          | Connected | Resumed | Unacknowledged | Done | Failed)


# --- state ----------------------------------------------------------------------------------
class Stage(Enum):
    OFFERING = auto()  # sender: our transit and offer sent (or the inline offer), waiting
    WAITING_OFFER = auto()  # receiver: reading messages until the offer
    OFFERED = auto()  # receiver: the offer is with the session
    CONNECTING = auto()  # racing transit (a proof may be computed meanwhile)
    PROVING = auto()  # the kept prefix's proofs and the decision cross
    MOVING = auto()  # the bulk runs
    COMMITTING = auto()  # receiver: the sink commits
    CONFIRMING = auto()  # sender: waiting for the ack
    DONE = auto()
    FAILED = auto()


_TABLE: dict[tuple[Stage, str], Stage] = {
    (Stage.OFFERING, "accepted"): Stage.CONNECTING,
    (Stage.OFFERING, "finish"): Stage.DONE,  # an inline file acknowledged
    (Stage.WAITING_OFFER, "offer"): Stage.OFFERED,
    (Stage.OFFERED, "accept"): Stage.CONNECTING,
    (Stage.OFFERED, "commit"): Stage.COMMITTING,  # an inline file written
    (Stage.OFFERED, "finish"): Stage.DONE,
    (Stage.CONNECTING, "prove"): Stage.PROVING,
    (Stage.CONNECTING, "move"): Stage.MOVING,
    (Stage.PROVING, "move"): Stage.MOVING,
    (Stage.MOVING, "commit"): Stage.COMMITTING,
    (Stage.MOVING, "confirm"): Stage.CONFIRMING,
    (Stage.MOVING, "finish"): Stage.DONE,
    (Stage.COMMITTING, "finish"): Stage.DONE,
    (Stage.CONFIRMING, "finish"): Stage.DONE,
    **{(s, "fail"): Stage.FAILED for s in Stage if s not in (Stage.DONE, Stage.FAILED)},
}


@value(frozen=False)
class _Wait:
    """A record or message we wait for with a limit: what we are doing, and until when."""
    doing: str
    until: float | None


@value(frozen=False)
class TransferEngine:
    """One transfer, one side. Build with :meth:`sender` or :meth:`receiver`."""

    role: str
    plan: Plan
    stage: Stage
    offer: offers.Offer | None = None
    _actions: list[Action] = field(default_factory=list)
    _peer_transit: offers.TransitMsg | None = None
    _wait: _Wait | None = None
    _offer_deadline: float | None = None
    _size: int | None = None  # bytes on the wire (None: a stream)
    _resume_request: tuple[int, bytes] | None = None
    _source_resumable: bool = False
    _description: str = ""
    _channel_up: bool = False
    _our_proof: Any = None
    _their_proof: str | None = None
    _hasher: Any = None
    _resumed: bool = False
    _digest: Any = None
    _heard: bool = False
    _offer_timeout: float = 0.0
    _trailer: Trailer | None = None
    _idle_from: float | None = None  # MOVING: since when we wait on the peer (None: we don't)
    _held: BaseException | None = None  # receiver: a broken connection, while the grace runs
    _inline: bytes | None = None  # the inline file's bytes (sender: sent; receiver: offered)

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def sender(cls, plan: Plan, offer: offers.Offer, *, size: int | None,
               source_resumable: bool = False) -> TransferEngine:
        """Before the runner starts: :meth:`start_offer` once our hints are known. A stream
        to a peer without ``stream-v1`` fails here, before a byte is read."""
        return cls("sender", plan, Stage.OFFERING, offer, _size=size,
                   _source_resumable=source_resumable)

    @classmethod
    def receiver(cls, plan: Plan, now: float, *, offer_timeout: float | None = None
                 ) -> TransferEngine:
        """Reads messages until the sender's offer; with ``offer_timeout`` a sender silent
        that long fails with :class:`SilentPeerError` (nothing was received)."""
        engine = cls("receiver", plan, Stage.WAITING_OFFER)
        if offer_timeout is not None:
            engine._offer_deadline = now + offer_timeout
            engine._offer_timeout = offer_timeout
        engine._actions.append(ReadMessage())
        return engine

    # --- outputs -----------------------------------------------------------------------------
    def actions(self) -> list[Action]:
        """What to do now, in order (taken: a second call returns only newer ones)."""
        out, self._actions = self._actions, []
        return out

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must run next (None: nothing is timed)."""
        if self.stage in (Stage.DONE, Stage.FAILED):
            return None
        if self.stage is Stage.WAITING_OFFER:
            return self._offer_deadline
        if self._held is not None:
            return self._wait.until if self._wait is not None else None
        if self.stage is Stage.MOVING:
            idle = self.plan.idle_timeout
            if idle is None or self._idle_from is None:
                return None
            return self._idle_from + idle
        return self._wait.until if self._wait is not None else None

    @property
    def finished(self) -> bool:
        return self.stage in (Stage.DONE, Stage.FAILED)

    # --- inputs: both sides ------------------------------------------------------------------
    def handle_timer(self, now: float) -> None:
        deadline = self.next_deadline()
        if deadline is None or now < deadline:
            return
        if self.stage is Stage.WAITING_OFFER:
            self._fail(SilentPeerError(
                f"the sender said nothing for {self._offer_timeout:g} s after the code was "
                "confirmed: it may have given up and closed its side (nothing was received)"))
            return
        if self._held is not None:
            self._fail(self._held)  # the sender said nothing more: the connection broke
            return
        if self.stage is Stage.MOVING:
            why = (SEND_STALLED if self.role == "sender"
                   else STREAM_STALLED if self.plan.stream else RECEIVE_STALLED)
            self._fail(StalledError(f"nothing moved for {self.plan.idle_timeout:g} s: {why}"))
            return
        assert self._wait is not None
        self._fail(StalledError(
            f"the peer sent nothing for {self.plan.idle_timeout:g} s while "
            f"{self._wait.doing}, with the connection still open"))

    def message(self, data: bytes, now: float) -> None:
        """The peer's next app message (after :class:`ReadMessage`)."""
        if self.finished:
            return
        if self.role == "sender":
            self._sender_message(data)
        else:
            self._receiver_message(data)

    def message_failed(self, error: BaseException) -> None:
        """The mailbox could not deliver a message: the wormhole ended, or refused one
        (then the sender hears why, as official receivers answer)."""
        if self.finished:
            return
        if self.role == "receiver" and self.stage not in (Stage.WAITING_OFFER, Stage.OFFERED):
            self.mailbox_lost(error)  # the read kept open for the sender's error message
            return
        if isinstance(error, UnknownOfferError) and self.role == "receiver":
            self._send(offers.ErrorMsg(error.reply))
        self._fail(error)

    def mailbox_lost(self, error: BaseException) -> None:
        """The wormhole failed. Before the sender showed it heard our answer no byte will
        come (the answer went through the mailbox), so the receiver ends with the wormhole's
        own error instead of waiting for the race (issue 27 item 20); once data flows the
        mailbox is not needed."""
        if (self.role == "receiver" and not self._heard
                and self.stage in (Stage.CONNECTING, Stage.PROVING, Stage.MOVING)):
            self._fail(error)

    def channel_up(self, description: str, now: float) -> None:
        if self.finished:
            return
        self._channel_up = True
        self._description = description
        if self._resume_request is not None:
            self._stage("prove")
            if self.role == "sender":
                self._send_proof_if_ready(now)
            else:
                self._expect_record("proving the file it resumes", now)
        else:
            self._start_bulk(0, None, now)

    def proof_ready(self, proof: Any, now: float) -> None:
        """Our proof of the kept prefix: the sender's :class:`resume.PrefixProof`, the
        receiver's salted hash."""
        if self.finished:
            return
        self._our_proof = proof
        if self.role == "sender":
            self._send_proof_if_ready(now)
        else:
            self._decide_resume(now)

    def record(self, data: bytes, now: float) -> None:
        """The peer's next record (after :class:`ReadRecord`)."""
        if self.finished:
            return
        self._wait = None
        if self.stage is Stage.CONFIRMING:
            self._check_ack(data)
        elif self.stage is Stage.PROVING and self.role == "sender":
            assert self._resume_request is not None
            try:
                start = resume.parse_decision(data, self._resume_request[0])
            except HilltopError as err:
                self._fail(err)
                return
            if not start:
                self._emit(Resumed(0, "the receiver's partial differs from this file"))
                self._start_bulk(0, None, now)
            else:
                self._emit(Resumed(start, ""))
                self._resumed = True
                self._start_bulk(start, self._our_proof.whole, now)
        elif self.stage is Stage.PROVING:
            try:
                self._their_proof = resume.parse_proof(data)
            except HilltopError as err:
                self._fail(err)
                return
            self._heard = True
            self._decide_resume(now)

    def channel_lost(self, error: BaseException) -> None:
        """The channel failed while we waited for a record."""
        if self.finished:
            return
        wait, self._wait = self._wait, None
        if not isinstance(error, TransitError) or isinstance(error, StalledError):
            self._fail(error)
        elif self.stage is Stage.CONFIRMING:
            what = "stream" if self.plan.stream else "transfer"
            extra = "" if self.plan.stream else " (it may have refused what it got)"
            self._fail(TransferError(
                f"the receiver closed the connection without confirming the {what}{extra}"))
        else:
            doing = wait.doing if wait is not None else "transferring"
            self._fail(TransferError(f"the peer closed the connection while {doing}"))

    def moved(self, now: float) -> None:
        """The bulk moved bytes at ``now``: the receiver knows the sender heard its answer,
        and its wait for the next bytes starts over; the sender is no longer held back.
        Costs one comparison: the shell's timer finds the later deadline when it fires."""
        self._heard = True
        if self.stage is Stage.MOVING:
            self._idle_from = now if self.role == "receiver" else None

    def held(self, now: float) -> None:
        """The sender's bulk waits on the receiver (its window is full) from ``now``: the
        idle clock runs until :meth:`moved`. The receiver always waits on the sender."""
        if self.stage is Stage.MOVING and self._idle_from is None:
            self._idle_from = now

    def bulk_done(self, result: Any, now: float) -> None:
        """The data moved: the sender's digest (or None), the receiver's stream trailer
        (None for a sized transfer)."""
        if self.finished:
            return
        if self.role == "sender":
            self._digest = result
            if self.plan.stream:
                self._emit(SendRecord(END_MARKER))
                self._emit(SendRecord(Trailer(result[0], result[1]).to_record()))
                self._digest = result[1]
                self._trailer = Trailer(result[0], result[1])
            self._stage("confirm")
            self._expect_record("confirming the stream" if self.plan.stream
                                else "confirming the transfer", now)
        else:
            self._trailer = result
            self._stage("commit")
            if result is None:
                self._emit(FinishSink())
            else:
                self._emit(FinishSink(result.length, result.sha256))

    def sink_done(self, digest: str | None) -> None:
        """The receiver's sink committed the target; ack, and the transfer succeeded."""
        if self.finished:
            return
        if self._inline is not None:
            assert digest is not None  # an inline sink hashes (PrepareSink)
            self._send(offers.InlineAck(digest))
            self._stage("finish")
            self._emit(Done(digest))
            return
        ack: dict[str, str] = {"ack": "ok"}  # official receivers always include sha256
        if digest is not None:
            ack["sha256"] = digest
        self._emit(SendRecord(json.dumps(ack).encode("utf-8"), final=True))
        self._stage("finish")
        self._emit(Done(self._trailer if self.plan.stream else digest))

    def ack_unsent(self, why: str) -> None:
        """The channel went before our ack: the file stands (wormhole-william 1.0.6 hangs up
        this early sometimes), the user hears the sender may not know."""
        self._emit(Unacknowledged(why))

    def failed(self, error: BaseException, now: float | None = None, *,
               tell_peer: bool = True) -> None:
        """Something in the shell failed (the race, the bulk, the sink, a thread).

        A sender past the answer tells its receiver why in an ``error`` message (unless
        ``tell_peer`` is false: the user interrupted it), so a hilltop receiver names the
        reason instead of "the connection broke"; an official receiver sees the connection
        drop, which follows. A receiver whose connection broke mid-transfer (``now`` given)
        waits :data:`SENDER_REASON_GRACE` for that message."""
        if self.finished:
            return
        if self.role == "sender" and tell_peer and self.stage.name in _TELLING_STAGES:
            self._send(offers.ErrorMsg(reason_for_peer(error)))
        if self.role == "receiver" and self._inline is not None and self.stage is Stage.COMMITTING:
            # the sender waits for our answer in the mailbox: say why none comes
            self._send(offers.ErrorMsg(reason_for_peer(error)))
        if (self.role == "receiver" and now is not None and self.stage is Stage.MOVING
                and isinstance(error, TransitError) and not isinstance(error, StalledError)):
            self._held = error
            self._wait = _Wait("", now + SENDER_REASON_GRACE)
            return
        self._fail(error)

    # --- inputs: the sender -----------------------------------------------------------------
    def start_offer(self, our_transit: bytes, peer_features: frozenset[str],
                    v1_only_peer: bool) -> None:
        """Our ``transit`` then the offer; a stream to a peer without ``stream-v1`` is
        refused with the reason instead (it needs the size before the first byte)."""
        from hilltop.rendezvous import capabilities

        if self.plan.stream and capabilities.STREAM not in peer_features:
            self._send(offers.ErrorMsg(NOT_A_STREAM_PEER))
            who = "an official or wormhole-william client" if v1_only_peer else "an older hilltop"
            self._fail(UnsendableError(
                f"the receiver runs {who}, which needs the size before the first byte; a pipe "
                "has none: save the data to a file and send that file"))
            return
        self._emit(SendMessage(our_transit))
        assert self.offer is not None
        self._send(self.offer)
        self._emit(ReadMessage())

    def start_inline(self, data: bytes) -> None:
        """The file's bytes in the offer (both list ``inline-file-v1`` and
        :func:`hilltop.transfer.inline.chosen` said so); then wait for the receiver's
        :class:`~hilltop.transfer.offers.InlineAck`. No deadline, as for any answer: the
        receiver's user may be deciding."""
        assert isinstance(self.offer, offers.FileOffer) and len(data) == self.offer.filesize
        self._inline = data
        self._digest = hashlib.sha256(data).hexdigest()
        self._emit(Connected(MAILBOX_PATH))
        self._send(offers.InlineFileOffer(self.offer.filename, data))
        self._emit(ReadMessage())

    def _sender_message(self, data: bytes) -> None:
        try:
            msg = offers.parse_app_message(data)
        except ProtocolError as err:
            self._fail(err)
            return
        if self._inline is not None:
            self._inline_answer(msg)
        elif isinstance(msg, offers.ErrorMsg):
            self._fail(PeerRejectedError(f"the receiver refused the transfer: {msg.text}"))
        elif isinstance(msg, offers.TransitMsg):
            self._peer_transit = msg
            self._emit(ReadMessage())
        elif isinstance(msg, offers.Answer):
            if msg.kind != offers.FILE_ACK or not msg.ok:
                self._fail(PeerRejectedError("the receiver did not accept the file"))
            elif self._peer_transit is None:
                self._fail(ProtocolError(
                    "the receiver accepted without sending its transit hints"))
            else:
                self._accepted(msg)
        else:  # unknown keys from newer peers are skipped, as official peers do
            self._emit(ReadMessage())

    def _inline_answer(self, msg: offers.AppMessage) -> None:
        if isinstance(msg, offers.ErrorMsg):  # a refusal, or why it could not save the file
            self._fail(PeerRejectedError(f"the receiver refused the transfer: {msg.text}"))
        elif isinstance(msg, offers.InlineAck):
            if msg.sha256 != self._digest:
                self._fail(TransferError(
                    "the receiver saved different bytes than we sent (SHA-256 mismatch)"))
                return
            self._stage("finish")
            self._emit(Done(self._digest))
        elif isinstance(msg, offers.Answer | offers.TransitMsg):
            self._fail(ProtocolError("the receiver answered the file in our offer as if it "
                                     "were to come through transit"))
        else:
            self._emit(ReadMessage())

    def _accepted(self, answer: offers.Answer) -> None:
        assert self._peer_transit is not None
        if answer.resume is not None:
            offset, salt = answer.resume
            size = self._size or 0
            if not (self.plan.resumable and self._source_resumable and 0 < offset < size):
                self._fail(ProtocolError("the receiver asked to resume where it cannot"))
                return
            self._resume_request = answer.resume
            self._stage("accepted")
            self._emit(ProvePrefix(offset, salt))
        else:
            self._stage("accepted")
        self._emit(Connect(self._peer_transit))

    def _send_proof_if_ready(self, now: float) -> None:
        if self._channel_up and self._our_proof is not None and self._wait is None:
            self._emit(SendRecord(resume.proof_record(self._our_proof.proof())))
            self._expect_record("deciding where to resume", now)

    def _check_ack(self, record: bytes) -> None:
        """The receiver's final record: ``{"ack": "ok"}``, with ``sha256`` unless both skip
        it. Official senders treat ``sha256`` as optional and so do we; a resumed transfer
        must carry it: it is the one check covering the kept prefix and the new bytes."""
        try:
            ack = json.loads(record.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            self._fail(ProtocolError("the receiver's final acknowledgement is not JSON"))
            return
        if not isinstance(ack, dict) or ack.get("ack") != "ok":
            shown = repr(ack)  # the peer's words: repr escapes them; cut, a record may be 64 MiB
            shown = shown if len(shown) <= 200 else shown[:200] + "..."
            self._fail(TransferError(f"the receiver did not confirm the transfer: {shown}"))
            return
        theirs = ack.get("sha256")
        if self._resumed and theirs is None:
            self._fail(TransferError("the receiver did not confirm the resumed file's SHA-256"))
            return
        if self._digest is not None and theirs is not None and theirs != self._digest:
            self._fail(TransferError(
                "the receiver got different bytes than we sent (SHA-256 mismatch)"))
            return
        self._stage("finish")
        self._emit(Done(self._trailer if self.plan.stream else self._digest))

    # --- inputs: the receiver ----------------------------------------------------------------
    def _receiver_message(self, data: bytes) -> None:
        try:
            msg = offers.parse_app_message(data)
        except ProtocolError as err:
            if self.stage is not Stage.WAITING_OFFER:  # the transfer goes on without it
                self._emit(ReadMessage())
                return
            self._send(offers.ErrorMsg(getattr(err, "reply", str(err))))
            self._fail(err)
            return
        if self.stage is not Stage.WAITING_OFFER:  # accepted: only the sender's error counts
            if isinstance(msg, offers.ErrorMsg):
                held = f" ({self._held})" if self._held is not None else ""
                self._fail(TransferError(f"the sender failed: {msg.text}{held}"))
            else:
                self._emit(ReadMessage())
            return
        if isinstance(msg, offers.ErrorMsg):
            self._fail(PeerRejectedError(f"the sender abandoned the transfer: {msg.text}"))
        elif isinstance(msg, offers.TransitMsg):
            self._peer_transit = msg
            self._emit(ReadMessage())
        elif isinstance(msg, offers.TextOffer):
            self._offered(msg)
        elif isinstance(msg, offers.InlineFileOffer):
            if not self.plan.inline:
                self._send(offers.ErrorMsg(REJECTED))
                self._fail(ProtocolError(
                    "the sender put a file in its offer although this side did not list "
                    "inline-file-v1"))
            else:
                self._inline = msg.data
                self._offered(msg.file)
        elif isinstance(msg, offers.FileOffer | offers.DirectoryOffer | offers.StreamOffer
                             | offers.FilesOffer):
            if self._peer_transit is None:
                self._send(offers.ErrorMsg(REJECTED))
                self._fail(ProtocolError("the sender offered a file before its transit hints"))
            else:
                self._offered(msg)
        else:
            self._emit(ReadMessage())

    def _offered(self, offer: offers.Offer) -> None:
        self.offer = offer
        self._offer_deadline = None
        self._stage("offer")
        self._emit(OfferArrived(offer))

    @property
    def peer_transit(self) -> offers.TransitMsg | None:
        return self._peer_transit

    def accept_text(self) -> None:
        """A text offer was shown: ack it, as official receivers do."""
        self._send(offers.Answer(offers.MESSAGE_ACK))
        self._stage("finish")
        self._emit(Done(None))

    def reject(self, error: BaseException) -> None:
        """The session or the user refused the offer: the sender hears the official words."""
        if self.finished:
            return
        self._send(offers.ErrorMsg(REJECTED))
        self._fail(error)

    @property
    def inline(self) -> bool:
        """The receiver's offer came with its bytes: :meth:`accept_inline`, no transit."""
        return self._inline is not None

    def accept_inline(self, *, resume_offset: int = 0) -> None:
        """Take an inline file: into the sink as any file (hashed, for the ack; through the
        page cache), committed, then acknowledged (:meth:`sink_done`). A partial kept from an
        interrupted receive of the same name (``resume_offset``) is started over."""
        assert self._inline is not None
        self._size = len(self._inline)
        self._emit(PrepareSink(skip_hash=False, direct_io=False))
        if resume_offset:
            self._emit(ResumeSinkAt(0, True))
        self._emit(Connected(MAILBOX_PATH))
        self._stage("commit")
        self._emit(WriteSink(self._inline))
        self._emit(FinishSink())

    def accept(self, our_transit: bytes, *, size: int | None, resume_offset: int = 0,
               salt: bytes = b"") -> None:
        """Take the offer: ``size`` bytes on the wire (None: a stream); ``resume_offset``
        kept bytes of a partial, proven with ``salt`` (the shell's randomness)."""
        assert self._peer_transit is not None
        self._size = size
        plan = self.plan
        self._emit(PrepareSink(skip_hash=not plan.hashed and not resume_offset,
                               direct_io=not plan.v1_peer or plan.stream))
        self._emit(SendMessage(our_transit))
        request = (resume_offset, salt) if resume_offset else None
        self._resume_request = request
        self._send(offers.Answer(offers.FILE_ACK, resume=request))
        self._stage("accept")
        if request is not None:
            self._emit(ProvePrefix(resume_offset, salt))
        self._emit(Connect(self._peer_transit))
        self._emit(ReadMessage())  # a sender that fails says why (see failed)

    def _decide_resume(self, now: float) -> None:
        if self._their_proof is None or self._our_proof is None or self.finished:
            return
        assert self._resume_request is not None
        offset = self._resume_request[0]
        start = offset if hmac.compare_digest(self._their_proof, self._our_proof) else 0
        self._emit(ResumeSinkAt(start, self.plan.hashed))
        self._emit(SendRecord(resume.decision_record(start)))
        self._emit(Resumed(start, "" if start else "the partial differs from the sender's file"))
        self._start_bulk(start, None, now)

    # --- helpers --------------------------------------------------------------------------
    def _start_bulk(self, offset: int, hasher: Any, now: float) -> None:
        self._emit(Connected(self._description))
        self._stage("move")
        self._idle_from = now if self.role == "receiver" else None
        size = None if self._size is None else self._size - offset
        self._emit(StartBulk(offset, size, hasher))

    def _expect_record(self, doing: str, now: float) -> None:
        idle = self.plan.idle_timeout
        self._wait = _Wait(doing, None if idle is None else now + idle)
        self._emit(ReadRecord())

    def _send(self, msg: Any) -> None:
        self._emit(SendMessage(msg.to_wire()))

    def _emit(self, action: Action) -> None:
        self._actions.append(action)

    def _stage(self, event: str) -> None:
        self.stage = move(_TABLE, self.stage, event)

    def _fail(self, error: BaseException) -> None:
        self._wait = self._held = None
        self._stage("fail")
        self._emit(Failed(error))
