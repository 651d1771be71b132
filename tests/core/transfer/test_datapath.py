"""The bulk data path: worker thread, sealed frames both ways, flat buffers, O_DIRECT sink.

Loopback only; sizes are small so the tests stay fast, but they cross every boundary the big
transfers do (several reads per frame, frames per read, pauses, the last short record).
"""

from __future__ import annotations

import errno
import gc
import hashlib
import os
import threading
import time
from pathlib import Path

import pytest
import pytest_twisted
from loopback_transit import connected_pair, records_carry_on_then_close
from twisted.internet import defer

from hilltop._runtime import memory
from hilltop.errors import LocalError
from hilltop.rendezvous import capabilities
from hilltop.transfer import datapath, filesink, session
from hilltop.transfer.filesink import FileSink
from hilltop.transfer.offers import FileOffer
from hilltop.transfer.source import FileSource
from hilltop.transit import records
from hilltop.transit.pipeline import OrderedWorker


# --- OrderedWorker ------------------------------------------------------------------------------
@pytest_twisted.ensureDeferred
async def test_worker_keeps_order_and_runs_off_the_reactor_thread() -> None:
    from twisted.internet import reactor

    main = threading.get_ident()
    seen: list[int] = []
    done: defer.Deferred[None] = defer.Deferred()

    def work(n: int) -> int:
        assert threading.get_ident() != main
        return n * 2

    def got(value: int) -> None:
        assert threading.get_ident() == main
        seen.append(value)
        if len(seen) == 50:
            done.callback(None)

    worker = OrderedWorker(reactor, work, got, done.errback)
    worker.set_hungry(False)  # an idle worker must still report
    for i in range(50):
        worker.submit(i)
    await done
    assert seen == [i * 2 for i in range(50)]
    assert worker.pending == 0
    await worker.stop()


@pytest_twisted.ensureDeferred
async def test_worker_error_stops_later_items() -> None:
    from twisted.internet import reactor

    seen: list[int] = []
    failed: defer.Deferred[BaseException] = defer.Deferred()

    def work(n: int) -> int:
        if n == 3:
            raise ValueError("boom")
        return n

    worker = OrderedWorker(reactor, work, seen.append, failed.callback)
    for i in range(10):
        worker.submit(i)
    err = await failed
    assert isinstance(err, ValueError)
    await worker.stop()
    assert seen == [0, 1, 2]


@pytest_twisted.ensureDeferred
async def test_inline_worker_keeps_the_same_contract() -> None:
    from twisted.internet import reactor

    from hilltop.transit.pipeline import InlineWorker

    seen: list[int] = []
    errors: list[BaseException] = []

    def work(n: int) -> int:
        if n == 3:
            raise ValueError("boom")
        return n * 2

    worker = InlineWorker(reactor, work, seen.append, errors.append)
    for i in range(3):
        worker.submit(i)
    assert seen == [0, 2, 4] and worker.pending == 0  # delivered at once, in order
    worker.submit(3)
    assert isinstance(errors[0], ValueError) and worker.pending == 0
    with pytest.raises(RuntimeError):
        worker.submit(4)  # stopped by the error, as the threaded worker drops later items
    await worker.stop()


# --- end to end over loopback -------------------------------------------------------------------
AES = pytest.mark.skipif(capabilities.AES_RECORDS not in capabilities.FEATURES,
                         reason="no hardware AES here")


@pytest.mark.parametrize(("record_size", "hashed", "inline", "cipher"), [
    (records.V1_RECORD_SIZE, True, False, records.SECRETBOX),
    (records.V1_RECORD_SIZE, True, True, records.SECRETBOX),
    (records.BIG_RECORD_SIZE, True, False, records.SECRETBOX),
    (records.BIG_RECORD_SIZE, False, False, records.SECRETBOX),
    pytest.param(records.BIG_RECORD_SIZE, False, False, records.AES256GCM, marks=AES),
    pytest.param(records.BIG_RECORD_SIZE, True, False, records.AES256GCM, marks=AES)])
@pytest_twisted.ensureDeferred
async def test_file_crosses_intact(tmp_path: Path, record_size: int, hashed: bool,
                                   inline: bool, cipher: records.Cipher) -> None:
    from twisted.internet import reactor

    data = os.urandom(3 * records.BIG_RECORD_SIZE + 12345)
    (tmp_path / "src").write_bytes(data)
    s, r, cs, cr = await connected_pair(reactor, cipher)
    cs.stream.lend_socket = lambda: defer.succeed(None)  # the reactor path (bulkpump: its own)
    sink = FileSink(str(tmp_path / "dst"), len(data))
    if not hashed:
        sink.skip_hash()
    moved: list[int] = []
    with open(tmp_path / "src", "rb") as f:
        source = FileSource(FileOffer("src", len(data)), str(tmp_path / "src"), f)
        sent, _ = await defer.gatherResults([
            defer.ensureDeferred(datapath.send(reactor, cs, source, moved.append,
                                               record_size, hashed)),
            defer.ensureDeferred(
                datapath._RecordSink(reactor, cr, sink, len(data), lambda _n: None,
                                     inline=inline).run()),
        ])
    digest = sink.finish()
    expected = hashlib.sha256(data).hexdigest() if hashed else None
    assert sent == digest == expected
    assert (tmp_path / "dst").read_bytes() == data
    assert sum(moved) == len(data)
    await records_carry_on_then_close(s, r, cs, cr)


