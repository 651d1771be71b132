"""Resume between two hilltop peers (``resume-v1``): an interrupted receive keeps its hidden
partial and a record, and a new send of the same file with a new code sends only the rest.

Every transfer here goes through the transit relay behind :class:`CountingProxy`, a
throttled TCP forwarder in this process: the throttle makes "about half" reliable on a
loaded machine (we kill when the partial on disk reaches half), and its byte counter is the
measure of what crossed the second time. Both peers use ``--no-listen``, so the relay is the
only way between them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from transferkit import CountingProxy, digest, random_file

from hilltop.rendezvous.capabilities import BIG_RECORDS, FEATURES
from hilltop.transfer.filesink import ResumableFileSink

if TYPE_CHECKING:
    from conftest import Peer, Peers, Result

HERE = Path(__file__).parent

BIG = 500 * 1000 * 1000
"""The acceptance's 500 MB file."""
SMALL = 40 * 1000 * 1000
"""For the cases that start from zero: the same decisions, a shorter wait."""
RATE = 40 * 1000 * 1000
"""Bytes per second the proxy lets through each connection (a 500 MB half takes ~6 s)."""
TIMEOUT = 240.0
GRACE = ("--reconnect-grace", "5")


@pytest.fixture
def proxy(transit_helper: str) -> Iterator[CountingProxy]:
    host, port = transit_helper.split(":")[1:3]
    p = CountingProxy((host, int(port)), RATE)
    try:
        yield p
    finally:
        p.close()


