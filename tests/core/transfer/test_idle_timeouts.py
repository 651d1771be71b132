"""A peer that goes silent with its connection open: every wait it could leave open for ever
ends after ``idle_timeout`` with :class:`StalledError` or :class:`SilentPeerError`.

Found by issue 20: a sender that stopped mid-file (SIGSTOP, a cut link, a middlebox that dropped
the flow) left the receiver waiting for ever, and so did a wormhole-william sender that gave
up before its offer (the mailbox server does not tell us the peer closed its side).

The data path only reports how the bulk moves; the engine keeps the clock (issue 28), so each
test runs the data path the way a transfer does: under the session shell and its engine.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
import time
from pathlib import Path

import pytest
import pytest_twisted
from loopback_transit import EndlessSource, connected_pair
from twisted.internet import defer

from hilltop._runtime.awaitable import within
from hilltop.errors import StalledError
from hilltop.transfer import engine as eng
from hilltop.transfer import offers, session
from hilltop.transfer.filesink import FileSink
from hilltop.transit import records

IDLE = 0.5
BOUND = 4.0
"""Seconds within which a stall of :data:`IDLE` must be reported (a loaded CI machine)."""


def threads_end(name: str) -> bool:
    """No thread called ``name`` is left within 2 s (one may still be returning when the
    reactor hears it is done)."""
    deadline = time.monotonic() + 2.0
    while [t for t in threading.enumerate() if t.name == name]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class _NoMailbox:
    """The wormhole of a transfer whose messages were all exchanged already."""

    app_versions: dict = {}

    def get_message(self) -> defer.Deferred[bytes]:
        return defer.Deferred()

    def when_closed(self) -> defer.Deferred[str]:
        return defer.Deferred()


def bulk(reactor, role: str, channel, *, size: int | None, source=None, sink=None,
         hashed: bool = True, inline: bool = False) -> defer.Deferred:
    """The outcome of one transfer's bulk (then, for a sender, its wait for the ack) on
    ``channel``, run by the session shell under a :class:`TransferEngine` whose idle
    limit is :data:`IDLE`: the stall is the engine's verdict, as in a real transfer."""
    plan = eng.Plan(records.BIG_RECORD_SIZE, hashed, records.SECRETBOX, v1_peer=inline,
                    stream=size is None, idle_timeout=IDLE)
    offer = offers.StreamOffer("x") if size is None else offers.FileOffer("f", size)
    if role == "sender":
        engine = eng.TransferEngine.sender(plan, offer, size=size)
    else:
        engine = eng.TransferEngine.receiver(plan, reactor.seconds())
        engine.actions()  # its first read of the mailbox: the offer came already
        engine.offer, engine._size = offer, size  # noqa: SLF001
    engine.stage = eng.Stage.CONNECTING
    shell = session._Shell(reactor, _NoMailbox(), engine, session.Listener())  # noqa: SLF001
    shell.source, shell.sink = source, sink
    shell.feed(lambda now: shell._up(channel, now))  # noqa: SLF001 - the race is won
    return defer.ensureDeferred(shell.wait())


def reactor_path(*conns) -> None:
    """Take the reactor-driven pipeline instead of the bulk pump's thread."""
    for conn in conns:
        conn.stream.lend_socket = lambda: defer.succeed(None)


@pytest.mark.parametrize("path", ["pump", "reactor", "reactor-inline"])
@pytest_twisted.ensureDeferred
async def test_a_sender_silent_mid_file_stalls_the_receive(tmp_path: Path, path: str) -> None:
    from twisted.internet import reactor

    s, r, cs, cr = await connected_pair(reactor)
    if path != "pump":
        reactor_path(cs, cr)
    size = 10 * records.BIG_RECORD_SIZE
    sink = FileSink(str(tmp_path / "dst"), size)
    cs.send_record(b"x" * 1000)  # then nothing, and the connection stays open
    started = time.monotonic()
    with pytest.raises(StalledError, match="nothing moved for 0.5 s: the sender stopped sending"):
        await bulk(reactor, "receiver", cr, size=size, sink=sink, inline=path == "reactor-inline")
    assert IDLE <= time.monotonic() - started < BOUND
    assert os.listdir(tmp_path) == []  # the shell aborted the sink: nothing that looks whole
    assert threads_end("hilltop-receive")
    await cs.close()
    await s.stop()
    await r.stop()


@pytest.mark.parametrize("path", ["pump", "reactor"])
@pytest_twisted.ensureDeferred
async def test_a_receiver_that_stops_reading_stalls_the_send(path: str) -> None:
    from twisted.internet import reactor

    s, r, cs, cr = await connected_pair(reactor)
    if path != "pump":
        reactor_path(cs, cr)
    cr.pauseProducing()  # never reads again: the socket buffers fill, then nothing moves
    started = time.monotonic()
    with pytest.raises(StalledError, match="the receiver stopped taking data"):
        await bulk(reactor, "sender", cs, size=EndlessSource.size, source=EndlessSource(),
                   hashed=False)
    assert IDLE <= time.monotonic() - started < BOUND + 2.0  # filling the buffers first
    assert threads_end("hilltop-send")
    await cs.abort()  # close() would wait to flush what the receiver never takes
    await s.stop()
    await r.stop()


