"""Pipe bench: ``cat FILE | wormhole send -`` to ``wormhole receive -o - > out`` (hilltop to
hilltop), against official 0.24 sending the same bytes as a file (its nearest equivalent: it
has no pipes), A B A B...

    python bench/pipe.py                      # 1 GiB, 3 pairs
    python bench/pipe.py --size 256M --pairs 1

Both write the received bytes to a file in the same directory, so the disk work is alike.
Each run is timed from starting the processes until sender and receiver have exited; peak
RSS and CPU seconds come from ``os.wait4`` (``cat`` is not counted). Every received file is
compared with the sent one by size and SHA-256. Runs inside a loopback-only namespace, with
the servers, data and webrtc setting of ``bench/run.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import (  # noqa: E402 - the sibling bench module, found through the path above
    HILLTOP,
    OFFICIAL,
    Bench,
    Proc,
    Result,
    Series,
    compile_like_an_install,
    enter_loopback_namespace,
    make_file,
    parse_size,
    report,
    without_webrtc,
)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def run_pair(bench: Bench, kind: str, big: Path, want: str) -> Result:
    """One transfer: ``official`` sends ``big`` as a file, ``pipe`` streams it through hilltop."""
    run = next(bench.counter)
    code = f"{run}-bench-pipe"
    inbox = bench.work / f"inbox-{run}"
    inbox.mkdir()
    out = inbox / big.name
    start = time.monotonic()
    feeder = None
    if kind == "official":
        send = subprocess.Popen([OFFICIAL, "send", "--hide-progress", "--code", code, str(big)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        recv = subprocess.Popen([OFFICIAL, "receive", "--hide-progress", "--accept-file", code],
                                cwd=inbox, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
    else:
        feeder = subprocess.Popen(["cat", str(big)], stdout=subprocess.PIPE)
        send = subprocess.Popen([HILLTOP, "send", "--hide-progress", "--code", code, "-"],
                                stdin=feeder.stdout, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        assert feeder.stdout is not None
        feeder.stdout.close()  # the sender holds it now
        with open(out, "wb") as sink:
            recv = subprocess.Popen([HILLTOP, "receive", "--hide-progress", "--accept-file",
                                     "-o", "-", code], cwd=inbox, stdin=subprocess.DEVNULL,
                                    stdout=sink, stderr=subprocess.PIPE)
    procs = {send.pid: "s", recv.pid: "r"}
    done: dict[str, Proc] = {}
    while len(done) < 2:
        pid, status, usage = os.wait4(-1, 0)
        if pid not in procs:
            continue
        done[procs[pid]] = Proc(os.waitstatus_to_exitcode(status), time.monotonic() - start,
                                usage.ru_maxrss / 1024, usage.ru_utime, usage.ru_stime)
    wall = time.monotonic() - start
    if feeder is not None:
        feeder.wait()
    for key, p in (("s", send), ("r", recv)):
        assert p.stderr is not None
        done[key].stderr = p.stderr.read().decode(errors="replace")
        p.stderr.close()
        if done[key].rc != 0:
            raise SystemExit(f"{kind}: {key} failed (rc {done[key].rc}):\n{done[key].stderr}")
    if out.stat().st_size != big.stat().st_size or sha256_of(out) != want:
        raise SystemExit(f"{kind}: the received bytes differ from the sent ones")
    out.unlink()
    return Result(wall, done["s"], done["r"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1G", help="bytes through the pipe (1G)")
    ap.add_argument("--pairs", type=int, default=3, help="A/B pairs (3)")
    ap.add_argument("--data", default=os.environ.get("BENCH_DATA", "/tmp/hilltop-bench"),
                    help="where test data is cached")
    ap.add_argument("--with-webrtc", action="store_true",
                    help="let hilltop race webrtc too (default: off, as in bench/run.py)")
    args = ap.parse_args()

    enter_loopback_namespace()

    size = parse_size(args.size)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    big = make_file(data / f"blob-{size}-random.bin", size, False)
    want = sha256_of(big)
    compile_like_an_install()
    with tempfile.TemporaryDirectory(prefix="hilltop-bench-pipe-", dir=data) as tmp:
        webrtc = "raced" if args.with_webrtc else without_webrtc(Path(tmp))
        bench = Bench(Path(tmp), verbose=False)
        bench.start_servers()
        print(f"hilltop pipe bench: {size} bytes, {args.pairs} pairs, {os.cpu_count()} CPUs, "
              f"python {sys.version.split()[0]}, webrtc {webrtc}", flush=True)
        try:
            official, pipe = Series("official file"), Series("hilltop pipe")
            for _ in range(args.pairs):
                official.runs.append(run_pair(bench, "official", big, want))
                pipe.runs.append(run_pair(bench, "pipe", big, want))
            print(report("(p) cat FILE | send - -> receive -o - > FILE, vs official file",
                         official, pipe, size), flush=True)
        finally:
            bench.stop_servers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
