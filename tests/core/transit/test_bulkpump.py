"""The bulk pump: frames found in a refilled buffer, and whole transfers on a thread of their own
over a real loopback TCP connection (sizes small, every boundary crossed: frames split over
reads, the buffer's wrap, bytes the reactor read before the thread took over, a dropped peer,
garbage, cancellation)."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from pathlib import Path

import pytest
import pytest_twisted
from hypothesis import given, settings
from hypothesis import strategies as st
from loopback_transit import EndlessSource, connected_pair, records_carry_on_then_close
from twisted.internet import defer, task

from hilltop.errors import BadRecordError, ProtocolError, TransitError
from hilltop.rendezvous import capabilities
from hilltop.transfer import datapath
from hilltop.transfer.filesink import FileSink
from hilltop.transfer.offers import FileOffer
from hilltop.transfer.source import FileSource
from hilltop.transit import bulkpump, records


def framed(payloads: list[bytes]) -> bytes:
    """Frames as the wire carries them (length prefix, then the frame's bytes)."""
    return b"".join(len(p).to_bytes(4, "big") + p for p in payloads)


def scan_in_chunks(wire: bytes, reads: list[int], buffer: int,
                   leftover: int = 0) -> list[bytes]:
    """Feed ``wire`` to a FrameScanner as socket reads of the given sizes would."""
    scanner = bulkpump.FrameScanner(buffer, wire[:leftover])
    pos, found, i = leftover, [], 0
    while True:
        found += [bytes(f) for f in scanner.frames()]
        if pos == len(wire):
            return found
        space = scanner.space()
        assert len(space) > 0
        n = min(len(space), max(1, reads[i % len(reads)]), len(wire) - pos)
        i += 1
        space[:n] = wire[pos : pos + n]
        scanner.filled(n)
        pos += n


FRAME = st.binary(min_size=records.NONCE_SIZE + records.TAG_SIZE, max_size=300)


@settings(max_examples=200, deadline=None)
@given(st.lists(FRAME, max_size=30), st.lists(st.integers(1, 700), min_size=1, max_size=20),
       st.integers(64, 1024), st.data())
def test_scanner_finds_every_frame_however_the_bytes_arrive(
        payloads: list[bytes], reads: list[int], buffer: int, data: st.DataObject) -> None:
    wire = framed(payloads)
    leftover = data.draw(st.integers(0, len(wire)))
    assert scan_in_chunks(wire, reads, buffer, leftover) == payloads


@settings(max_examples=200, deadline=None)
@given(st.lists(FRAME, min_size=1, max_size=30),
       st.lists(st.integers(1, 700), min_size=1, max_size=20), st.integers(64, 1024))
def test_the_wake_threshold_never_waits_for_bytes_that_will_not_come(
        payloads: list[bytes], reads: list[int], buffer: int) -> None:
    """Between reads, the receiver asks the kernel to wait for ``unread_at_least`` bytes: were
    that ever more than the wire still carries, the end of a transfer would stall."""
    wire = framed(payloads)
    size = sum(len(p) - records.OVERHEAD + records.LENGTH_SIZE for p in payloads)
    scanner = bulkpump.FrameScanner(buffer)
    pos = opened = i = 0
    while pos < len(wire):
        opened += sum(len(f) - records.OVERHEAD + records.LENGTH_SIZE for f in scanner.frames())
        left = bulkpump.unread_at_least(size - opened, scanner)
        assert left <= len(wire) - pos
        assert pos == len(wire) or bulkpump.wake_threshold(left) <= len(wire) - pos
        space = scanner.space()
        n = min(len(space), reads[i % len(reads)], len(wire) - pos)
        i += 1
        space[:n] = wire[pos : pos + n]
        scanner.filled(n)
        pos += n


def test_scanner_hands_out_views_of_its_buffer() -> None:
    scanner = bulkpump.FrameScanner(4096)
    frame = bytes(range(100))
    wire = framed([frame, frame])
    scanner.space()[: len(wire)] = wire
    scanner.filled(len(wire))
    first, second = scanner.frames()
    assert first.obj is scanner.buffer.obj and bytes(second) == frame  # opened where they lie


def test_scanner_grows_for_a_frame_bigger_than_its_buffer() -> None:
    big = os.urandom(5000)
    assert scan_in_chunks(framed([b"s" * 40, big, b"t" * 40]), [333], buffer=256) == [
        b"s" * 40, big, b"t" * 40]


@pytest.mark.parametrize("size", [0, records.NONCE_SIZE + records.TAG_SIZE - 1,
                                  records.MAX_RECORD_SIZE + 1])
def test_scanner_refuses_impossible_lengths(size: int) -> None:
    scanner = bulkpump.FrameScanner(1024, size.to_bytes(4, "big") + b"x" * 50)
    with pytest.raises(BadRecordError):
        scanner.frames()


# --- over loopback ------------------------------------------------------------------------------
def wake_threshold(conn) -> int:
    """The ``SO_RCVLOWAT`` of the socket the reactor reads ``conn`` from."""
    sock = conn.stream.transport.getHandle()
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)


