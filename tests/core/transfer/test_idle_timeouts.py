"""A peer that goes silent with its connection open: every wait it could leave open for ever
ends after ``idle_timeout`` with :class:`StalledError` or :class:`SilentPeerError`.

Found by issue 20: a sender that stopped mid-file (SIGSTOP, a cut link, a middlebox that dropped
the flow) left the receiver waiting for ever, and so did a wormhole-william sender that gave
up before its offer (the mailbox server does not tell us the peer closed its side).
"""

from __future__ import annotations

import hashlib
import io
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
from hilltop.transfer import datapath
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
    with pytest.raises(StalledError, match="the sender stopped sending"):
        await datapath.receive(reactor, cr, sink, size, lambda _n: None,
                               inline=path == "reactor-inline", idle_timeout=IDLE)
    assert IDLE <= time.monotonic() - started < BOUND
    sink.abort()
    assert os.listdir(tmp_path) == []
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
        await datapath.send(reactor, cs, EndlessSource(), lambda _n: None,
                            records.BIG_RECORD_SIZE, False, idle_timeout=IDLE)
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
        defer.ensureDeferred(datapath.receive(reactor, cr, sink, chunks * 100,
                                              lambda _n: None, inline=False,
                                              idle_timeout=IDLE))])
    sink.finish()
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
        await datapath.receive_until_end(reactor, cr, StreamSink(io.BytesIO(), UNKNOWN_SIZE),
                                        lambda _n: None, idle_timeout=IDLE)
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

    def readinto(self, buffer: memoryview | bytearray) -> int:
        self._reads += 1
        if self._reads == 1:
            buffer[:5] = b"hello"
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
    records_in: list[bytes] = []
    cr.set_record_receiver(records_in.append, lambda _err: None)
    digest = await datapath.send_until_end(reactor, cs, _SilentThenEnds(3 * IDLE),
                                           lambda _n: None, records.BIG_RECORD_SIZE, True,
                                           idle_timeout=IDLE)
    assert digest == hashlib.sha256(b"hello").hexdigest()
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
            await datapath.send_until_end(reactor, cs, source, lambda _n: None,
                                          records.BIG_RECORD_SIZE, False, idle_timeout=IDLE)
    finally:
        writer_done.set()
        source.cancel()
        source.close()
    assert IDLE <= time.monotonic() - started < BOUND + 2.0
    assert threads_end("hilltop-send")
    await cs.abort()
    await s.stop()
    await r.stop()
