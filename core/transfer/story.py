"""File-transfer v1 over transit: the two halves of one story, sender and receiver.

The order of messages is fixed by the official peers (see the protocol summary, section 4):
the sender's ``transit`` goes before its offer; the receiver answers with its own ``transit``
and ``file_ack``; then both race transit connections, the sender streams exactly the offered
number of bytes as records, and the receiver replies with one record carrying the SHA-256 of
what it got. The receiver only gives the file its real name once every byte has arrived
(the sink does that), so an interrupted transfer never leaves a complete-looking file.

This module is the order of messages only: how the bytes flow is
:mod:`hilltop.transfer.datapath`, and where a received file may go :mod:`hilltop.transfer.targets`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from hilltop.errors import (
    PeerRejectedError,
    ProtocolError,
    SilentPeerError,
    StalledError,
    TransferError,
    TransitError,
    UnknownOfferError,
)
from hilltop.rendezvous import capabilities
from hilltop.transfer import datapath, offers, resume
from hilltop.transfer.datapath import DataPath, Progress
from hilltop.transit import records
from hilltop.transit.options import TransitOptions

T = TypeVar("T")

if TYPE_CHECKING:  # the transit machinery is imported when a transfer starts, not before:
    from hilltop.api import Wormhole
    from hilltop.transfer.filesink import FileSink, Sink
    from hilltop.transfer.foldersink import DirectorySink
    from hilltop.transfer.source import Source
    from hilltop.transit.connection import TransitConnection
    from hilltop.transit.runner import TransitRunner


def make_runner(reactor: Any, w: Wormhole, role: str, options: TransitOptions) -> TransitRunner:
    """The transit runner for this peer: our transports and settings."""
    from hilltop.hints import parse_transit_helper
    from hilltop.lan.settings import LanSettings, LanTags
    from hilltop.transit.plugins import load_configured
    from hilltop.transit.runner import TransitRunner

    transports = load_configured(list(options.transports) if options.transports else None,
                                 no_plugins=options.no_plugins)
    tk = w.transit_key()
    # the lan transport announces under tags derived from the transit key; it never sees the key
    settings = options.settings.updated(LanSettings, tags=LanTags.derive(tk, role),
                                        mailbox_url=getattr(w, "relay_url", None))
    if hasattr(w, "side_messages"):  # webrtc signals through the mailbox (hilltop peers only)
        from hilltop.webrtc.channel import MailboxSignalling
        from hilltop.webrtc.settings import WebRTCSettings

        settings = settings.updated(WebRTCSettings, signalling=MailboxSignalling(w))
    settings = settings.with_(punch_settings(w, options))
    return TransitRunner(
        reactor,
        role,  # type: ignore[arg-type]
        tk,
        transports=transports,
        transit_helpers=[parse_transit_helper(h) for h in options.transit_helpers if h],
        no_listen=options.no_listen,
        tor=options.tor,
        local_addresses=options.local_addresses,
        settings=settings,
        options=dict(options.plugin_options),
        on_attempt=options.on_attempt,
    )


def punch_settings(w: Wormhole, options: TransitOptions) -> Any:
    """Where the hole punch dials from and what it advertises: the mailbox connection's local
    address and what the server saw of it, or the STUN servers configured for WebRTC (one
    list of STUN servers for both, from ``--stun`` or ``[webrtc] stun``)."""
    from hilltop.transit.punch import PunchSettings, stun_endpoint
    from hilltop.webrtc.settings import WebRTCSettings

    seen = getattr(w, "your_address", None)
    local = getattr(w, "mailbox_local_address", None)
    webrtc = options.settings.get(WebRTCSettings) or WebRTCSettings()
    stun = tuple(stun_endpoint(s.urls) for s in webrtc.ice_servers if s.urls.startswith("stun:"))
    return PunchSettings(public=(seen.host, seen.port) if seen is not None else None,
                         local=local, stun=stun)


def parse_peer_hints(runner: TransitRunner, msg: offers.TransitMsg) -> list[Any]:
    """The peer's hints, keeping third-party hint types a loaded transport claims."""
    from hilltop.hints import parse_hints

    return parse_hints(list(msg.hints), runner.transports.hint_types())


