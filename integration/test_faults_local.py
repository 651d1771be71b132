"""Local faults (issue 20, point 2): the disk fills up mid-transfer, an offer bigger than the
free space, a target folder we cannot write, a target that exists, and SIGINT/SIGTERM at each
phase. Each ends with one clear line, the documented exit status, no traceback, no warning
about a bug, and nothing at the target that looks complete. docs/reliability.md names these.

Small filesystems are tmpfs mounts inside the test's own folder (CI runs as root; a test
skips where mounting is not allowed) and are unmounted afterwards.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from faultkit import (
    SIZE,
    OwnRelay,
    ends_cleanly,
    nothing_visible,
    own_relay_fixture,  # noqa: F401 - the own_relay fixture
    wait_until_partial,
)
from never_acking_receiver import MARK as NEVER_ACKING
from nsproc import hilltop_command
from serverkit import silent_port
from transferkit import digest, random_file

if TYPE_CHECKING:
    from conftest import Peer, Peers

HERE = Path(__file__).resolve().parent
BOUND = 30.0
INTERRUPTED = "ERROR: interrupted before the transfer finished"


def mount_tmpfs(where: Path, size: int, *options: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    opts = ",".join([f"size={size}", *options])
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 40 MiB tmpfs: room for the 30 MB test file, not for it and a filler."""
    disk = tmp_path / "disk"
    mount_tmpfs(disk, 40 * 1024 * 1024)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill_up(disk: Path) -> None:
    """Take every free byte of ``disk`` (the receiver's next write fails with ENOSPC)."""
    fd = os.open(disk / ".filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = b"\0" * (1 << 20)
        while True:
            try:
                os.write(fd, chunk)
            except OSError:
                if len(chunk) == 1:
                    return
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)


def relayed(peers: Peers, relay: OwnRelay, sender: str, src: Path, dest: Path,
            *receive_flags: str) -> tuple[Peer, Peer]:
    start = {"hilltop": peers.hilltop, "official": peers.official}
    s = start[sender]("send", "--no-listen", str(src), transit_helper=relay.hint)
    code = s.wait_for_code()
    r = peers.hilltop("receive", "--no-listen", *receive_flags, code,
                      transit_helper=relay.hint, cwd=dest)
    return s, r


def sender_told(sent_by: str, peer: Peer, *hilltop_needles: str) -> None:
    """The sender ends too: hilltop with its status 4 and the receiver's words."""
    if sent_by == "hilltop":
        ends_cleanly(peer, BOUND, *hilltop_needles, status=4)
    else:
        result = peer.finish(BOUND)
        assert result.returncode != 0, result.describe()
        assert "transfer rejected" in result.stderr, result.describe()


