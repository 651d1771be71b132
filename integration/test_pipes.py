"""Pipes (issue 18, part 3): ``send -`` streams stdin, ``receive -o -`` writes stdout.

Between two hilltop peers: 1 GB from a generator on the sender's stdin to the receiver's stdout,
hashed on both ends, with the receiver's memory sampled from /proc; a sender killed mid-stream;
an official sender's file to stdout; a stream toward an official receiver; the ``--text -``
limit. Binary stdout is read here by our own threads (the shared ``Peer`` decodes lines).
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import secrets
import signal
import subprocess
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from nsproc import hilltop_command

if TYPE_CHECKING:
    from conftest import Peers

GIGABYTE = 1_000_000_000
RSS_LIMIT = 64 * 1024 * 1024
TIMEOUT = 300.0
"""Seconds a gigabyte may take on a loaded two-core machine (about 5 s when idle)."""
NARROW = ("--transports", "direct-tcp,relay")
"""The memory test's transports. Why: with WebRTC allowed, the race imports aiortc, which
alone adds ~30 MB to any receive whatever its size (84 MB for a 1 kB stream); the data path
under test is the same either way."""


def generated(total: int, seed: int = 18) -> Iterator[bytes]:
    """``total`` deterministic bytes in 1 MiB chunks (each numbered, so none repeats)."""
    block = bytearray(random.Random(seed).randbytes(1 << 20))
    sent, index = 0, 0
    while sent < total:
        block[:8] = index.to_bytes(8, "big")
        chunk = bytes(block[: min(len(block), total - sent)])
        yield chunk
        sent += len(chunk)
        index += 1


class Proc:
    """A hilltop process whose stdin we feed, whose stdout we hash, whose stderr we keep."""

    def __init__(self, args: list[str], peers: Peers, cwd: Path,
                 feed: Iterator[bytes] | None = None, read_at_most: int | None = None,
                 drain: bool = True) -> None:
        self._read_at_most = read_at_most  # then close our end of its stdout (| head -c N)
        env = dict(os.environ)
        env.update({"WORMHOLE_RELAY_URL": peers.servers.relay_url,
                    "WORMHOLE_TRANSIT_HELPER": peers.servers.transit_helper,
                    "WORMHOLE_QR": "0", "PYTHONUTF8": "1"})
        env.pop("WORMHOLE_ACCEPT_FILE", None)
        cwd.mkdir(parents=True, exist_ok=True)
        self.stderr_path = cwd.parent / f"{cwd.name}.stderr"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in finish
        self.proc = subprocess.Popen(
            [*hilltop_command(), *args], cwd=cwd, env=env,
            stdin=subprocess.DEVNULL if feed is None else subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._stderr)
        self.digest = hashlib.sha256()
        self.fed = hashlib.sha256()
        self.out_bytes = 0
        self.first_bytes = b""
        self.hwm_kib = 0
        self._threads = [threading.Thread(target=self._sample, daemon=True)]
        if drain:  # else nobody reads its stdout: a consumer that stopped reading
            self._threads.append(threading.Thread(target=self._drain, daemon=True))
        if feed is not None:
            self._threads.append(threading.Thread(target=self._feed, args=(feed,), daemon=True))
        for t in self._threads:
            t.start()

    def _feed(self, chunks: Iterator[bytes]) -> None:
        assert self.proc.stdin is not None
        try:
            for chunk in chunks:
                self.proc.stdin.write(chunk)
                self.proc.stdin.flush()  # a trickle must reach the sender as it comes
                self.fed.update(chunk)
            self.proc.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        while chunk := self.proc.stdout.read1(1 << 20):  # what is there, not 1 MiB
            if len(self.first_bytes) < 4096:
                self.first_bytes += chunk[:4096]
            self.digest.update(chunk)
            self.out_bytes += len(chunk)
            if self._read_at_most is not None and self.out_bytes >= self._read_at_most:
                self.proc.stdout.close()
                return

    def _sample(self) -> None:
        status = f"/proc/{self.proc.pid}/status"
        while self.proc.poll() is None:
            try:
                with open(status) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.hwm_kib = max(self.hwm_kib, int(line.split()[1]))
            except (OSError, ValueError):
                break
            time.sleep(0.1)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def finish(self, timeout: float = TIMEOUT) -> int:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"{self.proc.args} did not finish in {timeout:.0f}s:\n{self.stderr()}",
                        pytrace=False)
        for t in self._threads:
            t.join(30)
        self._stderr.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    try:
        yield started
    finally:
        for p in started:
            p.kill()


def code() -> str:
    return f"{random.randint(100, 999)}-pipe-{secrets.token_hex(4)}"


def wait_for(predicate: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}", pytrace=False)
        time.sleep(0.1)


def test_gigabyte_from_stdin_to_stdout_with_flat_memory(peers: Peers, tmp_path: Path,
                                                         procs: list[Proc]) -> None:
    c = code()
    sender = Proc(["send", *NARROW, "--hide-progress", "--code", c, "-"], peers,
                  tmp_path / "send", feed=generated(GIGABYTE))
    procs.append(sender)
    receiver = Proc(["receive", *NARROW, "--accept-file", "-o", "-", c], peers,
                    tmp_path / "receive")
    procs.append(receiver)
    assert receiver.finish() == 0, receiver.stderr()
    assert sender.finish() == 0, sender.stderr()
    assert receiver.out_bytes == GIGABYTE  # stdout carries the data and nothing else...
    assert receiver.digest.hexdigest() == sender.fed.hexdigest()  # ...exactly
    assert "Wrote the stream of 1000000000 bytes to stdout" in receiver.stderr()
    assert "Traceback" not in receiver.stderr() + sender.stderr()
    assert 0 < receiver.hwm_kib * 1024 < RSS_LIMIT, f"receiver peak RSS {receiver.hwm_kib} KiB"
    assert not list((tmp_path / "receive").iterdir())  # nothing written beside it either


def endless() -> Iterator[bytes]:
    yield from generated(1 << 50)


@pytest.mark.parametrize("to_stdout", [True, False], ids=["stdout", "file"])
def test_a_killed_sender_never_looks_complete(peers: Peers, tmp_path: Path, procs: list[Proc],
                                             to_stdout: bool) -> None:
    c = code()
    sender = Proc(["send", "--hide-progress", "--code", c, "-"], peers, tmp_path / "send",
                  feed=endless())
    procs.append(sender)
    where = ["-o", "-"] if to_stdout else []
    receiver = Proc(["receive", "--accept-file", *where, c], peers, tmp_path / "receive")
    procs.append(receiver)
    if to_stdout:
        wait_for(lambda: receiver.out_bytes > 50_000_000, "50 MB on the receiver's stdout")
    else:
        wait_for(lambda: "Receiving (->" in receiver.stderr(), "the transfer to start")
        time.sleep(1)
    sender.kill()
    assert receiver.finish(120) != 0, receiver.stderr()
    err = receiver.stderr()
    assert "incomplete" in err and "Traceback" not in err, err
    assert "Wrote the stream" not in err and "Received the stream" not in err
    assert not list((tmp_path / "receive").iterdir())  # no file, no hidden partial


@pytest.mark.parametrize("client", ["official", "william"])
def test_a_v1_senders_file_to_stdout(peers: Peers, tmp_path: Path, procs: list[Proc],
                                     client: str) -> None:
    data = b"".join(generated(5_000_000, seed=3))
    src = tmp_path / "src" / "five.bin"
    src.parent.mkdir()
    src.write_bytes(data)
    sender = getattr(peers, client)("send", "--hide-progress", str(src))
    c = sender.wait_for_code()
    receiver = Proc(["receive", "--accept-file", "-o", "-", c], peers, tmp_path / "receive")
    procs.append(receiver)
    assert receiver.finish() == 0, receiver.stderr()
    assert sender.finish().returncode == 0
    assert receiver.out_bytes == len(data)
    assert receiver.digest.hexdigest() == hashlib.sha256(data).hexdigest()
    assert "Wrote it to stdout" in receiver.stderr()
    assert not list((tmp_path / "receive").iterdir())


def test_a_folder_to_stdout_is_its_zip(peers: Peers, tmp_path: Path, procs: list[Proc]) -> None:
    folder = tmp_path / "src" / "tree"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("alpha\n")
    (folder / "sub" / "b.bin").write_bytes(bytes(range(256)) * 10)
    sender = peers.hilltop("send", "--hide-progress", str(folder))
    c = sender.wait_for_code()
    receiver = Proc(["receive", "--accept-file", "-o", "-", c], peers, tmp_path / "receive")
    procs.append(receiver)
    assert receiver.finish() == 0, receiver.stderr()
    assert sender.finish().returncode == 0
    assert "zip archive" in receiver.stderr()
    assert receiver.out_bytes < 4096 + 2600  # small enough that first_bytes holds it all
    with zipfile.ZipFile(io.BytesIO(receiver.first_bytes)) as z:
        assert z.read("a.txt") == b"alpha\n"
        assert z.read("sub/b.bin") == bytes(range(256)) * 10


@pytest.mark.parametrize("client", ["official", "william"])
def test_a_stream_toward_a_v1_receiver_fails_clearly(peers: Peers, tmp_path: Path,
                                                     procs: list[Proc], client: str) -> None:
    sender = Proc(["send", "--hide-progress", "-"], peers, tmp_path / "send",
                  feed=generated(1_000_000))
    procs.append(sender)
    wait_for(lambda: "Wormhole code is:" in sender.stderr(), "the sender's code", 60)
    c = sender.stderr().split("Wormhole code is:")[1].split()[0]
    receiver = (peers.official("receive", "--accept-file", c) if client == "official"
                else peers.william("receive", c, stdin="y\n"))  # william has no --accept-file
    assert sender.finish(60) == 1
    who = "an official or wormhole-william client"
    assert f"{who}, which needs the size before the first byte" in sender.stderr()
    assert "Traceback" not in sender.stderr()
    result = receiver.finish()
    assert result.returncode != 0
    assert "only hilltop receivers can take" in result.stderr + result.stdout


def test_text_from_stdin_over_the_limit_is_refused(peers: Peers) -> None:
    sender = peers.hilltop("send", "--text", "-", stdin=b"x" * (2 * 1024 * 1024))
    result = sender.finish(60)
    assert result.returncode == 1, result.describe()
    assert "over 1.0 MB" in result.stderr and "wormhole send -" in result.stderr
    assert "Wormhole code is" not in result.stderr  # refused before the mailbox was used
    assert "Traceback" not in result.stderr


def test_stdout_on_a_terminal_is_refused_before_the_code_is_used(peers: Peers) -> None:
    import pty

    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([*hilltop_command(), "receive", "-o", "-", "1-two-three"],
                              stdout=follower, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              timeout=60, env={**os.environ,
                                               "WORMHOLE_RELAY_URL": "ws://127.0.0.1:9/v1"})
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 2
    assert b"terminal" in proc.stderr and b"Traceback" not in proc.stderr


def test_a_fifo_is_streamed_under_its_name(peers: Peers, tmp_path: Path,
                                           procs: list[Proc]) -> None:
    fifo = tmp_path / "src" / "backup.tar"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    data = b"".join(generated(3_000_000, seed=5))
    c = code()
    sender = Proc(["send", "--hide-progress", "--code", c, str(fifo)], peers,
                  tmp_path / "send")
    procs.append(sender)
    receiver = Proc(["receive", "--accept-file", c], peers, tmp_path / "receive")
    procs.append(receiver)
    writer = threading.Thread(target=fifo.write_bytes, args=(data,), daemon=True)
    writer.start()  # opening the FIFO waits for the sender to open it for reading
    assert receiver.finish() == 0, receiver.stderr()
    assert sender.finish() == 0, sender.stderr()
    writer.join(10)
    got = tmp_path / "receive" / "backup.tar"
    assert got.read_bytes() == data
    assert sorted(p.name for p in got.parent.iterdir()) == ["backup.tar"]
    assert "Received the stream of 3000000 bytes as backup.tar" in receiver.stderr()


def test_dev_stdin_on_a_pipe_is_a_stream(peers: Peers, tmp_path: Path,
                                         procs: list[Proc]) -> None:
    c = code()
    sender = Proc(["send", "--hide-progress", "--name", "notes.txt", "--code", c,
                   "/dev/stdin"], peers, tmp_path / "send", feed=iter([b"line one\n"] * 1000))
    procs.append(sender)
    receiver = Proc(["receive", "--accept-file", "-o", "-", c], peers, tmp_path / "receive")
    procs.append(receiver)
    assert receiver.finish() == 0, receiver.stderr()
    assert sender.finish() == 0, sender.stderr()
    assert receiver.digest.hexdigest() == hashlib.sha256(b"line one\n" * 1000).hexdigest()
    assert "named 'notes.txt'" in receiver.stderr()


def test_a_silent_pipe_does_not_outlive_the_receiver(peers: Peers, tmp_path: Path,
                                                     procs: list[Proc]) -> None:
    """``tail -f log | wormhole send -``: the receiver goes away while stdin says nothing;
    the sender must notice and exit, not wait for input forever."""

    def trickle() -> Iterator[bytes]:
        yield b"first line\n"
        time.sleep(600)  # then silence (the fixture kills the sender long before)

    c = code()
    sender = Proc(["send", "--hide-progress", "--code", c, "-"], peers, tmp_path / "send",
                  feed=trickle())
    procs.append(sender)
    receiver = Proc(["receive", "--accept-file", "-o", "-", c], peers, tmp_path / "receive")
    procs.append(receiver)
    wait_for(lambda: receiver.out_bytes >= 11, "the first line on the receiver's stdout")
    receiver.kill()
    assert sender.finish(60) == 1, sender.stderr()
    assert "Traceback" not in sender.stderr()


def test_a_consumer_that_stops_reading_fails_both_sides(peers: Peers, tmp_path: Path,
                                                        procs: list[Proc]) -> None:
    """``wormhole receive -o - CODE | head -c 1M``: the receiver must not claim success."""
    c = code()
    sender = Proc(["send", "--hide-progress", "--code", c, "-"], peers, tmp_path / "send",
                  feed=generated(200_000_000))
    procs.append(sender)
    receiver = Proc(["receive", "--accept-file", "-o", "-", c], peers, tmp_path / "receive",
                    read_at_most=1_000_000)
    procs.append(receiver)
    assert receiver.finish() == 1, receiver.stderr()
    assert "went away (broken pipe)" in receiver.stderr()
    assert "Traceback" not in receiver.stderr()
    assert sender.finish() == 1, sender.stderr()
    assert "Traceback" not in sender.stderr()


def test_a_stream_sender_that_sends_nothing_is_given_up_on(peers: Peers, tmp_path: Path,
                                                           procs: list[Proc]) -> None:
    """Issue 27 item 18: a stream sender that connects and sends nothing held its receiver
    for ever, whatever ``--idle-timeout`` said."""

    def silence() -> Iterator[bytes]:
        time.sleep(600)  # stdin stays open and says nothing (the fixture kills the sender)
        yield b""

    c = code()
    sender = Proc(["send", "--hide-progress", "--code", c, "-"], peers, tmp_path / "send",
                  feed=silence())
    procs.append(sender)
    receiver = Proc(["receive", "--idle-timeout", "3", "--accept-file", "-o", "-", c], peers,
                    tmp_path / "receive")
    procs.append(receiver)
    assert receiver.finish(90) == 1, receiver.stderr()
    assert "nothing moved for 3 s: the sender sent nothing more" in receiver.stderr()
    assert "Traceback" not in receiver.stderr() and receiver.out_bytes == 0
    assert sender.finish(60) == 1, sender.stderr()  # it hears the receiver leave
    assert "Traceback" not in sender.stderr()


def test_a_fifo_sender_gives_up_on_a_receiver_that_stops_reading(
        peers: Peers, tmp_path: Path, procs: list[Proc]) -> None:
    """Issue 27 item 18: ``send FIFO`` into a receiver whose output nobody reads any more
    waited for ever; with ``--idle-timeout 3`` it ends in one line."""
    fifo = tmp_path / "src" / "feed"
    fifo.parent.mkdir()
    os.mkfifo(fifo)

    def produce() -> None:  # until the sender stops reading the FIFO
        try:
            with open(fifo, "wb") as f:
                for chunk in generated(2 * GIGABYTE, seed=3):
                    f.write(chunk)
        except OSError:
            pass

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    c = code()
    sender = Proc(["send", "--idle-timeout", "3", "--hide-progress", "--code", c, str(fifo)],
                  peers, tmp_path / "send")
    procs.append(sender)
    receiver = Proc(["receive", "--accept-file", "-o", "-", c], peers, tmp_path / "receive",
                    drain=False)
    procs.append(receiver)
    assert sender.finish(120) == 1, sender.stderr()
    assert "the receiver stopped taking data but kept the connection open" in sender.stderr()
    assert "Traceback" not in sender.stderr()
    receiver.kill()
    writer.join(10)


LIBRARY_RECEIVER = """
import asyncio, os, sys
from hilltop import install_asyncio_reactor