async def connect_transit(runner: TransitRunner, peer: offers.TransitMsg,
                          cipher: records.Cipher) -> TransitConnection:
    """Race the peer's hints, then speak records over the winner with the cipher both sides
    agreed on (:func:`_negotiate`)."""
    from hilltop.transit.connection import TransitConnection

    won = await runner.connect(parse_peer_hints(runner, peer))
    return TransitConnection(won, runner.role, runner.transit_key, cipher)


def transit_message(runner: TransitRunner, hints: Sequence[Any]) -> bytes:
    from hilltop.hints import hints_to_wire

    types = dict.fromkeys(t for lt in runner.transports.loaded for t in lt.info.hint_types)
    for extension in ("webrtc-v1", "tcp-punch-v1"):  # say it only when we use it
        if not any(h.type == extension for h in hints):
            types.pop(extension, None)
    abilities = [{"type": t} for t in types]
    return offers.TransitMsg(tuple(abilities), tuple(hints_to_wire(list(hints)))).to_wire()


# --- sender -----------------------------------------------------------------------------------
async def send_source(
    reactor: Any,
    w: Wormhole,
    source: Source,
    options: TransitOptions,
    *,
    on_connected: Callable[[str], None] = lambda _: None,
    progress: Progress = lambda _: None,
    on_resume: Callable[[int, str], None] = lambda _offset, _why: None,
) -> str | None:
    """Offer ``source`` to the peer and stream it.

    Returns the SHA-256 (hex) both sides agreed on, or None when both are hilltop and agreed
    to skip it (:data:`capabilities.UNHASHED_ACK`: the records already authenticate it all).
    If the receiver asks to continue a kept partial (``resume-v1``), ``on_resume(offset,
    why)`` hears where the data starts (0 and why, when the receiver's prefix differs).
    """
    plan = await _negotiate(w)
    resumable = await may_resume(w)
    runner = make_runner(reactor, w, "sender", options)
    proving: Any = None
    try:
        hints = await runner.our_hints()
        w.send_message(transit_message(runner, hints))
        w.send_message(source.offer.to_wire())
        peer_transit, answer = await _await_accepting_answer(w)
        proving = _start_proof(resumable, source, answer)
        conn = await connect_transit(runner, peer_transit, plan.cipher)
        try:
            hasher = None
            idle = options.idle_timeout
            if proving is not None:
                assert answer.resume is not None
                hasher = await _send_proof(reactor, conn, source, answer.resume[0], proving,
                                           on_resume, idle)
            on_connected(conn.description)
            digest = await datapath.send(reactor, conn, source, progress, plan.record_size,
                                         plan.hashed, hasher=hasher, idle_timeout=idle)
            try:
                ack = await next_record(reactor, conn, idle, "confirming the transfer")
            except StalledError:
                raise
            except TransitError:
                raise TransferError(
                    "the receiver closed the connection without confirming the transfer "
                    "(it may have refused what it got)") from None
            _check_ack(ack, digest, resumed=hasher is not None)
        except BaseException:
            await conn.abort()
            raise
        await conn.close()
        return digest
    finally:
        if proving is not None:
            await _settled(proving)
        await runner.stop()


def _start_proof(resumable: bool, source: Source, answer: offers.Answer) -> Any:
    """The receiver asked to resume: check the request, start proving our prefix on a
    thread (it reads ``offset`` bytes) while transit connects. None if it did not ask."""
    if answer.resume is None:
        return None
    from twisted.internet import threads

    offset, salt = answer.resume
    if not resumable or not hasattr(source, "prove_prefix") or not 0 < offset < source.size:
        raise ProtocolError("the receiver asked to resume where it cannot")
    return threads.deferToThread(source.prove_prefix, offset, salt)


async def _send_proof(reactor: Any, conn: TransitConnection, source: Source, requested: int,
                      proving: Any, on_resume: Callable[[int, str], None],
                      idle: float | None) -> Any:
    """Prove our prefix; returns the salted hash to continue over the rest if the receiver
    continues (the ack then carries ``SHA-256(salt || file)``), else None (it starts over)."""
    proof = await proving
    conn.send_record(resume.proof_record(proof.proof()))
    start = resume.parse_decision(
        await _record(reactor, conn, "deciding where to resume", idle), requested)
    if not start:
        on_resume(0, "the receiver's partial differs from this file")
        return None
    source.skip_to(start)  # type: ignore[attr-defined]
    on_resume(start, "")
    return proof.whole


