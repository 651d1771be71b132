"""File-transfer v1 over transit: the two halves of one story, sender and receiver.

The order of messages is fixed by the official peers (see the protocol summary, section 4):
the sender's ``transit`` goes before its offer; the receiver answers with its own ``transit``
and ``file_ack``; then both race transit connections, the sender streams exactly the offered
number of bytes as records, and the receiver replies with one record carrying the SHA-256 of
what it got. The receiver only gives the file its real name once every byte has arrived
(the sink does that), so an interrupted transfer never leaves a complete-looking file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from twisted.internet import defer

from hilltop import transfer
from hilltop.api import Wormhole
from hilltop.errors import ProtocolError, TransferError, TransitError
from hilltop.filesink import DirectorySink, FileSink, StreamSink
from hilltop.filesource import CHUNK_SIZE, Source
from hilltop.hints import hints_to_wire, parse_hints, parse_transit_helper
from hilltop.runner import TransitConnection, TransitRunner

Progress = Callable[[int], None]
"""Called with the number of bytes just moved."""


@dataclass
class TransitOptions:
    """What the user chose about transit (``--transit-helper``, ``--no-listen``, ...)."""

    transit_helpers: Sequence[str] = ()
    no_listen: bool = False
    transports: Sequence[str] | None = None  # None: every installed transport
    no_plugins: bool = False  # only the transports shipped with hilltop (--no-plugins)
    local_addresses: Sequence[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def transit_key(w: Wormhole) -> bytes:
    """The transit key, from the wormhole key and our appid.

    Official 0.24 always uses the CLI appid here (its issue #339) while wormhole-william uses
    the configured one; the two agree on the default appid, which is what both CLIs use.
    """
    return w.derive_key(w.appid + "/transit-key")


def make_runner(reactor: Any, w: Wormhole, role: str, options: TransitOptions) -> TransitRunner:
    from hilltop.plugins import load_configured

    transports = load_configured(list(options.transports) if options.transports else None,
                                 no_plugins=options.no_plugins)
    tk = transit_key(w)
    extra = dict(options.extra)
    # the lan transport announces under a tag derived from the transit key, never the code
    extra["lan"] = {**extra.get("lan", {}), "transit_key": tk,
                    "mailbox_url": getattr(w, "relay_url", None)}
    return TransitRunner(
        reactor,
        role,  # type: ignore[arg-type]
        tk,
        transports=transports,
        transit_helpers=[parse_transit_helper(h) for h in options.transit_helpers if h],
        no_listen=options.no_listen,
        local_addresses=options.local_addresses,
        options=extra,
    )


def parse_peer_hints(runner: TransitRunner, msg: transfer.TransitMsg) -> list[Any]:
    """The peer's hints, keeping third-party hint types a loaded transport claims."""
    return parse_hints(list(msg.hints), runner.transports.hint_types())


def transit_message(runner: TransitRunner, hints: Sequence[Any]) -> bytes:
    types = dict.fromkeys(t for lt in runner.transports.loaded for t in lt.info.hint_types)
    abilities = [{"type": t} for t in types]
    return transfer.TransitMsg(tuple(abilities), tuple(hints_to_wire(hints))).to_wire()


# --- sender -----------------------------------------------------------------------------------
async def send_source(
    reactor: Any,
    w: Wormhole,
    source: Source,
    options: TransitOptions,
    *,
    on_connected: Callable[[str], None] = lambda _: None,
    progress: Progress = lambda _: None,
) -> str:
    """Offer ``source`` to the peer and stream it; returns the SHA-256 both sides agreed on."""
    runner = make_runner(reactor, w, "sender", options)
    try:
        hints = await runner.our_hints()
        w.send_message(transit_message(runner, hints))
        w.send_message(source.offer.to_wire())
        peer_transit = await _await_answer(w)
        conn = await runner.connect(parse_peer_hints(runner, peer_transit))
        try:
            on_connected(conn.description)
            digest = await _stream(reactor, conn, source, progress)
            try:
                ack = await conn.receive_record()
            except TransitError:
                raise TransferError(
                    "the receiver closed the connection without confirming the transfer "
                    "(it may have refused what it got)") from None
            _check_ack(ack, digest)
            return digest
        finally:
            await conn.close()
    finally:
        await runner.stop()


async def _await_answer(w: Wormhole) -> transfer.TransitMsg:
    peer_transit: transfer.TransitMsg | None = None
    while True:
        msg = transfer.parse_app_message(await w.get_message())
        if isinstance(msg, transfer.ErrorMsg):
            raise TransferError(f"the receiver refused the transfer: {msg.text}")
        if isinstance(msg, transfer.TransitMsg):
            peer_transit = msg
        elif isinstance(msg, transfer.Answer):
            if msg.kind != transfer.FILE_ACK or not msg.ok:
                raise TransferError("the receiver did not accept the file")
            if peer_transit is None:
                raise ProtocolError("the receiver accepted without sending its transit hints")
            return peer_transit
        # anything else (unknown keys from newer peers) is skipped, as official peers do


class _SourceProducer:
    """Feeds records to the connection while its socket buffer has room (a push producer)."""

    def __init__(self, conn: TransitConnection, source: Source, progress: Progress) -> None:
        self._conn = conn
        self._source = source
        self._progress = progress
        self._hash = hashlib.sha256()
        self._paused = False
        self._stopped = False
        self.done: defer.Deferred[str] = defer.Deferred()

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's interface
        self._paused = True

    def stopProducing(self) -> None:  # noqa: N802
        self._stopped = True
        if not self.done.called:
            self.done.errback(TransitError("the transit connection closed while sending"))

    def resumeProducing(self) -> None:  # noqa: N802
        self._paused = False
        while not self._paused and not self._stopped and not self.done.called:
            try:
                chunk = self._source.read(CHUNK_SIZE)
            except Exception as err:  # noqa: BLE001 - handed to the awaiting sender
                self._finish(err)
                return
            if not chunk:
                self._finish(None)
                return
            self._hash.update(chunk)
            self._conn.send_record(chunk)
            self._progress(len(chunk))

    def _finish(self, error: BaseException | None) -> None:
        self._conn.unregisterProducer()
        if error is None:
            self.done.callback(self._hash.hexdigest())
        else:
            self.done.errback(error)


async def _stream(reactor: Any, conn: TransitConnection, source: Source,
                  progress: Progress) -> str:
    producer = _SourceProducer(conn, source, progress)
    lost = conn.when_closed()
    conn.registerProducer(producer, True)
    reactor.callLater(0, producer.resumeProducing)
    lost.addCallback(lambda _: producer.stopProducing())
    return await producer.done


def _check_ack(record: bytes, digest: str) -> None:
    try:
        ack = json.loads(record.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("the receiver's final acknowledgement is not JSON") from None
    if not isinstance(ack, dict) or ack.get("ack") != "ok":
        raise TransferError(f"the receiver did not confirm the transfer: {ack!r}")
    theirs = ack.get("sha256")
    if theirs is not None and theirs != digest:
        raise TransferError("the receiver got different bytes than we sent (SHA-256 mismatch)")


# --- receiver ---------------------------------------------------------------------------------
Offer = transfer.TextOffer | transfer.FileOffer | transfer.DirectoryOffer


async def receive_offer(w: Wormhole) -> tuple[Offer, transfer.TransitMsg | None]:
    """Read app messages until the sender's offer; returns it with the sender's transit hints.

    A garbled or unknown offer is answered with the ``error`` text official receivers send,
    so the sender sees why, and raised here.
    """
    peer_transit: transfer.TransitMsg | None = None
    while True:
        try:
            msg = transfer.parse_app_message(await w.get_message())
        except ProtocolError as err:
            w.send_message(transfer.ErrorMsg(getattr(err, "reply", str(err))).to_wire())
            raise
        if isinstance(msg, transfer.ErrorMsg):
            raise TransferError(f"the sender abandoned the transfer: {msg.text}")
        if isinstance(msg, transfer.TransitMsg):
            peer_transit = msg
        elif isinstance(msg, transfer.TextOffer):
            return msg, peer_transit
        elif isinstance(msg, transfer.FileOffer | transfer.DirectoryOffer):
            if peer_transit is None:
                w.send_message(transfer.ErrorMsg("transfer rejected").to_wire())
                raise ProtocolError("the sender offered a file before its transit hints")
            return msg, peer_transit


def plan_target(offer: transfer.FileOffer | transfer.DirectoryOffer, output: str | None,
                cwd: str) -> str:
    """Where the offer will be saved; raises RejectedError if that is unsafe or cannot fit."""
    name = offer.filename if isinstance(offer, transfer.FileOffer) else offer.dirname
    target = transfer.target_path(name, output, cwd)
    parent = os.path.dirname(target)
    transfer.check_free_space(parent, transfer.space_needed(offer), transfer.free_space(parent))
    return target


def open_sink(offer: transfer.FileOffer | transfer.DirectoryOffer,
              target: str) -> FileSink | DirectorySink:
    if isinstance(offer, transfer.FileOffer):
        return FileSink(target, offer.filesize)
    return DirectorySink(target, offer)


def wire_size(offer: transfer.FileOffer | transfer.DirectoryOffer) -> int:
    """Bytes that will cross the transit connection for this offer."""
    return offer.filesize if isinstance(offer, transfer.FileOffer) else offer.zipsize


async def receive_into(
    reactor: Any,
    w: Wormhole,
    peer_transit: transfer.TransitMsg,
    sink: FileSink | DirectorySink | StreamSink,
    size: int,
    options: TransitOptions,
    *,
    on_connected: Callable[[str], None] = lambda _: None,
    progress: Progress = lambda _: None,
) -> str:
    """Accept the offer already checked by the caller, receive ``size`` bytes into ``sink``."""
    runner = make_runner(reactor, w, "receiver", options)
    try:
        hints = await runner.our_hints()
        w.send_message(transit_message(runner, hints))
        w.send_message(transfer.Answer(transfer.FILE_ACK).to_wire())
        conn = await runner.connect(parse_peer_hints(runner, peer_transit))
        try:
            on_connected(conn.description)
            while sink.received < size:
                try:
                    record = await conn.receive_record()
                except TransitError:
                    raise TransitError(
                        f"the connection to the sender broke after {sink.received} of {size} "
                        "bytes; nothing was saved"
                    ) from None
                sink.write(record)
                progress(len(record))
            digest = sink.finish()
            conn.send_record(json.dumps({"ack": "ok", "sha256": digest}).encode("utf-8"))
            return digest
        finally:
            await conn.close()
    except BaseException:
        sink.abort()
        raise
    finally:
        await runner.stop()
