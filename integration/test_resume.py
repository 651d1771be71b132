"""Resume between two hilltop peers (``resume-v1``): an interrupted receive keeps its hidden
partial and a record, and a new send of the same file with a new code sends only the rest.

Every transfer here goes through the transit relay behind :class:`CountingProxy`, a
throttled TCP forwarder in this process: the throttle makes "about half" reliable on a
loaded machine (we kill when the partial on disk reaches half), and its byte counter is the
measure of what crossed the second time. Both peers use ``--no-listen``, so the relay is the
only way between them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from transferkit import CountingProxy, digest, random_file

if TYPE_CHECKING:
    from conftest import Peer, Result

BIG = 500 * 1000 * 1000
"""The acceptance's 500 MB file."""
SMALL = 40 * 1000 * 1000
"""For the cases that start from zero: the same decisions, a shorter wait."""
RATE = 40 * 1000 * 1000
"""Bytes per second the proxy lets through each connection (a 500 MB half takes ~6 s)."""
TIMEOUT = 240.0


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
        s = self.hilltop("send", "--no-listen", str(src), transit_helper=self.proxy.hint)
        code = s.wait_for_code()
        r = self.hilltop("receive", "--no-listen", "--accept-file", *receive_flags, code,
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
