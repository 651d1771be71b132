"""Durable-transfer bench: what Dilation costs against transit, and how long a path takes to heal.

1. Cost: hilltop -> hilltop of one file, over Dilation (``durable-v1``, ``send --durable``
   between two hilltops with the ``dilate`` extra) and over transit (``--no-durable``),
   alternating A B A B,
   direct on loopback and through the transit relay (``--transports relay``). Wall time from
   starting both processes to both exits; peak RSS and CPU from ``os.wait4`` (bench/run.py).
2. Heal: a durable transfer through a relay of its own (both ``--no-listen``); the relay is
   SIGKILLed once a third of the file is in the receiver's partial and started again on the
   same port ``--down`` seconds later. Reported: from the restart until the partial grows
   again (bytes flowing), and the whole transfer's time.

    python bench/durable.py                        # 256 MiB, 3 pairs, both links, heal
    python bench/durable.py --before OLD/bin/wormhole --heal-size 0   # A/B against a base
    python bench/durable.py --size 1500M --pairs 0 --heal-size 1500M   # the issue's 1.5 GB
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import (  # noqa: E402 - the shared bench helpers live beside this file
    HILLTOP,
    TWIST,
    Bench,
    Result,
    enter_loopback_namespace,
    free_port,
    load_average,
    make_file,
    parse_size,
    wait_port,
)


def cost(bench: Bench, src: Path, pairs: int, before: str | None = None) -> None:
    """Transit against Dilation, alternated; with ``before`` (another ``wormhole``, e.g. a
    base commit's), that one's dilated transfer joins the rotation as ``dil-before``."""
    import run

    kinds: list[tuple[str, tuple[str, ...], str]] = [
        ("transit", ("--no-durable",), run.HILLTOP), ("dilated", ("--durable",), run.HILLTOP)]
    if before:
        kinds.append(("dil-before", ("--durable",), before))
    ours = run.HILLTOP
    for link, flags in (("direct", ()), ("relay", ("--transports", "relay"))):
        runs: dict[str, list[Result]] = {label: [] for label, _, _ in kinds}
        for _ in range(pairs):
            for label, extra, program in kinds:
                run.HILLTOP = program  # Bench.transfer starts run.HILLTOP for "hilltop"
                try:
                    runs[label].append(bench.transfer("hilltop", "hilltop", [str(src)], False,
                                                      (*flags, *extra)))
                finally:
                    run.HILLTOP = ours
        for label, results in runs.items():
            walls = sorted(r.wall for r in results)
            mid = results[[r.wall for r in results].index(walls[len(walls) // 2])]
            print(f"{link:6} {label:10} wall {' '.join(f'{w:.2f}' for w in walls)} s; "
                  f"median run: sender {mid.sender.rss_mb:.0f} MB RSS {mid.sender.cpu:.2f} s "
                  f"CPU, receiver {mid.receiver.rss_mb:.0f} MB RSS {mid.receiver.cpu:.2f} s CPU",
                  flush=True)


def heal(work: Path, src: Path, down: float) -> None:
    port = free_port()
    logs = open(work / "heal-relay.log", "ab")  # noqa: SIM115 - closed at the end

    def relay() -> subprocess.Popen[bytes]:
        p = subprocess.Popen([TWIST, "transitrelay", f"--port=tcp:{port}:interface=127.0.0.1"],
                             stdout=logs, stderr=logs, cwd=work)
        wait_port(port)
        return p

    server = relay()
    inbox = work / "heal-inbox"
    inbox.mkdir(exist_ok=True)
    helper = ["--transit-helper", f"tcp:127.0.0.1:{port}"]
    flags = ["--no-listen", "--hide-progress"]
    code = "7-heal-bench"
    began = time.monotonic()
    s = subprocess.Popen([HILLTOP, *helper, "send", *flags, "--code", code, str(src)], cwd=work,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    r = subprocess.Popen([HILLTOP, *helper, "receive", *flags, "--accept-file", code], cwd=inbox,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    part = inbox / f".{src.name}.hilltop-part"
    size = src.stat().st_size
    while not (part.exists() and part.stat().st_size >= size // 3):
        if r.poll() is not None or time.monotonic() - began > 600:
            raise SystemExit(f"no third arrived: {r.stderr.read().decode() if r.stderr else ''}")
        time.sleep(0.01)
    server.send_signal(signal.SIGKILL)
    server.wait()
    at_kill = part.stat().st_size
    time.sleep(down)
    stalled_at = part.stat().st_size
    server = relay()
    restarted = time.monotonic()
    while part.exists() and part.stat().st_size <= stalled_at and r.poll() is None:
        time.sleep(0.005)
    flowing = time.monotonic() - restarted
    rc_s, rc_r = s.wait(600), r.wait(600)
    took = time.monotonic() - began
    server.terminate()
    server.wait()
    logs.close()
    ok = rc_s == rc_r == 0 and (inbox / src.name).stat().st_size == size
    print(f"heal   {size / 1e6:.0f} MB: killed at {at_kill / 1e6:.0f} MB, relay down {down:g} s, "
          f"bytes flowing again {flowing:.2f} s after the restart; whole transfer "
          f"{took:.1f} s; exits {rc_s}/{rc_r}, {'complete' if ok else 'INCOMPLETE'}",
          flush=True)
    if not ok:
        raise SystemExit((s.stderr.read() if s.stderr else b"").decode()
                         + (r.stderr.read() if r.stderr else b"").decode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="256M")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--heal-size", default="256M", help="0: no heal run")
    parser.add_argument("--before", help="another wormhole whose dilated transfer alternates "
                                         "with ours (a base commit's, for an A/B)")
    parser.add_argument("--down", type=float, default=3.0)
    args = parser.parse_args()
    enter_loopback_namespace()
    print(f"load before: {load_average()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="hilltop-durable-bench-") as tmp:
        work = Path(tmp)
        bench = Bench(work, verbose=False)
        bench.start_servers()
        try:
            if args.pairs:
                src = make_file(work / "payload.bin", parse_size(args.size), sparse=False)
                cost(bench, src, args.pairs, args.before)
            if parse_size(args.heal_size):
                heal(work, make_file(work / "heal.bin", parse_size(args.heal_size),
                                     sparse=False), args.down)
        finally:
            bench.stop_servers()
    print(f"load after: {load_average()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
