"""One file over a link with a real round-trip time: official and hilltop, each way, A B A B...

The loopback bench (``run.py``) cannot show what a round-trip time does to a receiver, and
this machine's kernel has no ``netem``; so this script makes its own delay line: two network
namespaces joined by TUN devices, with a thread of this process holding every packet for
``--delay`` ms each way before passing it on. An official mailbox runs in the first
namespace, the senders run there too and the receivers in the second, so the mailbox and the
direct transit connection both cross the link (no transit relay: its hint points at a closed
port). Needs root (namespaces, TUN). The delay line is Python: on this machine it carries
~60 MB/s at a 40 ms round trip, which caps every pair alike.

    sudo .venv/bin/python bench/wan.py                      # 40 ms round trip, 200 MB, 2 rounds
    sudo .venv/bin/python bench/wan.py --delay 1 --rounds 3 # a LAN-like 2 ms

Written when this link showed hilltop's receiver stalling: waiting for 1 MiB per wake-up
(``SO_RCVLOWAT``) made a 200 MB transfer take 14.7 s instead of 3.5 s (bench/README).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import heapq
import os
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import run as loopback_bench

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
SENDER_ADDR, RECEIVER_ADDR = "198.18.1.1", "198.18.1.2"
TIMEOUT = 600  # seconds for one transfer: even the stalled receiver took 72 s for 200 MB
PAIRS = (("official", "official"), ("official", "hilltop"), ("hilltop", "official"),
         ("hilltop", "hilltop"))
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def _enter(netns_path: str) -> None:
    fd = os.open(netns_path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {netns_path}")
    finally:
        os.close(fd)


def _open_tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)
    return fd


class DelayLine:
    """Two namespaces and the thread that carries packets between their TUN devices."""

    def __init__(self, one_way_ms: float) -> None:
        tag = os.getpid()
        self.ns = (f"hilltop-wan-a-{tag}", f"hilltop-wan-b-{tag}")
        self.delay = one_way_ms / 1000
        self._stop = threading.Event()
        self._fds: tuple[int, int] | None = None
        self._thread = threading.Thread(target=self._carry, daemon=True)

    def __enter__(self) -> DelayLine:
        for ns in self.ns:
            subprocess.run(["ip", "netns", "add", ns], check=True)
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        try:
            fds = []
            for ns, dev in zip(self.ns, ("wanA", "wanB"), strict=True):
                _enter(f"/var/run/netns/{ns}")
                fds.append(_open_tun(dev))
        finally:
            if _libc.setns(home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
            os.close(home)
        self._fds = (fds[0], fds[1])
        for ns, dev, me, peer in ((self.ns[0], "wanA", SENDER_ADDR, RECEIVER_ADDR),
                                  (self.ns[1], "wanB", RECEIVER_ADDR, SENDER_ADDR)):
            for cmd in (f"ip link set {dev} mtu 9000 up", f"ip addr add {me} peer {peer} dev {dev}",
                        "ip link set lo up"):
                subprocess.run(["ip", "netns", "exec", ns, *cmd.split()], check=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        if self._fds:
            for fd in self._fds:
                os.close(fd)
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], check=False)

    def _carry(self) -> None:
        assert self._fds is not None
        a, b = self._fds
        other = {a: b, b: a}
        queue: list[tuple[float, int, int, bytes]] = []
        seq = 0
        while not self._stop.is_set():
            wait = max(0.0, queue[0][0] - time.monotonic()) if queue else 0.2
            ready, _, _ = select.select([a, b], [], [], wait)
            now = time.monotonic()
            for fd in ready:
                for _ in range(64):
                    try:
                        packet = os.read(fd, 65536)
                    except BlockingIOError:
                        break
                    seq += 1
                    heapq.heappush(queue, (now + self.delay, seq, other[fd], packet))
            now = time.monotonic()
            while queue and queue[0][0] <= now:
                _, _, out, packet = heapq.heappop(queue)
                with contextlib.suppress(BlockingIOError):  # a full device queue drops it
                    os.write(out, packet)


def wait_for_mailbox(line: DelayLine, timeout: float = 20.0) -> None:
    """Until the mailbox answers on the sender's side, so that no first run races its start."""
    probe = ("import socket\n"
             f"socket.create_connection(('{SENDER_ADDR}', 4000), 1).close()")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if subprocess.run(["ip", "netns", "exec", line.ns[0], sys.executable, "-c", probe],
                          capture_output=True, check=False).returncode == 0:
            return
        time.sleep(0.2)
    raise SystemExit("the mailbox did not start")


