"""Where a hilltop transfer's time goes, phase by phase, on both sides (issue 31's budget).

    python bench/budget.py --size 3 --runs 7                 # a 3-byte file
    python bench/budget.py --size 1G --runs 3
    python bench/budget.py --text                            # the 10-byte text
    HILLTOP_WORMHOLE=<venv without the webrtc extra>/bin/wormhole python bench/budget.py

Runs in the same loopback-only namespace, with the same local official mailbox and relay,
as ``bench/run.py`` (whose helpers it uses). Each hilltop process gets ``--dump-timing`` and
``--json``; a phase is the time between two of their events, and the first and last phases
come from the parent's clock: launch (just before ``Popen``) and exit (``wait4``). The
interpreter's own start and the CLI's imports are timed apart, in fresh processes of the
same Python (``python -c pass`` against ``import hilltop.cli.main``). Medians over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run import (
    HILLTOP,
    Bench,
    compile_like_an_install,
    enter_loopback_namespace,
    load_average,
    make_file,
    parse_size,
)

TEXT = "0123456789"
"""The text case: 10 bytes, as bench/run.py's (d)."""

RECEIVER_PHASES = (
    ("launch", "command dispatch", "interpreter, CLI imports, argument parsing"),
    ("command dispatch", "key established",
     "mailbox connect, bind/claim/open, PAKE round trip"),
    ("key established", "key confirmed", "version messages (one round trip)"),
    ("key confirmed", "offer", "the sender's offer arrives"),
    ("offer", "transit_connected",
     "transit imports, plugins, hints both ways, race, handshake"),
    ("transit_connected", "done", "bulk, fsync, ack"),
    ("done", "exit", "mailbox close"),
    ("exit", "reaped", "interpreter exit"),
)
SENDER_PHASES = (
    ("launch", "command dispatch", "interpreter, CLI imports, argument parsing"),
    ("command dispatch", "key established",
     "mailbox connect, allocate/claim/open, waits for the receiver's PAKE"),
    ("key established", "key confirmed", "version messages"),
    ("key confirmed", "transit_connected",
     "offer, transit imports, plugins, hints both ways, race, handshake"),
    ("transit_connected", "done", "bulk, waiting for the ack"),
    ("done", "exit", "mailbox close"),
    ("exit", "reaped", "interpreter exit"),
)


TEXT_PHASES = {"offer": ("offer", "done", "the text shown, our ack sent"),
               "key confirmed": ("key confirmed", "done", "the text out, the ack back")}
"""A text has no transit: its one phase between the offer (receiver) or the key (sender)
and the end replaces the transit and bulk phases."""


def text_phases(phases: tuple[tuple[str, str, str], ...]) -> tuple[tuple[str, str, str], ...]:
    kept = tuple(p for p in phases if "transit_connected" not in p[:2])
    at = next(i for i, p in enumerate(kept) if p[1] == "done" or p[0] == "done")
    extra = [TEXT_PHASES[p[1]] for p in kept[:at] if p[1] in TEXT_PHASES][-1:]
    return kept[:at] + tuple(extra) + kept[at:]


def timeline(launch: float, reaped: float, dump: Path, stdout: str) -> dict[str, float]:
    """Each event's first time, in seconds since this process was launched."""
    marks = {"launch": 0.0, "reaped": reaped - launch}
    for event in json.loads(dump.read_text()):
        marks.setdefault(event["name"], event["start"] - launch)
    for line in stdout.splitlines():
        with_time = json.loads(line)
        marks.setdefault(with_time["event"], with_time["time"] - launch)
    return marks