async def _record(reactor: Any, conn: TransitConnection, doing: str,
                  idle: float | None) -> bytes:
    try:
        return await next_record(reactor, conn, idle, doing)
    except StalledError:
        raise
    except TransitError:
        raise TransferError(f"the peer closed the connection while {doing}") from None


async def next_record(reactor: Any, conn: TransitConnection, idle: float | None,
                      doing: str) -> bytes:
    """The peer's next record, or :class:`StalledError` after ``idle`` seconds without it
    (a peer that went silent with the connection open: frozen, or cut off by the network)."""
    from hilltop._runtime.awaitable import within

    d = conn.receive_record()
    if idle is not None:
        within(d, idle, reactor, lambda: StalledError(
            f"the peer sent nothing for {idle:g} s while {doing}, "
            "with the connection still open"))
    return await d


async def _settled(d: Any) -> None:
    """Wait for a thread we started, whatever it ends with (its error was reported)."""
    with contextlib.suppress(BaseException):
        await d


async def may_resume(w: Wormhole) -> bool:
    """Both peers list ``resume-v1`` (:mod:`hilltop.transfer.resume`)."""
    ours = capabilities.from_app_versions(w.app_versions).features
    return resume.negotiated(ours, capabilities.from_app_versions(await w.get_peer_versions()))


async def _negotiate(w: Wormhole) -> DataPath:
    """The data path for this peer, from the features we and it advertised."""
    ours = capabilities.from_app_versions(w.app_versions).features
    peer = capabilities.from_app_versions(await w.get_peer_versions())
    return datapath.plan(ours, peer)


async def _await_answer(w: Wormhole) -> offers.TransitMsg:
    """The receiver's transit hints, once it accepted."""
    return (await _await_accepting_answer(w))[0]


async def _await_accepting_answer(w: Wormhole) -> tuple[offers.TransitMsg, offers.Answer]:
    """The receiver's transit hints and its accepting answer (which may ask to resume)."""
    peer_transit: offers.TransitMsg | None = None
    while True:
        msg = offers.parse_app_message(await w.get_message())
        if isinstance(msg, offers.ErrorMsg):
            raise PeerRejectedError(f"the receiver refused the transfer: {msg.text}")
        if isinstance(msg, offers.TransitMsg):
            peer_transit = msg
        elif isinstance(msg, offers.Answer):
            if msg.kind != offers.FILE_ACK or not msg.ok:
                raise PeerRejectedError("the receiver did not accept the file")
            if peer_transit is None:
                raise ProtocolError("the receiver accepted without sending its transit hints")
            return peer_transit, msg
        # anything else (unknown keys from newer peers) is skipped, as official peers do