def transfer(line: DelayLine, work: Path, sender: str, receiver: str, code: str,
             blob: Path) -> float:
    """One complete transfer across the link; its wall time (both processes' lifetimes)."""
    def command(who: str) -> str:
        return loopback_bench.OFFICIAL if who == "official" else loopback_bench.HILLTOP

    inbox = work / f"inbox-{code}"
    inbox.mkdir()
    start = time.monotonic()
    send = subprocess.Popen(
        ["ip", "netns", "exec", line.ns[0], command(sender), "send", "--hide-progress",
         "--code", code, str(blob)], cwd=work, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        recv = subprocess.run(
            ["ip", "netns", "exec", line.ns[1], command(receiver), "receive",
             "--hide-progress", "--accept-file", code], cwd=inbox, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, timeout=TIMEOUT)
        _, send_err = send.communicate(timeout=30)
    except subprocess.TimeoutExpired as err:
        send.kill()
        raise SystemExit(f"{sender}->{receiver}: no result after {err.timeout} s") from err
    finally:
        if send.poll() is None:
            send.kill()
    wall = time.monotonic() - start
    if send.returncode or recv.returncode:
        raise SystemExit(f"{sender}->{receiver} failed: {send_err.decode()}"
                         f"{recv.stderr.decode()}")
    subprocess.run(["cmp", str(blob), str(inbox / blob.name)], check=True)
    (inbox / blob.name).unlink()
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay", type=float, default=20.0, help="one-way delay in ms (20)")
    ap.add_argument("--size", default="200M", help="file size (200M)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the four pairs (2)")
    ap.add_argument("--data", default=os.environ.get("BENCH_DATA", "/tmp/hilltop-bench"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/wan.py needs root (network namespaces and TUN devices)")

    size = loopback_bench.parse_size(args.size)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    blob = loopback_bench.make_file(data / f"blob-{size}-random.bin", size, False)
    loopback_bench.compile_like_an_install()
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="hilltop-wan-", dir=data)))
        loopback_bench.without_webrtc(work)
        line = stack.enter_context(DelayLine(args.delay))
        mailbox = subprocess.Popen(
            ["ip", "netns", "exec", line.ns[0], loopback_bench.TWIST, "wormhole-mailbox",
             f"--port=tcp:4000:interface={SENDER_ADDR}", f"--channel-db={work / 'mb.sqlite'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
        stack.callback(mailbox.wait, 5)
        stack.callback(mailbox.terminate)
        os.environ["WORMHOLE_RELAY_URL"] = f"ws://{SENDER_ADDR}:4000/v1"
        os.environ["WORMHOLE_TRANSIT_HELPER"] = f"tcp:{SENDER_ADDR}:4001"  # closed: direct only
        wait_for_mailbox(line)
        print(f"hilltop wan bench: {size} bytes, {2 * args.delay:g} ms round trip, "
              f"{args.rounds} rounds", flush=True)
        times: dict[tuple[str, str], list[float]] = {p: [] for p in PAIRS}
        run = 0
        for _ in range(args.rounds):
            for pair in PAIRS:
                run += 1
                wall = transfer(line, work, *pair, f"{run}-wan-run", blob)
                times[pair].append(wall)
                print(f"  {pair[0]}->{pair[1]} {wall:.2f} s", flush=True)
        base = statistics.median(times[("official", "official")])
        for pair, walls in times.items():
            med = statistics.median(walls)
            print(f"{pair[0]}->{pair[1]:<9} median {med:6.2f} s  {size / med / 1e6:6.1f} MB/s  "
                  f"official->official / this = {base / med:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
