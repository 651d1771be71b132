"""A stream of unknown length over a real loopback transit connection: both sending paths,
the end marker and trailer, an empty stream, a stream cut short, a record after the end; and
the stream source's reads from a pipe."""

from __future__ import annotations

import hashlib
import io
import os
import threading

import pytest
import pytest_twisted
from loopback_transit import connected_pair
from twisted.internet import defer

from hilltop.errors import ProtocolError, TransitError, UnsendableError
from hilltop.transfer import datapath, pipesource
from hilltop.transfer.filesink import UNKNOWN_SIZE, StreamSink
from hilltop.transfer.streamcodec import END_MARKER, Trailer
from hilltop.transit import bulkpump, records


class Chunks:
    """A readable that hands out the given chunks one read at a time (a pipe's reads)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = list(chunks)

    def readinto(self, buffer: memoryview | bytearray) -> int:
        if not self._chunks:
            return 0
        chunk = self._chunks.pop(0)
        assert len(chunk) <= len(buffer)
        buffer[: len(chunk)] = chunk
        return len(chunk)


async def send_stream_records(reactor, conn, chunks: list[bytes]) -> Trailer:  # noqa: ANN001
    digest = await datapath.send_until_end(reactor, conn, Chunks(chunks), lambda _n: None,
                                           records.BIG_RECORD_SIZE, True)
    trailer = Trailer(sum(map(len, chunks)), digest)
    conn.send_record(END_MARKER)
    conn.send_record(trailer.to_record())
    return trailer


@pytest.mark.parametrize("receiver_thread", [True, False], ids=["r-bulkpump", "r-reactor"])
@pytest.mark.parametrize("own_thread", [True, False], ids=["bulkpump", "reactor"])
@pytest.mark.parametrize("sizes", [[], [1], [5000, 1, records.BIG_RECORD_SIZE, 77] * 5],
                         ids=["empty", "one-byte", "mixed"])
@pytest_twisted.ensureDeferred
async def test_a_stream_crosses_intact_and_ends_with_its_trailer(
        own_thread: bool, receiver_thread: bool, sizes: list[int]) -> None:
    from twisted.internet import reactor

    chunks = [os.urandom(n) for n in sizes]
    s, r, cs, cr = await connected_pair(reactor)
    if not own_thread:
        cs.stream.lend_socket = lambda: defer.succeed(None)
    if not receiver_thread:
        cr.stream.lend_socket = lambda: defer.succeed(None)
    out = io.BytesIO()
    sink = StreamSink(out, UNKNOWN_SIZE)
    moved: list[int] = []
    sent, got = await defer.gatherResults([
        defer.ensureDeferred(send_stream_records(reactor, cs, chunks)),
        defer.ensureDeferred(datapath.receive_until_end(reactor, cr, sink, moved.append)),
    ])
    data = b"".join(chunks)
    assert got == sent == Trailer(len(data), hashlib.sha256(data).hexdigest())
    sink.end_at(got.length)
    assert sink.finish(got.sha256) == got.sha256
    assert out.getvalue() == data and sum(moved) == len(data)
    for c in (cs, cr):
        await c.close()
    await s.stop()
    await r.stop()


PATHS = pytest.mark.parametrize("receiver_thread", [True, False],
                                ids=["r-bulkpump", "r-reactor"])


async def pair(reactor, receiver_thread: bool):  # noqa: ANN001, ANN201
    s, r, cs, cr = await connected_pair(reactor)
    if not receiver_thread:
        cr.stream.lend_socket = lambda: defer.succeed(None)
    return s, r, cs, cr


@PATHS
@pytest_twisted.ensureDeferred
async def test_a_stream_cut_before_its_end_marker_is_incomplete(receiver_thread: bool) -> None:
    from twisted.internet import reactor

    s, r, cs, cr = await pair(reactor, receiver_thread)
    cs.send_record(b"x" * 1000)
    cs.send_record(b"y" * 10)
    cs.close()
    sink = StreamSink(io.BytesIO(), UNKNOWN_SIZE)
    with pytest.raises(TransitError, match="after 1010 bytes, before the end of its stream"):
        await datapath.receive_until_end(reactor, cr, sink, lambda _n: None)
    await s.stop()
    await r.stop()


@PATHS
@pytest_twisted.ensureDeferred
async def test_a_stream_cut_between_marker_and_trailer_is_incomplete(
        receiver_thread: bool) -> None:
    from twisted.internet import reactor

    s, r, cs, cr = await pair(reactor, receiver_thread)
    cs.send_record(b"x" * 10)
    cs.send_record(END_MARKER)
    cs.close()
    with pytest.raises(TransitError, match="incomplete"):
        await datapath.receive_until_end(reactor, cr, StreamSink(io.BytesIO(), UNKNOWN_SIZE),
                                            lambda _n: None)
    await s.stop()
    await r.stop()


@pytest.mark.parametrize(("tail", "match"), [
    ([Trailer(4).to_record()], "4 bytes, but 3 arrived"),
    ([b"not json"], "not JSON"),
])
@PATHS
@pytest_twisted.ensureDeferred
async def test_a_bad_end_is_a_protocol_error(tail: list[bytes], match: str,
                                             receiver_thread: bool) -> None:
    from twisted.internet import reactor

    s, r, cs, cr = await pair(reactor, receiver_thread)
    for record in [b"abc", END_MARKER, *tail]:
        cs.send_record(record)
    with pytest.raises(ProtocolError, match=match):
        await datapath.receive_until_end(reactor, cr, StreamSink(io.BytesIO(), UNKNOWN_SIZE),
                                            lambda _n: None)
    for c in (cs, cr):
        await c.close()
    await s.stop()
    await r.stop()


# --- the source ----------------------------------------------------------------------------------
def test_stream_source_reads_a_fifo_and_counts(tmp_path) -> None:
    fifo = tmp_path / "in"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(b"abc" * 1000,))
    writer.start()
    with pipesource.StreamSource(str(fifo)) as source:
        assert source.offer.name == "in"
        buffer = bytearray(1 << 16)
        got = b""
        while n := source.readinto(buffer):
            got += buffer[:n]
    writer.join()
    assert got == b"abc" * 1000 and source.position == 3000


def test_stream_source_batches_only_what_a_pipe_has_ready(tmp_path) -> None:
    """A batch holds what the pipe had; the sealer does not wait to fill it (tail -f)."""
    fifo = tmp_path / "in"
    os.mkfifo(fifo)
    opened = threading.Event()
    release = threading.Event()

    def write() -> None:
        with open(fifo, "wb", buffering=0) as f:
            opened.set()
            f.write(b"first")
            release.wait(10)
            f.write(b"second")

    writer = threading.Thread(target=write)
    writer.start()
    with pipesource.StreamSource(str(fifo), "x") as source:
        sealer = bulkpump.BatchSealer(source, records.RecordSealer(bytes(32)), 1024, 8192, None)
        frames, plain = sealer.next_batch()  # returns after "first": nothing more is ready
        assert plain == 5
        release.set()
        frames, plain = sealer.next_batch()
        assert plain == 6
    writer.join()


def test_stream_source_gives_up_when_cancelled(tmp_path) -> None:
    fifo = tmp_path / "in"
    os.mkfifo(fifo)
    holder = threading.Thread(target=lambda: open(fifo, "wb").close())  # noqa: SIM115
    holder.start()
    read_fd = os.open(fifo, os.O_RDONLY)
    holder.join()
    write_fd = os.open(fifo, os.O_WRONLY)  # kept open and silent
    try:
        with pipesource.StreamSource(f"/proc/self/fd/{read_fd}", "x") as source:
            source.cancel()
            with pytest.raises(TransitError, match="closed while sending"):
                source.readinto(bytearray(10))
    finally:
        os.close(write_fd)
        os.close(read_fd)


def test_stream_source_names() -> None:
    assert pipesource.StreamSource("-").offer.name == "stdin"
    assert pipesource.StreamSource("-", "dump.sql").offer.name == "dump.sql"
    with pytest.raises(UnsendableError, match="at most 1024"):
        pipesource.StreamSource("-", "n" * 1025)
    with pytest.raises(UnsendableError, match="not valid text"):
        pipesource.StreamSource("-", "bad\udcff")
