"""By hand, not in CI: ``send --lan`` / ``receive --lan`` of one file, many times, in both orders.

The acceptance run of issue 27, item 1: a receiver started before its sender (and one started
right after it) is served every time, beside a busy loop. Uses the namespaces of
``test_lan_netns.py`` (sender in ``a``, receiver in ``b``); needs root and iproute2::

    integration/netns-run .venv-ci/bin/python integration/lan_orders.py --runs 20 --size 50000000

Prints one line a run and the counts per order; exits 1 if any run failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from nsproc import Proc, hilltop_command
from test_lan_netns import LanLab, receive, sha256

ORDERS = ("receiver-first", "sender-first")


def last_line(proc: Proc) -> str:
    return (proc.stderr.strip().splitlines() or ["(nothing)"])[-1]


def one_run(lab: LanLab, order: str, nameplate: int, src: Path, dest: Path) -> str | None:
    """One transfer; None if it worked, else why not (one line)."""
    code = f"{nameplate}-guitarist-revenge"
    send_argv = [*hilltop_command(), "send", "--lan", "--hide-progress", "--code", code,
                 src.name]
    recv: Proc | None = None
    sender: Proc | None = None
    try:
        if order == "receiver-first":
            recv = receive(lab, code, dest, name=f"recv-{nameplate}")
            recv.wait_for(f"Looking for nameplate {nameplate} on the LAN")
            time.sleep(1.0)
            sender = lab.run("a", f"send-{nameplate}", send_argv, cwd=src.parent)
        else:
            sender = lab.run("a", f"send-{nameplate}", send_argv, cwd=src.parent)
            recv = receive(lab, code, dest, name=f"recv-{nameplate}")
        got_recv = recv.finish(180)
        if got_recv != 0 and sender.proc.poll() is None:
            time.sleep(5)  # a failed receiver should stop its sender, or make it say why
            if sender.proc.poll() is None:
                return f"receiver exit {got_recv} ({last_line(recv)}); the sender still waits " \
                       f"5 s later, saying: {last_line(sender)}"
        got_send = sender.finish(60)
    except pytest.fail.Exception as failed:  # a hang: Proc killed it and says what it saw
        return str(failed).splitlines()[0]
    finally:
        for proc in (recv, sender):
            if proc is not None:
                proc.kill()
    if got_recv != 0 or got_send != 0:
        return f"receiver exit {got_recv}, sender exit {got_send}: {last_line(recv)}"
    if sha256(dest / src.name) != sha256(src):
        return "the received file differs"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per order")
    parser.add_argument("--size", type=int, default=50_000_000, help="file size in bytes")
    parser.add_argument("--no-busy-loop", action="store_true")
    args = parser.parse_args()
    failures: dict[str, list[str]] = {order: [] for order in ORDERS}
    with tempfile.TemporaryDirectory(prefix="lan-orders-") as tmp:
        work = Path(tmp)
        src = work / "src" / "payload.bin"
        src.parent.mkdir()
        src.write_bytes(os.urandom(args.size))
        busy = None if args.no_busy_loop else subprocess.Popen(
            [sys.executable, "-c", "while True: pass"])
        lab = LanLab(work)
        try:
            lab.up()
            nameplate = 100
            for order in ORDERS:
                for run in range(1, args.runs + 1):
                    nameplate += 1
                    dest = work / f"dest-{nameplate}"
                    dest.mkdir()
                    started = time.monotonic()
                    why = one_run(lab, order, nameplate, src, dest)
                    took = time.monotonic() - started
                    print(f"{order} run {run:2d}: {'ok' if why is None else 'FAILED: ' + why}"
                          f" ({took:.1f} s)", flush=True)
                    if why is not None:
                        failures[order].append(why)
                    (dest / src.name).unlink(missing_ok=True)
        finally:
            lab.down()
            if busy is not None:
                busy.kill()
                busy.wait(10)
    print(f"{args.size} bytes, {args.runs} runs per order, busy loop: {not args.no_busy_loop}")
    for order in ORDERS:
        print(f"{order}: {args.runs - len(failures[order])}/{args.runs} ok")
    return 1 if any(failures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