async def _send_file(reactor, cs, path: Path, size: int, hashed: bool = True,
                     record_size: int = records.BIG_RECORD_SIZE):
    f = open(path, "rb")  # noqa: SIM115 - closed by the finally below
    source = FileSource(FileOffer(path.name, size), str(path), f)
    try:
        return await datapath.send(reactor, cs, source, lambda _n: None,
                                          record_size, hashed)
    finally:
        f.close()


AES = pytest.mark.skipif(capabilities.AES_RECORDS not in capabilities.FEATURES,
                         reason="no hardware AES here")


@pytest.mark.parametrize(("record_size", "cipher", "hashed"), [
    (records.V1_RECORD_SIZE, records.SECRETBOX, True),  # towards official and william
    (records.BIG_RECORD_SIZE, records.SECRETBOX, True),
    pytest.param(records.BIG_RECORD_SIZE, records.AES256GCM, False, marks=AES)])
@pytest.mark.parametrize("late", [False, True])
@pytest_twisted.ensureDeferred
async def test_both_sides_pump_and_records_carry_on(tmp_path: Path, late: bool, record_size: int,
                                                    cipher: records.Cipher, hashed: bool) -> None:
    """``late``: the receiver starts after the sender has filled the socket buffers, so the
    reactor has read (and must hand over) bytes before the thread takes the socket."""
    from twisted.internet import reactor

    data = os.urandom(9 * records.BIG_RECORD_SIZE + 777)
    (tmp_path / "src").write_bytes(data)
    s, r, cs, cr = await connected_pair(reactor, cipher)
    pumps: list[str] = []
    real_pump = bulkpump.Pump

    def counting_pump(*args, **kwargs):
        pumps.append(args[-1] if len(args) > 4 else kwargs["name"])
        return real_pump(*args, **kwargs)

    bulkpump.Pump = counting_pump  # type: ignore[assignment, misc]
    try:
        sending = defer.ensureDeferred(
            _send_file(reactor, cs, tmp_path / "src", len(data), hashed, record_size))
        if late:
            await task.deferLater(reactor, 0.3, lambda: None)
            assert cr._stashed > 0  # noqa: SLF001 - the reactor read ahead
        sink = FileSink(str(tmp_path / "dst"), len(data))
        if not hashed:
            sink.skip_hash()
        moved: list[int] = []
        await datapath.receive(reactor, cr, sink, len(data), moved.append,
                                         inline=False)
        sent = await sending
    finally:
        bulkpump.Pump = real_pump  # type: ignore[misc]
    assert sorted(pumps) == ["hilltop-receive", "hilltop-send"]
    assert sink.finish() == sent == (hashlib.sha256(data).hexdigest() if hashed else None)
    assert (tmp_path / "dst").read_bytes() == data
    assert sum(moved) == len(data)
    assert wake_threshold(cr) == 1  # else the reactor would not hear of small records
    await records_carry_on_then_close(s, r, cs, cr)  # the reactor has the socket back


@pytest_twisted.ensureDeferred
async def test_sender_hanging_up_midway_is_reported_and_nothing_kept(tmp_path: Path) -> None:
    from twisted.internet import reactor

    s, r, cs, cr = await connected_pair(reactor)
    size = 10 * records.BIG_RECORD_SIZE
    sink = FileSink(str(tmp_path / "dst"), size)
    cs.send_record(b"x" * 1000)
    cs.close()
    with pytest.raises(TransitError, match="after 1000 of"):
        await datapath.receive(reactor, cr, sink, size, lambda _n: None,
                                         inline=False)
    sink.abort()
    assert os.listdir(tmp_path) == []
    assert wake_threshold(cr) == 1
    await s.stop()
    await r.stop()