def _check_ack(record: bytes, digest: str | None, *, resumed: bool = False) -> None:
    """The receiver's final record: ``{"ack": "ok"}``, with ``sha256`` unless both skip it.

    Official senders treat ``sha256`` as optional and so do we; when we did not hash there
    is nothing to compare it with. A resumed transfer must carry it: it is the one check
    that covers the kept prefix and the new bytes together.
    """
    try:
        ack = json.loads(record.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError("the receiver's final acknowledgement is not JSON") from None
    if not isinstance(ack, dict) or ack.get("ack") != "ok":
        shown = repr(ack)  # the peer's words: repr escapes them; cut, a record may be 64 MiB
        shown = shown if len(shown) <= 200 else shown[:200] + "..."
        raise TransferError(f"the receiver did not confirm the transfer: {shown}")
    theirs = ack.get("sha256")
    if resumed and theirs is None:
        raise TransferError("the receiver did not confirm the resumed file's SHA-256")
    if digest is not None and theirs is not None and theirs != digest:
        raise TransferError("the receiver got different bytes than we sent (SHA-256 mismatch)")


# --- receiver ---------------------------------------------------------------------------------
async def receive_offer(w: Wormhole, *, reactor: Any = None, idle_timeout: float | None = None
                        ) -> tuple[offers.Offer, offers.TransitMsg | None]:
    """Read app messages until the sender's offer; returns it with the sender's transit hints.

    A garbled or unknown offer is answered with the ``error`` text official receivers send,
    so the sender sees why, and raised here. With ``idle_timeout`` (and ``reactor``), a
    sender silent that long fails with :class:`SilentPeerError`: call this once the key is
    confirmed, when a sender's messages follow without anyone's say (unless its user was
    asked to compare verifiers, which ``idle_timeout`` must then allow for).
    """
    peer_transit: offers.TransitMsg | None = None
    while True:
        try:  # its errors (and the idle time-out's) end the wormhole: nothing to answer,
            data = await _message(w, reactor, idle_timeout)
        except UnknownOfferError as err:  # but for a message too big to read (Refused)
            w.send_message(offers.ErrorMsg(err.reply).to_wire())
            raise
        try:
            msg = offers.parse_app_message(data)
        except ProtocolError as err:
            w.send_message(offers.ErrorMsg(getattr(err, "reply", str(err))).to_wire())
            raise
        if isinstance(msg, offers.ErrorMsg):
            raise PeerRejectedError(f"the sender abandoned the transfer: {msg.text}")
        if isinstance(msg, offers.TransitMsg):
            peer_transit = msg
        elif isinstance(msg, offers.TextOffer):
            return msg, peer_transit
        elif isinstance(msg, offers.FileOffer | offers.DirectoryOffer | offers.StreamOffer
                             | offers.FilesOffer):
            if peer_transit is None:
                w.send_message(offers.ErrorMsg("transfer rejected").to_wire())
                raise ProtocolError("the sender offered a file before its transit hints")
            return msg, peer_transit


def _message(w: Wormhole, reactor: Any, idle: float | None) -> Any:
    """The peer's next mailbox message, failing with :class:`SilentPeerError` after ``idle``."""
    d = w.get_message()
    if idle is not None and reactor is not None:
        from hilltop._runtime.awaitable import within

        within(d, idle, reactor, lambda: SilentPeerError(
            f"the sender said nothing for {idle:g} s after the code was confirmed: it may "
            "have given up and closed its side (nothing was received)"))
    return d


def open_sink(offer: offers.FileOffer | offers.DirectoryOffer, target: str, *,
              resumable: bool = False, drop_kept: bool = False) -> FileSink | DirectorySink:
    """The sink for ``offer``. ``resumable`` (both peers list ``resume-v1``): a file's
    partial is kept if interrupted, and one kept before is continued. ``drop_kept``
    (``--no-resume``): a kept partial of that name is removed instead."""
    if isinstance(offer, offers.FileOffer):
        from hilltop.transfer.filesink import FileSink, ResumableFileSink

        if resumable and not drop_kept:
            return ResumableFileSink(target, offer.filename, offer.filesize)
        return FileSink(target, offer.filesize, drop_kept=drop_kept)
    from hilltop.transfer.foldersink import DirectorySink  # imports the zip reader: folders only

    return DirectorySink(target, offer)


def wire_size(offer: offers.FileOffer | offers.DirectoryOffer) -> int:
    """Bytes that will cross the transit connection for this offer."""
    return offer.filesize if isinstance(offer, offers.FileOffer) else offer.zipsize


async def receive_into(
    reactor: Any,
    w: Wormhole,
    peer_transit: offers.TransitMsg,
    sink: Sink,
    size: int,
    options: TransitOptions,
    *,
    on_connected: Callable[[str], None] = lambda _: None,
    progress: Progress = lambda _: None,
    on_unacknowledged: Callable[[str], None] = lambda _: None,
    on_resume: Callable[[int, str], None] = lambda _offset, _why: None,
) -> str | None:
    """Accept the offer already checked by the caller, receive ``size`` bytes into ``sink``.

    Returns the SHA-256 (hex) of what arrived, or None when both sides skip it (see
    :func:`records.whole_file_sha256`). Once every byte is in and the sink has committed the
    target, the transfer has succeeded for this side: if the sender hangs up before our ack
    reaches it (wormhole-william 1.0.6 sometimes does), the complete file stays and
    ``on_unacknowledged`` hears why.

    A :class:`~hilltop.transfer.filesink.ResumableFileSink` holding kept bytes asks the
    sender to continue after them (``resume-v1``); ``on_resume(offset, why)`` hears where
    the data starts (0 and why, when the sender's prefix differs).
    """
    runner: TransitRunner | None = None
    proving: Any = None
    try:
        plan = await _negotiate(w)
        runner = make_runner(reactor, w, "receiver", options)
        offset = getattr(sink, "resume_offset", 0)
        if not plan.hashed and not offset:
            sink.skip_hash()
        v1_sender = plan.record_size < records.BIG_RECORD_SIZE
        if v1_sender:  # paced by a single-threaded sender: see without_direct_io
            sink.without_direct_io()
        hints = await runner.our_hints()
        w.send_message(transit_message(runner, hints))
        request = None
        if offset:
            import os

            from twisted.internet import threads

            request = (offset, os.urandom(resume.SALT_SIZE))
            proving = threads.deferToThread(sink.prove_prefix, request[1])  # type: ignore
        w.send_message(offers.Answer(offers.FILE_ACK, resume=request).to_wire())
        heard = SenderHeard(progress)
        conn = await unless_mailbox_lost(w, connect_transit(runner, peer_transit, plan.cipher),
                                         heard)
        try:
            if proving is not None:
                offset = await _check_proof(reactor, conn, sink, proving, offset, plan.hashed,
                                            on_resume, options.idle_timeout)
                heard.sent = True
            on_connected(conn.description)
            await unless_mailbox_lost(w, datapath.receive(
                reactor, conn, sink, size - offset, heard, inline=v1_sender,
                idle_timeout=options.idle_timeout), heard)
            digest = sink.finish()
            try:
                conn.send_record(_ack(digest))
            except TransitError as err:
                on_unacknowledged(str(err))
        except BaseException:
            await conn.abort()
            raise
        await conn.close()
        return digest
    except BaseException:
        if proving is not None:
            await _settled(proving)  # before the sink closes the file it reads
        sink.abort()
        raise
    finally:
        if runner is not None:
            await runner.stop()


class SenderHeard:
    """Whether the sender has shown it heard our answer (its first byte, or its proof of a
    resumed prefix); wraps the transfer's progress callback to see the first byte."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self.sent = False

    def __call__(self, nbytes: int) -> None:
        self.sent = True
        self._progress(nbytes)


async def unless_mailbox_lost(w: Wormhole, work: Coroutine[Any, Any, T],
                              heard: SenderHeard) -> T:
    """``work``, ended by the wormhole's own error if the wormhole fails before the sender
    showed it heard our answer (``heard``).

    Why: the answer travels through the mailbox; when the server is gone for good
    (:attr:`hilltop.rendezvous.mailbox.Timeouts.reconnect`, ``--idle-timeout`` in the CLI)
    before the sender had it, no byte will come. The receiver waited for the transit race's
    120 s and then blamed transit, or, with an official sender whose connection came up,
    reported a sender that "stopped sending" (issue 27 item 20). Once data flows the mailbox
    is not needed: losing it then changes nothing.
    """
    from twisted.internet import defer

    d = defer.ensureDeferred(work)
    lost: list[BaseException] = []

    def closed(failure: Any) -> None:
        if not d.called and not heard.sent:
            lost.append(failure.value)
            d.cancel()

    w.when_closed().addErrback(closed)
    try:
        return await d
    except defer.CancelledError:
        if lost:
            raise lost[0] from None
        raise


async def _check_proof(reactor: Any, conn: TransitConnection, sink: Sink, proving: Any,
                       offset: int, hashed: bool, on_resume: Callable[[int, str], None],
                       idle: float | None) -> int:
    """Compare the sender's proof of the prefix with ours; tell it where to start."""
    import hmac

    theirs = resume.parse_proof(
        await _record(reactor, conn, "proving the file it resumes", idle))
    ours = await proving
    start = offset if hmac.compare_digest(theirs, ours) else 0
    sink.resume_at(start, hashed)  # type: ignore[attr-defined]
    conn.send_record(resume.decision_record(start))
    on_resume(start, "" if start else "the partial differs from the sender's file")
    return start


def _ack(digest: str | None) -> bytes:
    """The receiver's final record; official receivers always include ``sha256``."""
    ack: dict[str, str] = {"ack": "ok"}
    if digest is not None:
        ack["sha256"] = digest
    return json.dumps(ack).encode("utf-8")