class Resumer:
    """Runs hilltop send/receive through the proxy into one destination folder."""

    def __init__(self, hilltop: Callable[..., Peer], proxy: CountingProxy, dest: Path) -> None:
        self.hilltop = hilltop
        self.proxy = proxy
        self.dest = dest

    def start(self, src: Path, *receive_flags: str) -> tuple[Peer, Peer]:
        # over Dilation (durable-v1) a killed peer is waited for: 5 s, not the default 120
        s = self.hilltop("send", "--no-listen", *GRACE, str(src), transit_helper=self.proxy.hint)
        code = s.wait_for_code()
        r = self.hilltop("receive", "--no-listen", "--accept-file", *GRACE, *receive_flags, code,
                         transit_helper=self.proxy.hint, cwd=self.dest)
        return s, r

    def partial(self, name: str) -> Path:
        return self.dest / f".{name}.hilltop-part"

    def interrupt_at_half(self, src: Path, kill: str) -> tuple[Result, Result]:
        """Start a transfer of ``src``, SIGKILL ``kill`` ("sender"/"receiver") once half of
        it is on disk; return both results."""
        s, r = self.start(src)
        size = src.stat().st_size
        partial = self.partial(src.name)
        deadline = time.monotonic() + TIMEOUT
        while not (partial.exists() and partial.stat().st_size >= size // 2):
            assert time.monotonic() < deadline, r.finish(5).describe()
            assert r.poll() is None and s.poll() is None, r.finish(5).describe()
            time.sleep(0.05)
        (s if kill == "sender" else r).kill()
        return s.finish(TIMEOUT), r.finish(TIMEOUT)

    def complete(self, src: Path, *receive_flags: str) -> tuple[Result, Result, int]:
        """A full new send of ``src``: both results and the bytes that crossed the proxy."""
        self.proxy.reset()
        s, r = self.start(src, *receive_flags)
        sent, received = s.finish(TIMEOUT), r.finish(TIMEOUT)
        for result in (sent, received):
            assert result.returncode == 0, result.describe()
            assert "Traceback" not in result.stderr, result.describe()
        return sent, received, self.proxy.reset()


@pytest.fixture
def resumer(hilltop: Callable[..., Peer], proxy: CountingProxy, tmp_path: Path) -> Resumer:
    dest = tmp_path / "dest"
    dest.mkdir()
    return Resumer(hilltop, proxy, dest)


def kept_after(resumer: Resumer, name: str, interrupted: Result) -> int:
    """The interrupted receive left its hidden partial and record, and nothing visible."""
    assert interrupted.returncode != 0, interrupted.describe()
    visible = [p.name for p in resumer.dest.iterdir() if not p.name.startswith(".")]
    assert visible == [], interrupted.describe()
    record = resumer.dest / f".{name}.hilltop-resume"
    assert record.exists(), sorted(p.name for p in resumer.dest.iterdir())
    text = record.read_text()
    assert f'"filename": "{name}"' in text and "on_disk" in text, text
    return resumer.partial(name).stat().st_size


@pytest.mark.parametrize("kill", ["sender", "receiver"])
def test_resume_after_sigkill_sends_only_the_rest(kill: str, resumer: Resumer,
                                                  tmp_path: Path) -> None:
    src = random_file(tmp_path / "half.bin", BIG)
    sender, receiver = resumer.interrupt_at_half(src, kill)
    if kill == "sender":
        assert "Traceback" not in receiver.stderr, receiver.describe()
    kept = kept_after(resumer, src.name, receiver)
    assert BIG * 0.4 < kept < BIG * 0.9, kept

    sent, received, crossed = resumer.complete(src)
    assert "Resuming at" in received.stderr and "of 500.0 MB" in received.stderr, \
        received.describe()
    assert "Resuming at" in sent.stderr, sent.describe()
    # what crossed the proxy the second time: the rest, plus handshakes and record framing
    assert BIG - kept <= crossed < (BIG - kept) * 1.02 + 1_000_000, (crossed, kept)
    assert crossed < BIG * 0.65, crossed
    assert digest(resumer.dest / src.name) == digest(src)
    assert sorted(p.name for p in resumer.dest.iterdir()) == [src.name]


def test_altered_prefix_starts_from_zero(resumer: Resumer, tmp_path: Path) -> None:
    src = random_file(tmp_path / "altered.bin", SMALL)
    _, receiver = resumer.interrupt_at_half(src, "sender")
    kept = kept_after(resumer, src.name, receiver)
    with open(resumer.partial(src.name), "r+b") as f:  # one byte near the start changes
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert kept > 0

    sent, received, crossed = resumer.complete(src)
    assert "Starting from zero: the partial differs from the sender's file" in received.stderr, \
        received.describe()
    assert "Starting from zero" in sent.stderr, sent.describe()
    assert crossed >= SMALL, crossed
    assert digest(resumer.dest / src.name) == digest(src)


@pytest.mark.parametrize("size", [SMALL, SMALL + 1], ids=["same-size", "other-size"])
def test_another_file_of_the_same_name_starts_from_zero(size: int, resumer: Resumer,
                                                        tmp_path: Path) -> None:
    first = random_file(tmp_path / "one" / "same.bin", SMALL)
    _, receiver = resumer.interrupt_at_half(first, "sender")
    kept_after(resumer, first.name, receiver)

    other = random_file(tmp_path / "two" / "same.bin", size)
    sent, received, crossed = resumer.complete(other)
    assert "Starting from zero" in received.stderr, received.describe()
    assert crossed >= size, crossed
    assert digest(resumer.dest / other.name) == digest(other)


def test_no_resume_starts_over_and_removes_the_partial(resumer: Resumer,
                                                       tmp_path: Path) -> None:
    src = random_file(tmp_path / "over.bin", SMALL)
    _, receiver = resumer.interrupt_at_half(src, "sender")
    kept_after(resumer, src.name, receiver)

    _, received, crossed = resumer.complete(src, "--no-resume")
    assert "Resuming" not in received.stderr, received.describe()
    assert crossed >= SMALL, crossed
    assert digest(resumer.dest / src.name) == digest(src)
    assert sorted(p.name for p in resumer.dest.iterdir()) == [src.name]


# --- kept partials and peers other than a full hilltop (lean: no proxy, small files) -----------
KEPT_SIZE = 4 * 1000 * 1000
"""Below O_DIRECT's 16 MiB, so the kept half is on disk when the sink is aborted."""


def keep_half(dest: Path, src: Path) -> int:
    """What an interrupted resumable receive of ``src`` into ``dest`` leaves: its first half
    in the hidden partial, with the record."""
    data = src.read_bytes()
    sink = ResumableFileSink(str(dest / src.name), src.name, len(data))
    sink.write(data[: len(data) // 2])
    sink.abort()
    assert sink.kept_bytes == len(data) // 2
    return len(data) // 2


def test_a_peer_listing_resume_without_big_records_resumes(
        peers: Peers, mailbox_url: str, transit_helper: str, fresh_code: str,
        tmp_path: Path) -> None:
    """Issue 27 item 17: such a peer sends v1-sized records, so the receiver declines
    O_DIRECT, which counted the kept bytes as data already arrived: every resume failed
    with "internal error: without_direct_io() after data arrived", the partial kept."""
    src = random_file(tmp_path / "narrow.bin", KEPT_SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()
    kept = keep_half(dest, src)
    listed = ",".join(f for f in FEATURES if f != BIG_RECORDS)
    s = peers.run("narrow-sender", [sys.executable, str(HERE / "feature_sender.py"), mailbox_url,
                                    transit_helper, fresh_code, str(src), listed],
                  relay_url=mailbox_url, transit_helper=transit_helper)
    r = peers.hilltop("receive", "--accept-file", fresh_code, cwd=dest)
    received = r.finish(120)
    assert received.returncode == 0, received.describe()
    sent = s.finish(60)
    assert sent.returncode == 0, sent.describe()
    assert "Resuming at 2.0 MB of 4.0 MB" in received.stderr, received.describe()
    assert f"resume at {kept}" in sent.stdout, sent.describe()
    assert digest(dest / src.name) == digest(src)
    assert sorted(p.name for p in dest.iterdir()) == [src.name]


@pytest.mark.interop
def test_a_complete_receive_from_an_official_sender_removes_the_kept_partial(
        peers: Peers, fresh_code: str, tmp_path: Path) -> None:
    """Issue 27 item 9: official cannot resume, so the receive starts from zero under the
    next hidden name; once the file is complete the kept partial of its name can never be
    continued, and it used to stay beside it, silently."""
    src = random_file(tmp_path / "src" / "again.bin", KEPT_SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()
    keep_half(dest, src)
    s = peers.official("send", "--hide-progress", "--code", fresh_code, str(src))
    r = peers.hilltop("receive", "--accept-file", "--hide-progress", fresh_code, cwd=dest)
    received, sent = r.finish(120), s.finish(60)
    assert received.returncode == 0, received.describe()
    assert sent.returncode == 0, sent.describe()
    assert ("Removed the 2.0 MB kept from an interrupted receive of again.bin: the complete "
            "file is in place now") in received.stderr, received.describe()
    assert digest(dest / src.name) == digest(src)
    assert sorted(p.name for p in dest.iterdir()) == [src.name]