# --- the collector is calmed for the transfer only -----------------------------------------------
def test_calm_gc_gives_the_collector_back() -> None:
    assert gc.get_freeze_count() == 0
    with datapath.calm_gc():
        assert gc.get_freeze_count() > 0
        with datapath.calm_gc():  # a second transfer in the same process
            pass
        assert gc.get_freeze_count() > 0  # the first one is still running
    assert gc.get_freeze_count() == 0


def test_calm_gc_leaves_a_hosts_own_freeze_alone() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with datapath.calm_gc():
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_calm_gc_freezes_past_the_clis_startup_freeze(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's start-up freeze (hilltop._runtime.memory) is not a host's: what came
    after it (the reactor, autobahn, the transit machinery) is frozen for the bulk too."""
    monkeypatch.setattr(memory, "_startup_frozen", True)
    gc.freeze()
    try:
        at_startup = gc.get_freeze_count()
        kept = [[n] for n in range(1000)]  # objects made after the start-up
        with datapath.calm_gc():
            assert gc.get_freeze_count() >= at_startup + len(kept)
    finally:
        gc.unfreeze()


def test_calm_gc_gives_back_after_a_failure() -> None:
    with pytest.raises(ValueError), datapath.calm_gc():
        raise ValueError("the transfer broke")
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("reactor_path", [False, True])
@pytest_twisted.ensureDeferred
async def test_a_transfer_leaves_nothing_frozen(tmp_path: Path, reactor_path: bool) -> None:
    from twisted.internet import reactor

    data = os.urandom(records.BIG_RECORD_SIZE + 7)
    (tmp_path / "src").write_bytes(data)
    s, r, cs, cr = await connected_pair(reactor)
    if reactor_path:
        cs.stream.lend_socket = lambda: defer.succeed(None)
        cr.stream.lend_socket = lambda: defer.succeed(None)
    sink = FileSink(str(tmp_path / "dst"), len(data))
    frozen_midway: list[int] = []
    with open(tmp_path / "src", "rb") as f:
        source = FileSource(FileOffer("src", len(data)), str(tmp_path / "src"), f)
        await defer.gatherResults([
            defer.ensureDeferred(datapath.send(
                reactor, cs, source, lambda _n: frozen_midway.append(gc.get_freeze_count()),
                records.BIG_RECORD_SIZE)),
            defer.ensureDeferred(datapath.receive(reactor, cr, sink, len(data),
                                                  lambda _n: None, inline=False))])
    sink.finish()
    assert frozen_midway and all(frozen_midway)  # calmed while the bytes moved...
    assert gc.get_freeze_count() == 0  # ...and given back after
    await records_carry_on_then_close(s, r, cs, cr)


@pytest.mark.parametrize("inline", [False, True])
@pytest_twisted.ensureDeferred
async def test_sender_closing_midway_is_reported(tmp_path: Path, inline: bool) -> None:
    from twisted.internet import reactor

    s, r, cs, cr = await connected_pair(reactor)
    sink = FileSink(str(tmp_path / "dst"), 10 * records.BIG_RECORD_SIZE)
    cs.send_record(b"x" * 1000)
    cs.close()
    with pytest.raises(Exception, match="after 1000 of"):
        await datapath._RecordSink(reactor, cr, sink, 10 * records.BIG_RECORD_SIZE,
                                   lambda _n: None, inline=inline).run()
    sink.abort()
    assert os.listdir(tmp_path) == []
    await s.stop()
    await r.stop()


# --- what the two sides negotiate, and the final ack --------------------------------------------
class FakeWormhole:
    """Just the two things :func:`session.plan_for` reads."""

    def __init__(self, ours: dict, theirs: dict) -> None:
        self.app_versions = ours
        self._theirs = theirs

    async def get_peer_versions(self) -> dict:
        return self._theirs


HILLTOP = capabilities.advertisement("0.1.0", [], capabilities.FEATURES)
OFFICIAL: dict = {}  # what official 0.24 and wormhole-william send


# two hilltops use AES-256-GCM records where libsodium has hardware AES (both do, here)
BEST = (records.AES256GCM if capabilities.AES_RECORDS in capabilities.FEATURES
        else records.SECRETBOX)


@pytest.mark.parametrize(("ours", "theirs", "expected"), [
    (HILLTOP, HILLTOP, (records.BIG_RECORD_SIZE, False, BEST)),  # hilltop <-> hilltop: no hash
    (HILLTOP, OFFICIAL, (records.V1_RECORD_SIZE, True, records.SECRETBOX)),  # to official
    (OFFICIAL, HILLTOP, (records.V1_RECORD_SIZE, True, records.SECRETBOX)),  # looks official
])
@pytest_twisted.ensureDeferred
async def test_negotiation_both_ways(ours: dict, theirs: dict, expected: tuple) -> None:
    for a, b in ((ours, theirs), (theirs, ours)):
        plan = await session.plan_for(FakeWormhole(a, b), session.TransitOptions())  # type: ignore[arg-type]
        assert (plan.record_size, plan.hashed, plan.cipher) == expected


def test_skip_hash_only_before_data(tmp_path: Path) -> None:
    sink = FileSink(str(tmp_path / "f"), 6)
    sink.skip_hash()
    sink.write(b"abc")
    sink.write(b"def")
    assert sink.finish() is None
    assert (tmp_path / "f").read_bytes() == b"abcdef"
    late = FileSink(str(tmp_path / "g"), 6)
    late.write(b"abc")
    with pytest.raises(LocalError):
        late.skip_hash()
    late.abort()


# --- O_DIRECT sink ------------------------------------------------------------------------------
def test_direct_writes_odd_sizes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(filesink, "DIRECT_MIN_SIZE", 0)
    monkeypatch.setattr(filesink, "DIRECT_CHUNK", 64 * 1024)
    data = os.urandom(5 * 64 * 1024 + 777)
    sink = FileSink(str(tmp_path / "f"), len(data))
    pos = 0
    for step in (1, 4095, 70000, 3, 200000):
        sink.write(memoryview(data)[pos : pos + step])
        pos += step
    sink.write(data[pos:])
    assert sink.finish() == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "f").read_bytes() == data


def test_direct_io_is_chosen_at_the_first_write_and_can_be_declined(tmp_path: Path,
                                                                     monkeypatch) -> None:
    monkeypatch.setattr(filesink, "DIRECT_MIN_SIZE", 0)
    opened: list[int] = []
    real_open = filesink._DirectWriter.open
    monkeypatch.setattr(filesink._DirectWriter, "open",
                        classmethod(lambda cls, fd: (opened.append(fd), real_open(fd))[1]))
    data = os.urandom(3 * 4096 + 5)
    direct = FileSink(str(tmp_path / "direct"), len(data))
    assert opened == []  # not at creation: the caller may still decline
    direct.write(data[:4096])
    assert len(opened) == 1
    direct.write(data[4096:])
    direct.finish()
    plain = FileSink(str(tmp_path / "plain"), len(data))
    plain.without_direct_io()
    plain.write(data)
    assert len(opened) == 1 and plain._spool._direct is None
    plain.finish()
    assert (tmp_path / "direct").read_bytes() == (tmp_path / "plain").read_bytes() == data
    late = FileSink(str(tmp_path / "late"), len(data))
    late.write(data[:10])
    with pytest.raises(LocalError):
        late.without_direct_io()
    late.abort()


def test_direct_falls_back_when_the_filesystem_refuses(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(filesink, "DIRECT_MIN_SIZE", 0)
    monkeypatch.setattr(filesink, "DIRECT_CHUNK", 4096)
    real = filesink.write_all
    calls = {"n": 0}

    def picky(fd: int, data) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.EINVAL, "Invalid argument")
        real(fd, data)

    monkeypatch.setattr(filesink, "write_all", picky)
    data = os.urandom(4096 * 5 + 10)
    sink = FileSink(str(tmp_path / "f"), len(data))
    sink.write(data)
    sink.finish()
    assert (tmp_path / "f").read_bytes() == data


def test_direct_disk_full_is_clear(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(filesink, "DIRECT_MIN_SIZE", 0)
    monkeypatch.setattr(filesink, "DIRECT_CHUNK", 4096)

    def full(fd: int, data) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(filesink, "write_all", full)
    sink = FileSink(str(tmp_path / "f"), 10 * 4096)
    with pytest.raises(filesink.DiskFullError):
        for _ in range(10):
            sink.write(b"x" * 4096)
        sink.finish()
    assert os.listdir(tmp_path) == []


def test_source_readinto_counts_exactly(tmp_path: Path) -> None:
    data = os.urandom(100_000)
    (tmp_path / "f").write_bytes(data)
    with open(tmp_path / "f", "rb") as f:
        source = FileSource(FileOffer("f", 60_000), str(tmp_path / "f"), f)
        buffer = bytearray(16384)
        got = bytearray()
        while n := source.readinto(buffer):
            got += buffer[:n]
    assert bytes(got) == data[:60_000]  # a file that grew is sent only up to the offer


def test_page_cache_writes_start_write_back_as_they_go(tmp_path: Path, monkeypatch) -> None:
    """So the fsync before the ack waits for the last stretch only, not the whole file."""
    monkeypatch.setattr(filesink, "WRITEBACK_EVERY", 64 * 1024)
    asked: list[tuple[int, int, str]] = []
    real = os.posix_fadvise
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, start, n, advice: (
        asked.append((start, n, threading.current_thread().name)), real(fd, start, n, advice))[1])
    data = os.urandom(300 * 1024)
    sink = FileSink(str(tmp_path / "f"), len(data))
    sink.without_direct_io()
    for i in range(0, len(data), 10_000):
        sink.write(data[i : i + 10_000])
    # Requests go out at the first write end 64 KiB past the last: 70,000, 140,000, 210,000;
    # after that fewer than WRITEBACK_EVERY bytes are left and the step is WRITEBACK_LAST
    # (1 MiB, more than the file). The thread may merge requests but serves the latest.
    last_request = 210_000
    deadline = time.monotonic() + 10
    while not any(end == last_request for _s, end, _t in asked) and time.monotonic() < deadline:
        time.sleep(0.01)
    ends = [end for _start, end, _thread in asked]
    assert ends and ends[-1] == last_request, ends  # before finish(), which stops the thread
    sink.finish()
    assert (tmp_path / "f").read_bytes() == data
    assert len(ends) <= 3 and ends == sorted(ends) and ends[0] >= 64 * 1024
    assert all(b - a >= 64 * 1024 for a, b in zip(ends, ends[1:], strict=False))
    assert {start for start, _end, _thread in asked} == {0}
    assert threading.current_thread().name not in {thread for _s, _e, thread in asked}


def test_write_back_is_asked_for_more_often_at_the_end(tmp_path: Path, monkeypatch) -> None:
    """The fsync before the ack waits for what was never asked for: at most a
    WRITEBACK_LAST stretch, not a WRITEBACK_EVERY one."""
    monkeypatch.setattr(filesink, "WRITEBACK_EVERY", 64 * 1024)
    monkeypatch.setattr(filesink, "WRITEBACK_LAST", 16 * 1024)
    asked: list[int] = []
    real_ask = filesink._WriteBack.ask
    monkeypatch.setattr(filesink._WriteBack, "ask",
                        lambda self, end: (asked.append(end), real_ask(self, end))[1])
    data = os.urandom(300 * 1024)
    sink = FileSink(str(tmp_path / "f"), len(data))
    sink.without_direct_io()
    for i in range(0, len(data), 10_000):
        sink.write(data[i : i + 10_000])
    sink.finish()
    assert (tmp_path / "f").read_bytes() == data
    early = [end for end in asked if len(data) - end > 64 * 1024]
    late = [end for end in asked if len(data) - end <= 64 * 1024]
    assert all(b - a >= 64 * 1024 for a, b in zip(early, early[1:], strict=False))
    assert len(late) >= 3 and late[-1] > len(data) - 16 * 1024
    assert all(b - a < 16 * 1024 + 10_000 for a, b in zip(late, late[1:], strict=False))


@pytest.mark.parametrize("ending", ["finish", "abort"])
def test_slow_write_back_never_holds_up_writes(tmp_path: Path, monkeypatch, ending: str) -> None:
    """Starting write-back may sleep for a full disk queue (hundreds of ms): the receiving
    thread writes on meanwhile, and the file is closed only once the call has returned."""
    monkeypatch.setattr(filesink, "WRITEBACK_EVERY", 64 * 1024)
    entered, release = threading.Event(), threading.Event()
    fd_open_after: list[bool] = []

    writer = threading.current_thread()

    def slow_fadvise(fd: int, start: int, n: int, advice: int) -> None:
        if threading.current_thread() is writer:
            fd_open_after.append(False)  # on the writing thread: fails below, without a hang
            return
        entered.set()
        release.wait(10)
        try:
            os.fstat(fd)
            fd_open_after.append(True)
        except OSError:
            fd_open_after.append(False)

    monkeypatch.setattr(os, "posix_fadvise", slow_fadvise)
    data = os.urandom(300 * 1024)
    sink = FileSink(str(tmp_path / "f"), len(data))
    sink.without_direct_io()
    for i in range(0, len(data), 10_000):
        sink.write(data[i : i + 10_000])
    assert entered.wait(10)
    assert not release.is_set() and sink.received == len(data)  # every write went through
    threading.Timer(0.2, release.set).start()
    if ending == "finish":
        sink.finish()
        assert (tmp_path / "f").read_bytes() == data
    else:
        sink.abort()
        assert os.listdir(tmp_path) == []
    assert release.is_set() and fd_open_after == [True]