# --- the disk ---------------------------------------------------------------------------------
@pytest.mark.parametrize("what", ["file", "folder"])
def test_disk_full_mid_transfer(peers: Peers, own_relay: OwnRelay, small_disk: Path,
                                tmp_path: Path, what: str) -> None:
    if what == "file":
        src = random_file(tmp_path / "big.bin", SIZE)
    else:
        src = tmp_path / "big.bin"
        for i in range(3):
            random_file(src / f"part{i}.bin", SIZE // 3)
    s, r = relayed(peers, own_relay, "hilltop", src, small_disk, "--accept-file")
    wait_until_partial(small_disk, src.name, SIZE // 5, s, r)
    fill_up(small_disk)
    ends_cleanly(r, BOUND, "ERROR: disk full while", "the partial data was removed", status=1)
    ends_cleanly(s, BOUND, "ERROR:")
    assert sorted(os.listdir(small_disk)) == [".filler"]  # nothing kept: the disk is full


@pytest.mark.parametrize("sender", ["hilltop", "official"])
def test_an_offer_bigger_than_the_free_space_is_refused_before_any_byte(
        peers: Peers, own_relay: OwnRelay, small_disk: Path, tmp_path: Path,
        sender: str) -> None:
    src = random_file(tmp_path / "huge.bin", 45 * 1000 * 1000)
    own_relay.proxy.reset()
    s, r = relayed(peers, own_relay, sender, src, small_disk, "--accept-file")
    ends_cleanly(r, BOUND, "ERROR: not enough free space", "need 45.0 MB", status=5)
    sender_told(sender, s, "the receiver refused the transfer: transfer rejected")
    assert os.listdir(small_disk) == []
    assert own_relay.proxy.reset() == 0  # not a byte crossed the relay


def test_a_target_folder_that_cannot_be_written(peers: Peers, tmp_path: Path) -> None:
    """A read-only filesystem (as root, mode bits would not stop us). Official 0.24 fails
    with a traceback of its OSError."""
    readonly = tmp_path / "readonly"
    mount_tmpfs(readonly, 4 * 1024 * 1024, "ro")
    try:
        src = random_file(tmp_path / "small.bin", 10_000)
        s = peers.hilltop("send", str(src))
        r = peers.hilltop("receive", "--accept-file", s.wait_for_code(), cwd=readonly)
        ends_cleanly(r, BOUND, "ERROR:", "Read-only file system", status=1)
        sender_told("hilltop", s, "transfer rejected")
        assert os.listdir(readonly) == []
    finally:
        subprocess.run(["umount", "-l", str(readonly)], check=False)


@pytest.mark.parametrize("sender", ["hilltop", "official"])
def test_a_target_that_exists_is_not_overwritten(peers: Peers, tmp_path: Path,
                                                 sender: str) -> None:
    src = random_file(tmp_path / "small.bin", 10_000)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "small.bin").write_text("mine")
    start = {"hilltop": peers.hilltop, "official": peers.official}
    s = start[sender]("send", str(src))
    r = peers.hilltop("receive", "--accept-file", s.wait_for_code(), cwd=dest)
    ends_cleanly(r, BOUND, "ERROR: refusing to overwrite existing", status=5)
    sender_told(sender, s, "transfer rejected")
    assert (dest / "small.bin").read_text() == "mine"
    assert os.listdir(dest) == ["small.bin"]


# --- SIGINT and SIGTERM at each phase -----------------------------------------------------------
SIGNALS = [pytest.param(signal.SIGINT, id="sigint"), pytest.param(signal.SIGTERM, id="sigterm")]


def interrupted(proc: Peer | subprocess.Popen[bytes], sig: signal.Signals) -> None:
    os.kill(proc.pid, sig)


def clean_interrupt(stderr: str, status: int, what: str) -> None:
    assert status == 130, what
    assert stderr.rstrip().splitlines()[-1] == INTERRUPTED, what
    for bad in ("Traceback", "bug", "Warning"):
        assert bad not in stderr, what


TWISTED_MARK = "_zope_interface_coptimizations"
"""A library mapped once Twisted is imported (zope.interface's C part)."""


def handles_sigterm_before_twisted(pid: int) -> bool:
    """Wait until process ``pid`` catches SIGTERM; whether Twisted was still unloaded then."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        caught = int(next(ln.split()[1] for ln in status.splitlines()
                          if ln.startswith("SigCgt:")), 16)
        if caught & (1 << (signal.SIGTERM - 1)):
            return TWISTED_MARK not in Path(f"/proc/{pid}/maps").read_text()
        time.sleep(0.001)
    pytest.fail("the command never handled SIGTERM")


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.1])
def test_interrupt_while_the_command_starts(sig: signal.Signals, delay: float,
                                            tmp_path: Path) -> None:
    """In the ~0.2 s of imports, before any mailbox: SIGTERM used to kill the process with
    no word (status -15) and Ctrl-C printed a KeyboardInterrupt traceback. The signal goes
    ``delay`` seconds after the command took SIGTERM over, which must be before Twisted
    is even imported (before the fix, only the reactor took it over).

    The mailbox takes the TCP connection and never answers, so a command that got through
    its imports before the signal is still waiting, never done: with a refused port, a
    receive that started in under 0.1 s had already failed when the signal came (seen in a
    fresh-clone CI run once start-up got faster)."""
    with silent_port() as port:
        url = f"ws://127.0.0.1:{port}/v1"
        proc = subprocess.Popen([*hilltop_command(), "--relay-url", url, "receive", "10-a-b"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, cwd=tmp_path)
        try:
            assert handles_sigterm_before_twisted(proc.pid)
            time.sleep(delay)
            interrupted(proc, sig)
            _, err = proc.communicate(timeout=BOUND)
            text = err.decode()
            clean_interrupt(text, proc.returncode, f"status {proc.returncode}:\n{text}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("sig", SIGNALS)
def test_interrupt_while_the_sender_waits_for_its_receiver(peers: Peers, tmp_path: Path,
                                                           sig: signal.Signals) -> None:
    s = peers.hilltop("send", str(random_file(tmp_path / "small.bin", 1000)))
    s.wait_for_code()
    time.sleep(0.5)
    interrupted(s, sig)
    sent = s.finish(BOUND)
    clean_interrupt(sent.stderr, sent.returncode, sent.describe())


def until_asked(argv: list[str], cwd: Path, question: bytes, *, on_stdout: bool = False
                ) -> tuple[subprocess.Popen[bytes], bytes]:
    """Start ``argv`` with a stdin that stays open and unanswered; return once it has shown
    ``question`` (on stderr, or on stdout where ``input()`` puts a prompt), with what it
    showed. The question has no newline, so bytes are read as they come."""
    env = {k: v for k, v in os.environ.items() if k != "WORMHOLE_ACCEPT_FILE"}
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=cwd, env=env)
    stream = proc.stdout if on_stdout else proc.stderr
    assert stream is not None
    seen = b""
    deadline = time.monotonic() + BOUND
    try:
        while question not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen.decode()
            seen += os.read(stream.fileno(), 4096)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, seen


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("sender", ["hilltop", "official"])
def test_interrupt_at_the_accept_question_tells_the_sender(
        peers: Peers, tmp_path: Path, sig: signal.Signals, sender: str) -> None:
    """The sender used to wait for an answer for ever; now it hears "transfer rejected"."""
    src = random_file(tmp_path / "small.bin", 1000)
    start = {"hilltop": peers.hilltop, "official": peers.official}
    s = start[sender]("send", str(src))
    code = s.wait_for_code()
    dest = tmp_path / "dest"
    dest.mkdir()
    r, seen = until_asked([*hilltop_command(), "--relay-url", peers.servers.relay_url,
                           "--transit-helper", peers.servers.transit_helper, "receive", code],
                          dest, b"ok? (y/N)")
    try:
        assert r.stderr is not None
        interrupted(r, sig)
        r.wait(BOUND)  # stdin stays open: communicate() would close it, an answer of "no"
        text = (seen + r.stderr.read()).decode()
    finally:
        if r.poll() is None:
            r.kill()
            r.wait()
    sender_told(sender, s, "the receiver refused the transfer: transfer rejected")
    clean_interrupt(text, r.returncode, text)
    assert os.listdir(dest) == []


@pytest.mark.parametrize("sig", SIGNALS)
def test_interrupt_mid_transfer_on_the_sending_side(peers: Peers, own_relay: OwnRelay,
                                                    tmp_path: Path,
                                                    sig: signal.Signals) -> None:
    """The receiver keeps its hidden partial and a later send resumes it.
    (The receiving side: ``test_interop_files.test_interrupted_receiver_removes_what_it_had``.)"""
    src = random_file(tmp_path / "big.bin", SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()
    s, r = relayed(peers, own_relay, "hilltop", src, dest, "--accept-file")
    wait_until_partial(dest, src.name, SIZE // 4, s, r)
    interrupted(s, sig)
    sent = s.finish(BOUND)
    clean_interrupt(sent.stderr, sent.returncode, sent.describe())
    ends_cleanly(r, BOUND, "ERROR:", "received so far are kept")
    assert nothing_visible(dest) == []
    s, r = relayed(peers, own_relay, "hilltop", src, dest, "--accept-file")
    received = r.finish(120)
    assert received.returncode == 0 and "Resuming at" in received.stderr, received.describe()
    assert s.finish(60).returncode == 0
    assert digest(dest / src.name) == digest(src)
    assert shutil.disk_usage(dest).free > 0


def never_acking(peers: Peers, src: Path, dest: Path, sender: str) -> tuple[Peer, Peer]:
    """``sender`` sends ``src`` to a receiver that takes every byte and never acks; returns
    once the receiver has them all, so the sender waits for the confirmation."""
    start = {"hilltop": peers.hilltop, "official": peers.official}
    s = start[sender]("send", str(src))
    r = peers.run("never-acking", [sys.executable, str(HERE / "never_acking_receiver.py"),
                                   "--relay-url", peers.servers.relay_url, "--transit-helper",
                                   peers.servers.transit_helper, "receive", "--accept-file",
                                   s.wait_for_code()], relay_url=peers.servers.relay_url,
                  cwd=dest)
    r.wait_for_line(NEVER_ACKING)
    return s, r


@pytest.mark.parametrize("sig", SIGNALS)
def test_interrupt_while_the_sender_waits_for_the_ack(peers: Peers, tmp_path: Path,
                                                     sig: signal.Signals) -> None:
    """Every byte is sent and the receiver never confirms (``never_acking_receiver.py``):
    the sender waits up to its idle time-out (120 s); a signal cancels that wait. Under 4 s:
    a wait that ignored its cancel would be cut off by the 5 s clean-up limit instead."""
    dest = tmp_path / "dest"
    dest.mkdir()
    s, _ = never_acking(peers, random_file(tmp_path / "small.bin", 1_000_000), dest, "hilltop")
    time.sleep(0.5)
    assert s.poll() is None, s.finish(5).describe()
    interrupted(s, sig)
    started = time.monotonic()
    sent = s.finish(BOUND)
    clean_interrupt(sent.stderr, sent.returncode, sent.describe())
    assert time.monotonic() - started < 4.0, sent.describe()