@pytest.mark.parametrize("garbage", ["bad-length", "bad-tag"])
@pytest_twisted.ensureDeferred
async def test_garbage_from_the_sender_is_refused(tmp_path: Path, garbage: str) -> None:
    from twisted.internet import reactor

    s, r, cs, cr = await connected_pair(reactor)
    size = 10 * records.BIG_RECORD_SIZE
    sink = FileSink(str(tmp_path / "dst"), size)
    cs.send_record(b"y" * 5000)
    if garbage == "bad-length":
        cs.stream.write((5).to_bytes(4, "big") + b"z" * 5)
    else:
        cs.stream.write(records.RecordSealer(b"k" * 32).seal(b"forged" * 100))
    with pytest.raises(ProtocolError, match="transit record"):
        await datapath.receive(reactor, cr, sink, size, lambda _n: None,
                                         inline=False)
    sink.abort()
    assert os.listdir(tmp_path) == []
    await cs.close()
    await s.stop()
    await r.stop()


@pytest_twisted.ensureDeferred
async def test_receiver_hanging_up_stops_the_sending_thread() -> None:
    from twisted.internet import reactor

    s, r, cs, cr = await connected_pair(reactor)
    sending = defer.ensureDeferred(datapath.send(
        reactor, cs, EndlessSource(), lambda _n: None, records.BIG_RECORD_SIZE, False))
    await task.deferLater(reactor, 0.2, lambda: None)
    cr.stream.transport.abortConnection()  # type: ignore[attr-defined]  # a hard hang-up
    with pytest.raises(TransitError):
        await sending
    assert not [t for t in threading.enumerate() if t.name == "hilltop-send"]
    await s.stop()
    await r.stop()


@pytest_twisted.ensureDeferred
async def test_cancelling_the_send_stops_the_thread() -> None:
    from twisted.internet import reactor

    s, r, cs, cr = await connected_pair(reactor)
    cr.pauseProducing()  # nobody reads: the thread blocks in send()
    sending = defer.ensureDeferred(datapath.send(
        reactor, cs, EndlessSource(), lambda _n: None, records.BIG_RECORD_SIZE, False))
    await task.deferLater(reactor, 0.3, lambda: None)
    sending.cancel()
    with pytest.raises(defer.CancelledError):
        await sending
    assert not [t for t in threading.enumerate() if t.name == "hilltop-send"]
    await cs.when_closed()
    await s.stop()
    await r.stop()


@pytest_twisted.ensureDeferred
async def test_streams_without_a_socket_keep_the_reactor_path(tmp_path: Path) -> None:
    """A plugin's stream (no ``lend_socket``) and a wrapped one both use the old pipeline."""
    from twisted.internet import reactor

    s, r, cs, cr = await connected_pair(reactor)
    lent = await cs.borrow_socket_for_sending()
    assert lent is not None  # the real one lends
    lent.close()
    for conn in (cs, cr):
        conn.stream.lend_socket = lambda: defer.succeed(None)  # type: ignore[attr-defined]
    assert await cs.borrow_socket_for_sending() is None
    assert await cr.borrow_socket_for_receiving() is None
    assert cr._paused is False  # noqa: SLF001 - reading was given back
    data = os.urandom(3 * records.BIG_RECORD_SIZE + 5)
    (tmp_path / "src").write_bytes(data)
    sink = FileSink(str(tmp_path / "dst"), len(data))
    sent, _ = await defer.gatherResults([
        defer.ensureDeferred(_send_file(reactor, cs, tmp_path / "src", len(data))),
        defer.ensureDeferred(datapath.receive(reactor, cr, sink, len(data),
                                                        lambda _n: None, inline=False))])
    assert sink.finish() == sent
    assert (tmp_path / "dst").read_bytes() == data
    await cr.close()
    await s.stop()
    await r.stop()


