"""Across the NAT lab: time to first byte and throughput, punched hole against relay, one run.

The lab is the one of ``integration/test_punch_nat.py`` (``integration/natlab.py``): hostA
behind natA, hostB behind natB, the official mailbox server 0.8 and transit relay 0.5 in pub.
hostA sends one file to hostB with a default install's transports (the webrtc extra, if
installed, is left out with ``--transports``), in three cases:

* two cone NATs: the punch (``tcp-punch``) carries it;
* natA symmetric (``masquerade fully-random``): the relay carries it;
* two cone NATs without the punch (``--transports direct-tcp,relay``): the path every
  transfer across two NATs took before the punch, for comparison.

Times come from the receiver's ``--json`` events (their ``time`` field) and the moment this
script started the receiver (the sender had its code by then): *first byte* is the first
``progress`` event, *path* the span from its first dial to ``transit_connected``, throughput
the file's size over ``transit_connected`` to ``done``. Needs root (namespaces, nftables); not
run in CI:

    sudo HILLTOP_PEERS_VENV=$PWD/.peers-venv .venv/bin/python bench/nat.py [--size 100M]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))

from natlab import MAILBOX, TRANSIT_HELPER, NatLab  # noqa: E402
from nsproc import Proc, hilltop_command  # noqa: E402

CASES = (("two cone NATs", False, "direct-tcp,tcp-punch,relay"),
         ("natA symmetric", True, "direct-tcp,tcp-punch,relay"),
         ("two cone NATs, no punch (before)", False, "direct-tcp,relay"))


@dataclass
class Result:
    case: str
    winner: str
    first_byte: float
    path: float
    mb_per_s: float
    relayed: int


def _size(text: str) -> int:
    units = {"K": 1_000, "M": 1_000_000, "G": 1_000_000_000}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].isalpha() else int(text)


def _events(proc: Proc) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def one_run(lab: NatLab, work: Path, src: Path, case: str, symmetric: bool, transports: str,
            code: str) -> Result:
    lab.set_symmetric("A", symmetric)
    head = [*hilltop_command(), "--relay-url", MAILBOX, "--transit-helper", TRANSIT_HELPER,
            "--json"]
    dest = work / code
    dest.mkdir()
    before = lab.relayed_bytes()
    sender = lab.run("hostA", f"send-{code}", [*head, "send", "--hide-progress", "--transports",
                                                transports, "--code", code, str(src)], cwd=work)
    sender.wait_for(r'"event": "code"', 30)
    started = time.time()
    receiver = lab.run("hostB", f"recv-{code}", [*head, "receive", "--hide-progress",
                                                  "--transports", transports, "--accept-file",
                                                  code], cwd=dest)
    if receiver.finish(300) != 0 or sender.finish(60) != 0:
        raise SystemExit(receiver.describe() + sender.describe())
    if (dest / src.name).stat().st_size != src.stat().st_size:
        raise SystemExit(f"{case}: the received file has the wrong size")
    events = _events(receiver)
    first = {e["event"]: e for e in reversed(events)}  # the first of each kind
    dialled = next(e["time"] for e in events if e["event"] == "transit_attempt")
    won = next(e for e in events if e["event"] == "transit_attempt" and e["state"] == "won")
    connected, done = first["transit_connected"]["time"], first["done"]["time"]
    deadline = time.monotonic() + 10  # the relay writes its usage row as the session ends
    while won["transport"] == "relay" and lab.relayed_bytes() == before \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    (dest / src.name).unlink()
    return Result(case, won["transport"], first["progress"]["time"] - started,
                  connected - dialled, src.stat().st_size / (done - connected) / 1e6,
                  lab.relayed_bytes() - before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="100M", help="file size (K, M, G: powers of 1000)")
    args = parser.parse_args()
    venv = os.environ.get("HILLTOP_PEERS_VENV")
    if os.geteuid() != 0 or not venv:
        raise SystemExit("run as root with HILLTOP_PEERS_VENV set (see the docstring)")
    with tempfile.TemporaryDirectory(prefix="hilltop-nat-bench-") as tmp:
        work = Path(tmp)
        src = work / "f.bin"
        with open(src, "wb") as out:
            left = _size(args.size)
            while left:
                out.write(os.urandom(min(left, 1 << 20)))
                left -= min(left, 1 << 20)
        lab = NatLab(work / "lab")
        (work / "lab").mkdir()
        try:
            lab.up()
            lab.servers(Path(venv) / "bin" / "twist", coturn=False, relay=True)
            results = [one_run(lab, work, src, case, symmetric, transports, f"{n}-bench")
                       for n, (case, symmetric, transports) in enumerate(CASES, 1)]
        finally:
            lab.down()
    print(f"\n{args.size} from hostA to hostB, one run each\n")
    print("| case | path | first byte after the receiver started | dial to connected "
          "| throughput | relay carried |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r.case} | {r.winner} | {r.first_byte:.2f} s | {r.path:.2f} s "
              f"| {r.mb_per_s:.0f} MB/s | {r.relayed / 1e6:.1f} MB |")


if __name__ == "__main__":
    main()