async def main(code, directory):
    from hilltop import TransitOptions, Wormhole
    w = Wormhole(relay_url=os.environ["WORMHOLE_RELAY_URL"])
    try:
        w.set_code(code)
        helper = os.environ["WORMHOLE_TRANSIT_HELPER"]
        path = await w.receive_file(directory,
                                    transit=TransitOptions(transit_helpers=[helper]))
        print("saved", os.path.basename(path), flush=True)
    finally:
        await w.close()

loop = asyncio.new_event_loop()
install_asyncio_reactor(loop)
loop.run_until_complete(main(sys.argv[1], sys.argv[2]))
"""


def test_the_library_receives_a_stream_into_a_file(peers: Peers, tmp_path: Path,
                                                   procs: list[Proc]) -> None:
    import sys

    c = code()
    data = b"".join(generated(2_000_000, seed=9))
    sender = Proc(["send", "--hide-progress", "--name", "dump.sql", "--code", c, "-"], peers,
                  tmp_path / "send", feed=iter([data]))
    procs.append(sender)
    dest = tmp_path / "dest"
    dest.mkdir()
    env = dict(os.environ, WORMHOLE_RELAY_URL=peers.servers.relay_url,
               WORMHOLE_TRANSIT_HELPER=peers.servers.transit_helper)
    lib = subprocess.run([sys.executable, "-c", LIBRARY_RECEIVER, c, str(dest)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert lib.returncode == 0, lib.stderr
    assert lib.stdout.strip() == "saved dump.sql"
    assert sender.finish() == 0, sender.stderr()
    assert (dest / "dump.sql").read_bytes() == data
    assert sorted(p.name for p in dest.iterdir()) == ["dump.sql"]


def test_verify_never_reads_its_answer_from_the_stream(peers: Peers, tmp_path: Path) -> None:
    """``cat x | wormhole send --verify -``: the question must not take the data's first line
    as its answer; with no terminal to ask on, the send is refused."""
    env = dict(os.environ, WORMHOLE_RELAY_URL=peers.servers.relay_url, WORMHOLE_QR="0")
    proc = subprocess.run([*hilltop_command(), "send", "--verify", "-"], input=b"yes\n" * 100,
                          capture_output=True, timeout=60, env=env, cwd=tmp_path,
                          start_new_session=True)  # no controlling terminal: no /dev/tty
    assert proc.returncode == 1
    assert b"--verify needs a terminal to answer on" in proc.stderr
    assert b"Wormhole code is" not in proc.stderr and b"Traceback" not in proc.stderr