@pytest_twisted.ensureDeferred
async def test_a_slow_but_moving_sender_is_not_a_stall(tmp_path: Path) -> None:
    """Each record comes after less than the time-out: the receive goes on to the end."""
    from twisted.internet import reactor, task

    s, r, cs, cr = await connected_pair(reactor)
    reactor_path(cs, cr)
    chunks = 6
    sink = FileSink(str(tmp_path / "dst"), chunks * 100)

    async def trickle() -> None:
        for _ in range(chunks):
            await task.deferLater(reactor, IDLE / 2, lambda: None)
            cs.send_record(b"y" * 100)

    await defer.gatherResults([
        defer.ensureDeferred(trickle()),
        bulk(reactor, "receiver", cr, size=chunks * 100, sink=sink)])
    assert await cs.receive_record()  # the ack: the receiver committed the file
    assert (tmp_path / "dst").read_bytes() == b"y" * 600
    await cs.close()
    await s.stop()
    await r.stop()


@pytest_twisted.ensureDeferred
async def test_a_cancel_from_elsewhere_is_not_a_time_out() -> None:
    """Ctrl-C cancels what we wait for: that must stay a cancel (exit 130), not a stall."""
    from twisted.internet import reactor

    d: defer.Deferred[None] = defer.Deferred()
    within(d, 30.0, reactor, lambda: StalledError("no"))
    d.cancel()
    with pytest.raises(defer.CancelledError):
        await d


# --- streams (stream-v1: ``send -``, a FIFO): the same limit in both directions ---------------
@pytest.mark.parametrize("path", ["pump", "reactor"])
@pytest_twisted.ensureDeferred
async def test_a_stream_sender_that_sends_nothing_stalls_the_receive(path: str) -> None:
    """Issue 27 item 18: a stream sender that connected and then said nothing held its
    receiver for ever (no idle limit on the stream's receive)."""
    from twisted.internet import reactor

    from hilltop.transfer.filesink import UNKNOWN_SIZE, StreamSink

    s, r, cs, cr = await connected_pair(reactor)
    if path != "pump":
        reactor_path(cs, cr)
    started = time.monotonic()
    with pytest.raises(StalledError, match="the sender sent nothing more"):
        await bulk(reactor, "receiver", cr, size=None,
                   sink=StreamSink(io.BytesIO(), UNKNOWN_SIZE))
    assert IDLE <= time.monotonic() - started < BOUND
    assert threads_end("hilltop-receive")
    await cs.close()
    await s.stop()
    await r.stop()


class _SilentThenEnds:
    """A pipe whose producer says one thing, is silent for ``pause`` s, then ends."""

    def __init__(self, pause: float) -> None:
        self._pause = pause
        self._reads = 0
        self.position = 0

    def readinto(self, buffer: memoryview | bytearray) -> int:
        self._reads += 1
        if self._reads == 1:
            buffer[:5] = b"hello"
            self.position = 5
            return 5
        if self._reads == 2:
            time.sleep(self._pause)
        return 0


@pytest.mark.parametrize("path", ["pump", "reactor"])
@pytest_twisted.ensureDeferred
async def test_a_silent_pipe_is_not_the_receivers_stall(path: str) -> None:
    """The sending side's limit counts only time the receiver holds us back: a producer with
    nothing to say for longer than the limit is no stall of the receiver's."""
    from twisted.internet import reactor

    s, r, cs, cr = await connected_pair(reactor)
    if path != "pump":
        reactor_path(cs, cr)
    digest = hashlib.sha256(b"hello").hexdigest()

    async def receive_and_ack() -> None:
        while await cr.receive_record() != b"":  # the data, then the end marker
            pass
        await cr.receive_record()  # the trailer
        cr.send_record(json.dumps({"ack": "ok", "sha256": digest}).encode())

    acked = defer.ensureDeferred(receive_and_ack())
    trailer = await bulk(reactor, "sender", cs, size=None, source=_SilentThenEnds(3 * IDLE))
    await acked
    assert trailer.length == 5 and trailer.sha256 == digest
    await cs.close()
    await s.stop()
    await r.stop()


@pytest.mark.parametrize("path", ["pump", "reactor"])
@pytest_twisted.ensureDeferred
async def test_a_receiver_that_stops_reading_stalls_a_stream_send(tmp_path: Path,
                                                                  path: str) -> None:
    """``send FIFO`` into a receiver that stopped reading: the stream's send has the limit."""
    from twisted.internet import reactor

    from hilltop.transfer.pipesource import StreamSource

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer_done = threading.Event()

    def produce() -> None:  # as fast as the pipe takes it, until the reader gives up
        try:
            with open(fifo, "wb") as f:
                while not writer_done.is_set():
                    f.write(b"z" * 65536)
        except OSError:
            pass

    threading.Thread(target=produce, daemon=True).start()
    s, r, cs, cr = await connected_pair(reactor)
    if path != "pump":
        reactor_path(cs, cr)
    cr.pauseProducing()
    source = StreamSource(str(fifo))
    started = time.monotonic()
    try:
        with pytest.raises(StalledError, match="the receiver stopped taking data"):
            await bulk(reactor, "sender", cs, size=None, source=source, hashed=False)
    finally:
        writer_done.set()
        source.cancel()
        source.close()
    assert IDLE <= time.monotonic() - started < BOUND + 2.0
    assert threads_end("hilltop-send")
    await cs.abort()
    await s.stop()
    await r.stop()