def unread(conn) -> int:
    """Bytes waiting in the receiving socket of ``conn`` (SIOCINQ)."""
    import fcntl
    import termios

    sock = conn.stream.transport.getHandle()
    buf = bytearray(4)
    fcntl.ioctl(sock.fileno(), termios.FIONREAD, buf)
    return int.from_bytes(buf, "little")


@pytest_twisted.ensureDeferred
async def test_a_sender_that_waits_to_be_read_before_its_last_bytes_is_not_kept_waiting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nagle's algorithm holds a sender's last partial segment until what went before is
    acknowledged, and an unread lone segment is acknowledged only 40 ms later: the receiving
    thread must read every arrival once the end is near (``FINAL_STRETCH``), not wait for
    ``WAKE_AFTER`` bytes that are held back. This sender, more patient than Nagle, sends its
    last records only once the receiver has read everything before them."""
    from twisted.internet import reactor

    monkeypatch.setattr(bulkpump, "WAIT_SECONDS", 30.0)  # no time-out rescues a stuck wait
    s, r, cs, cr = await connected_pair(reactor)
    record = b"n" * 16 * 1024  # what official senders send
    # The first phase starts above FINAL_STRETCH (the thread waits for WAKE_AFTER bytes); the
    # last two are each less than WAKE_AFTER and lie within the final stretch.
    phases = [bulkpump.FINAL_STRETCH // len(record) + 10, 10, 10]
    size = sum(phases) * len(record)
    assert size > bulkpump.FINAL_STRETCH
    assert 10 * (len(record) + 44) < bulkpump.WAKE_AFTER
    assert sum(phases[1:]) * (len(record) + 44) <= bulkpump.FINAL_STRETCH
    sink = FileSink(str(tmp_path / "dst"), size)
    receiving = defer.ensureDeferred(datapath.receive(
        reactor, cr, sink, size, lambda _n: None, inline=False))
    for count in phases[:-1]:
        for _ in range(count):
            cs.send_record(record)
        for _ in range(500):  # up to 5 s: the bytes sent must all be read
            await task.deferLater(reactor, 0.01, lambda: None)
            if unread(cr) == 0 and not receiving.called:
                break
        else:
            pytest.fail(f"{unread(cr)} bytes stayed unread: the thread waits for more")
    for _ in range(phases[-1]):
        cs.send_record(record)
    await receiving
    sink.finish()
    assert (tmp_path / "dst").read_bytes() == record * sum(phases)
    await cs.close()
    await s.stop()
    await r.stop()


@pytest.mark.parametrize("hashed", [True, False])
@pytest_twisted.ensureDeferred
async def test_an_empty_file_goes_even_when_the_receiver_has_already_acked_and_hung_up(
        tmp_path: Path, hashed: bool) -> None:
    """A receiver expecting 0 bytes acks and hangs up at once, possibly before the sender
    starts streaming (seen in CI: "the transit connection closed while sending" for an
    empty file between two hilltop peers). Streaming nothing must not turn that hang-up into
    an error, and the ack must still be there to read."""
    from twisted.internet import reactor

    (tmp_path / "empty").write_bytes(b"")
    s, r, cs, cr = await connected_pair(reactor)
    closed = cs.when_closed()
    cr.send_record(b"the ack")
    await cr.close()
    await closed
    digest = await _send_file(reactor, cs, tmp_path / "empty", 0, hashed)
    assert digest == (hashlib.sha256(b"").hexdigest() if hashed else None)
    assert await cs.receive_record() == b"the ack"
    await cs.close()
    await s.stop()
    await r.stop()


class _Addressed:
    """Just enough of a socket for :func:`bulkpump.same_host`."""

    def __init__(self, family: socket.AddressFamily, local: str, peer: str) -> None:
        self.family, self._local, self._peer = family, local, peer

    def getsockname(self) -> tuple[str, int]:
        return (self._local, 4000)

    def getpeername(self) -> tuple[str, int]:
        return (self._peer, 5000)


@pytest.mark.parametrize(("family", "local", "peer", "same"), [
    (socket.AF_INET, "127.0.0.1", "127.0.0.1", True),
    (socket.AF_INET, "127.0.0.1", "127.0.0.2", True),  # all of 127/8 is this machine
    (socket.AF_INET, "198.18.0.1", "198.18.0.1", True),  # our own address: routed over lo
    (socket.AF_INET, "198.18.0.1", "198.18.0.2", False),
    (socket.AF_INET6, "::1", "::1", True),
    (socket.AF_INET6, "::ffff:127.0.0.1", "::ffff:127.0.0.1", True),
    (socket.AF_INET6, "::ffff:198.18.0.1", "::ffff:198.18.0.9", False),
    (socket.AF_INET6, "fe80::1%eth0", "fe80::2%eth0", False),
    (socket.AF_INET6, "2001:db8::1", "not an address", False),
])
def test_same_host_is_loopback_or_our_own_address(family: socket.AddressFamily, local: str,
                                                  peer: str, same: bool) -> None:
    assert bulkpump.same_host(_Addressed(family, local, peer)) is same  # type: ignore[arg-type]


def test_a_unix_socket_is_the_same_host() -> None:
    a, b = socket.socketpair()
    with a, b:
        assert bulkpump.same_host(a)


class _WatchingSink(FileSink):
    """Notes the connection's wake threshold at every write the receiving thread makes."""

    def __init__(self, path: str, size: int, conn) -> None:  # noqa: ANN001
        super().__init__(path, size)
        self.seen: list[int] = []
        self._conn = conn

    def write(self, data) -> None:  # noqa: ANN001
        self.seen.append(wake_threshold(self._conn))
        super().write(data)