def one_run(bench: Bench, code: str, path: Path | None, work: Path,
            ) -> tuple[dict[str, dict[str, float]], dict[str, float], dict[str, float]]:
    """One transfer (``path`` None: the 10-byte text): each side's timeline, peak RSS in MB
    and CPU seconds (wait4)."""
    inbox = bench.fresh_inbox(next(bench.counter))
    files = {side: (work / f"{side}.timing.json", work / f"{side}.out", work / f"{side}.err")
             for side in ("s", "r")}
    cmds = {"s": [HILLTOP, "--dump-timing", str(files["s"][0]), "--json", "send",
                  "--hide-progress", "--code", code,
                  *(["--text", TEXT] if path is None else [str(path)])],
            "r": [HILLTOP, "--dump-timing", str(files["r"][0]), "--json", "receive",
                  "--hide-progress", "--accept-file", code]}
    launched: dict[str, float] = {}
    by_pid: dict[int, str] = {}
    for side in ("r", "s"):
        with open(files[side][1], "wb") as out, open(files[side][2], "wb") as err:
            launched[side] = time.time()
            proc = subprocess.Popen(cmds[side], cwd=inbox if side == "r" else work,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        by_pid[proc.pid] = side
    reaped: dict[str, float] = {}
    rss: dict[str, float] = {}
    cpu: dict[str, float] = {}
    while len(reaped) < 2:
        pid, status, usage = os.wait4(-1, 0)
        side = by_pid.get(pid)
        if side is None:
            continue
        reaped[side] = time.time()
        rss[side] = usage.ru_maxrss / 1024
        cpu[side] = usage.ru_utime + usage.ru_stime
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{side} failed: {files[side][2].read_text()}")
    if path is not None:
        bench.check_received(path, inbox)
    return ({side: timeline(launched[side], reaped[side], files[side][0],
                            files[side][1].read_text()) for side in ("s", "r")}, rss, cpu)


def startup_costs(runs: int) -> tuple[float, float]:
    """Median wall seconds of a bare interpreter and of importing the CLI, fresh each time."""
    python = str(Path(HILLTOP).with_name("python"))
    bare, cli = [], []
    for _ in range(runs):
        for script, into in (("pass", bare), ("import hilltop.cli.main", cli)):
            began = time.monotonic()
            subprocess.run([python, "-c", script], check=True)
            into.append(time.monotonic() - began)
    return statistics.median(bare), statistics.median(cli)


def table(title: str, phases: tuple[tuple[str, str, str], ...],
          runs: list[dict[str, float]]) -> list[str]:
    lines = [f"{title}", "| phase | what | median ms | min-max ms |", "|---|---|---|---|"]
    for first, last, what in phases:
        spans = [r[last] - r[first] for r in runs if first in r and last in r]
        if not spans:
            continue
        lines.append(f"| {first} -> {last} | {what} | {statistics.median(spans) * 1000:.0f} "
                     f"| {min(spans) * 1000:.0f}-{max(spans) * 1000:.0f} |")
    total = [r["reaped"] for r in runs]
    lines.append(f"| launch -> reaped | whole process | {statistics.median(total) * 1000:.0f} "
                 f"| {min(total) * 1000:.0f}-{max(total) * 1000:.0f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="3", help="file size (3 bytes)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--text", action="store_true", help="the 10-byte text instead of a file")
    ap.add_argument("--data", default=os.environ.get("BENCH_DATA", "/tmp/hilltop-bench"))
    args = ap.parse_args()
    enter_loopback_namespace()
    size = parse_size(args.size)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    path = None if args.text else make_file(data / f"blob-{size}-random.bin", size,
                                            sparse=False)
    compile_like_an_install()
    webrtc = subprocess.run([str(Path(HILLTOP).with_name("python")), "-c",
                             "import importlib.util as u; print(bool(u.find_spec('aiortc')))"],
                            capture_output=True, text=True, check=True).stdout.strip()
    what = "a 10-byte text" if args.text else f"{size} bytes"
    print(f"budget: {what}, {args.runs} runs, webrtc extra installed: {webrtc}, "
          f"{load_average()}", flush=True)
    senders, receivers, rss_s, rss_r, cpu_s, cpu_r = [], [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="hilltop-budget-", dir=data) as tmp:
        bench = Bench(Path(tmp), verbose=False)
        bench.start_servers()
        try:
            for run in range(args.runs):
                marks, rss, cpu = one_run(bench, f"{run + 1}-budget-run", path, Path(tmp))
                cpu_s.append(cpu["s"])
                cpu_r.append(cpu["r"])
                senders.append(marks["s"])
                receivers.append(marks["r"])
                rss_s.append(rss["s"])
                rss_r.append(rss["r"])
        finally:
            bench.stop_servers()
    bare, cli = startup_costs(args.runs)
    phases_r, phases_s = RECEIVER_PHASES, SENDER_PHASES
    if args.text:
        phases_r, phases_s = text_phases(phases_r), text_phases(phases_s)
    out = [*table("receiver", phases_r, receivers), "",
           *table("sender", phases_s, senders), "",
           f"peak RSS send/recv (max): {max(rss_s):.1f}/{max(rss_r):.1f} MB",
           f"CPU send/recv (median user+sys): {statistics.median(cpu_s):.3f}/"
           f"{statistics.median(cpu_r):.3f} s",
           f"fresh interpreter `-c pass` {bare * 1000:.0f} ms, `import hilltop.cli.main` "
           f"{cli * 1000:.0f} ms (medians of {args.runs})", f"end: {load_average()}"]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
