"""Resume bench: time to finish a file after its first transfer was cut at 50%.

Three runs, each preceded by the same interruption (the sender SIGKILLed once half of the file
is in the receiver's partial): hilltop -> hilltop resuming (``resume-v1``: only the rest
crosses), hilltop -> hilltop with ``receive --no-resume`` (starts over), and official 0.24 ->
official 0.24 (it always starts over; its partial is ``NAME.tmp``). Only the second transfer
is timed, from starting both processes until both have exited, as in ``bench/run.py``.

Two links: direct TCP on loopback (~1 GB/s, where the bytes cost least), and the transit
relay behind a throttling TCP proxy in this process (``--rate``, 50 MB/s by default, a fast
Internet link; both sides ``--no-listen``), where what resume saves is the time of the bytes
it skips.

    python bench/resume.py                 # 1 GiB, both links
    python bench/resume.py --size 256M --rate 0   # a quick look, loopback only
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import (  # noqa: E402 - the shared bench helpers live beside this file
    HILLTOP,
    OFFICIAL,
    Bench,
    compile_like_an_install,
    enter_loopback_namespace,
    make_file,
    parse_size,
    without_webrtc,
)


class Throttle:
    """A TCP proxy to ``target`` letting ``rate`` bytes per second through each direction of
    each connection (a sleep after every read; enough for tens of MB/s)."""

    def __init__(self, target: tuple[str, int], rate: float) -> None:
        self.target, self.rate = target, rate
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        due = time.monotonic()  # when the bytes so far may have gone; idle time is no credit
        with contextlib.suppress(OSError):
            while data := src.recv(256 * 1024):
                dst.sendall(data)
                now = time.monotonic()
                due = max(due, now) + len(data) / self.rate
                if due > now:
                    time.sleep(due - now)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


LINK_FLAGS: tuple[str, ...] = ()
"""``--no-listen`` while the throttled relay is the only way between the peers."""


def commands(kind: str, code: str, src: Path, receive_flags: tuple[str, ...]
             ) -> tuple[list[str], list[str]]:
    exe = OFFICIAL if kind == "official" else HILLTOP
    return ([exe, "send", *LINK_FLAGS, "--hide-progress", "--code", code, str(src)],
            [exe, "receive", *LINK_FLAGS, "--hide-progress", "--accept-file", *receive_flags,
             code])


def start(kind: str, code: str, src: Path, inbox: Path, work: Path,
          receive_flags: tuple[str, ...] = ()) -> tuple[subprocess.Popen, subprocess.Popen]:
    send, receive = commands(kind, code, src, receive_flags)
    s = subprocess.Popen(send, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    r = subprocess.Popen(receive, cwd=inbox, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return s, r


def interrupt_at_half(kind: str, code: str, src: Path, inbox: Path, work: Path) -> int:
    """Transfer ``src`` and SIGKILL the sender once half is in the partial; its size."""
    partial = inbox / (f".{src.name}.hilltop-part" if kind == "hilltop" else f"{src.name}.tmp")
    half = src.stat().st_size // 2
    s, r = start(kind, code, src, inbox, work)
    deadline = time.monotonic() + 600
    try:
        while not (partial.exists() and partial.stat().st_size >= half):
            if time.monotonic() > deadline or s.poll() is not None or r.poll() is not None:
                raise SystemExit(f"{kind}: the transfer ended before reaching half")
            time.sleep(0.002)
        s.send_signal(signal.SIGKILL)
        kept = partial.stat().st_size
    finally:
        for p in (s, r):
            if p.poll() is None and p is s:
                p.kill()
            p.wait(60)
            if p.stderr is not None:
                p.stderr.close()
    return kept


def finish(kind: str, code: str, src: Path, inbox: Path, work: Path,
           receive_flags: tuple[str, ...] = ()) -> tuple[float, str]:
    """The timed second transfer; returns its wall time and the receiver's stderr."""
    t0 = time.monotonic()
    s, r = start(kind, code, src, inbox, work, receive_flags)
    errs = [p.communicate(timeout=900)[1].decode(errors="replace") for p in (s, r)]
    wall = time.monotonic() - t0
    for p, err in zip((s, r), errs, strict=True):
        if p.returncode != 0:
            raise SystemExit(f"{kind} second transfer failed:\n{err}")
    got = inbox / src.name
    if got.stat().st_size != src.stat().st_size or subprocess.run(
            ["cmp", "-s", str(src), str(got)]).returncode != 0:
        raise SystemExit(f"{kind}: the received file differs")
    return wall, errs[1]


def main() -> int:
    global LINK_FLAGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1G", help="file size (1G)")
    ap.add_argument("--rate", type=float, default=50.0,
                    help="MB/s of the throttled relay link (50; 0 skips that link)")
    ap.add_argument("--data", default=os.environ.get("BENCH_DATA", "/tmp/hilltop-bench"))
    args = ap.parse_args()
    enter_loopback_namespace()

    size = parse_size(args.size)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    src = make_file(data / f"blob-{size}-random.bin", size, False)
    compile_like_an_install()
    runs = [("hilltop", "resume", ()), ("hilltop", "start over (--no-resume)", ("--no-resume",)),
            ("official", "start over", ())]
    links = [("direct TCP, loopback", 0.0)]
    if args.rate > 0:
        links.append((f"relay throttled to {args.rate:g} MB/s", args.rate * 1e6))
    codes = iter(range(100, 10_000))
    with tempfile.TemporaryDirectory(prefix="hilltop-bench-", dir=data) as tmp:
        work = Path(tmp)
        without_webrtc(work)
        bench = Bench(work, False)
        bench.start_servers()
        relay = os.environ["WORMHOLE_TRANSIT_HELPER"]
        print(f"resume bench: {size} bytes, cut at 50% (sender SIGKILLed), "
              f"{os.cpu_count()} CPUs", flush=True)
        try:
            for link, rate in links:
                throttle = None
                if rate:
                    host, port = relay.split(":")[1:3]
                    throttle = Throttle((host, int(port)), rate)
                    os.environ["WORMHOLE_TRANSIT_HELPER"] = f"tcp:127.0.0.1:{throttle.port}"
                    LINK_FLAGS = ("--no-listen",)
                print(f"-- {link}", flush=True)
                times: dict[str, float] = {}
                for kind, label, flags in runs:
                    inbox = work / f"inbox-{next(codes)}"
                    inbox.mkdir()
                    kept = interrupt_at_half(kind, f"{next(codes)}-bench-cut", src, inbox, work)
                    wall, err = finish(kind, f"{next(codes)}-bench-again", src, inbox, work,
                                       flags)
                    resumed = "; ".join(ln for ln in err.splitlines()
                                        if ln.startswith(("Resuming at", "Received "))
                                        and "via" in ln or "Resuming" in ln)
                    times[label if kind == "hilltop" else "official"] = wall
                    print(f"{kind:8} {label:26} partial {kept / 1e6:7.1f} MB  "
                          f"second transfer {wall:6.2f} s  [{resumed}]", flush=True)
                best = times["resume"]
                print(f"ratios: official start-over / hilltop resume = "
                      f"{times['official'] / best:.2f}x; hilltop start-over / hilltop resume "
                      f"= {times['start over (--no-resume)'] / best:.2f}x", flush=True)
                if throttle is not None:
                    throttle.close()
                    os.environ["WORMHOLE_TRANSIT_HELPER"] = relay
                    LINK_FLAGS = ()
        finally:
            bench.stop_servers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
