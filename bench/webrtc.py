"""Throughput of the webrtc transport: hilltop to hilltop with ``--transports webrtc`` only.

    python bench/webrtc.py                   # 100 MB, 3 runs
    python bench/webrtc.py --size 20M --runs 1

Kept apart from ``run.py`` (which compares against the official client, who has no WebRTC)
but built from its pieces: the same loopback-only namespace, servers, timing and RSS/CPU
accounting. aioice never offers 127.0.0.1 as a host candidate, so inside the namespace this
script gives ``lo`` a second address, 127.0.0.2, for ICE to pair; nothing outside sees it.
The load average is printed with each run: the machine is shared, and the number means
little without it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # noqa: E402 - the sibling bench module, found through the path set above


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def udp_drops() -> int:
    """Datagrams the kernel dropped for a full socket receive buffer in this namespace
    (``RcvbufErrors`` in /proc/net/snmp): a lost SCTP packet costs a retransmission."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    return int(dict(zip(rows[0], rows[1], strict=True))["RcvbufErrors"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="100M", help="file size (100M)")
    ap.add_argument("--runs", type=int, default=3, help="transfers (3)")
    ap.add_argument("--transports", default="webrtc",
                    help="--transports for both sides (webrtc); empty: hilltop's default, "
                         "to see what having webrtc in the race costs a direct transfer")
    ap.add_argument("--data", default=os.environ.get("BENCH_DATA", "/tmp/hilltop-bench"),
                    help="where test data is cached")
    args = ap.parse_args()

    run.enter_loopback_namespace()
    subprocess.run(["ip", "addr", "add", "127.0.0.2/8", "dev", "lo"], check=False,
                   capture_output=True)

    size = run.parse_size(args.size)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    big = run.make_file(data / f"blob-{size}-random.bin", size, False)
    print(f"webrtc bench: {size} bytes, {args.runs} runs, {os.cpu_count()} CPUs, "
          f"python {sys.version.split()[0]}", flush=True)
    rates: list[float] = []
    flags = ("--transports", args.transports) if args.transports else ()
    with tempfile.TemporaryDirectory(prefix="hilltop-bench-", dir=data) as tmp:
        bench = run.Bench(Path(tmp), verbose=False)
        bench.start_servers()
        try:
            for i in range(args.runs):
                before, drops = load(), udp_drops()
                res = bench.transfer("hilltop", "hilltop", [str(big)], False,
                                     flags=flags)
                path = re.search(r"Receiving \(->([^)]*)\)", res.receiver.stderr)
                rate = size / res.wall / 1e6
                rates.append(rate)
                print(f"  run {i + 1}: {res.wall:6.2f} s  {rate:6.1f} MB/s  "
                      f"CPU send/recv {res.sender.cpu:5.2f}/{res.receiver.cpu:5.2f} s  "
                      f"RSS send/recv {res.sender.rss_mb:.0f}/{res.receiver.rss_mb:.0f} MB  "
                      f"path {path.group(1) if path else '?'}  "
                      f"UDP drops {udp_drops() - drops}  load {before} -> {load()}",
                      flush=True)
        finally:
            bench.stop_servers()
    rates.sort()
    label = args.transports or "default transports"
    print(f"== {label}, {size} bytes: median {rates[len(rates) // 2]:.1f} MB/s "
          f"(process start to both exits)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