@pytest.mark.parametrize("same_host", [True, False])
@pytest_twisted.ensureDeferred
async def test_the_threshold_is_raised_only_for_a_sender_on_this_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same_host: bool) -> None:
    """Over a real round-trip time, waiting for WAKE_AFTER bytes stalled transfers (the
    sender stopped short of it until the wait timed out), so a sender elsewhere is read at
    every arrival; one on this machine wakes the thread only every WAKE_AFTER bytes."""
    from twisted.internet import reactor

    if not same_host:
        monkeypatch.setattr(bulkpump, "same_host", lambda _sock: False)
    s, r, cs, cr = await connected_pair(reactor)
    data = os.urandom(4 * bulkpump.FINAL_STRETCH)
    (tmp_path / "src").write_bytes(data)
    sending = defer.ensureDeferred(_send_file(reactor, cs, tmp_path / "src", len(data)))
    sink = _WatchingSink(str(tmp_path / "dst"), len(data), cr)
    await datapath.receive(reactor, cr, sink, len(data), lambda _n: None,
                                     inline=False)
    await sending
    sink.finish()
    assert (tmp_path / "dst").read_bytes() == data
    assert sink.seen
    if same_host:
        assert bulkpump.WAKE_AFTER in sink.seen
    else:
        assert set(sink.seen) == {1}
    await records_carry_on_then_close(s, r, cs, cr)


def test_the_wake_threshold_drops_to_every_byte_for_the_final_stretch() -> None:
    """A held-back tail is under one segment (64 KiB even on loopback): with more than
    ``FINAL_STRETCH`` left, ``WAKE_AFTER`` bytes always come without it."""
    assert bulkpump.FINAL_STRETCH >= bulkpump.WAKE_AFTER + 64 * 1024
    assert bulkpump.wake_threshold(bulkpump.FINAL_STRETCH + 1) == bulkpump.WAKE_AFTER
    for left in (bulkpump.FINAL_STRETCH, bulkpump.WAKE_AFTER, 1000, 1):
        assert bulkpump.wake_threshold(left) == 1


@pytest_twisted.ensureDeferred
async def test_progress_moves_on_a_slow_link(tmp_path: Path) -> None:
    """Reported by time as well as by bytes: 60 KB over 1.2 s must not be one report."""
    from twisted.internet import reactor

    s, r, cs, cr = await connected_pair(reactor)
    size = 12 * 5000
    sink = FileSink(str(tmp_path / "dst"), size)
    moved: list[int] = []
    receiving = defer.ensureDeferred(datapath.receive(
        reactor, cr, sink, size, moved.append, inline=False))
    for _ in range(12):
        cs.send_record(b"z" * 5000)
        await task.deferLater(reactor, 0.1, lambda: None)
    await receiving
    assert sum(moved) == size and len(moved) >= 3
    sink.finish()
    await cs.close()
    await s.stop()
    await r.stop()
