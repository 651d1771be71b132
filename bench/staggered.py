"""Small transfers in the order people make them: the receiver starts once the code is shown.

    python bench/staggered.py --runs 5                  # a 3-byte file, official and hilltop
    python bench/staggered.py --runs 5 --text

``bench/run.py`` starts both processes at once with a code given to both (``--code``). Here
the sender allocates its code, and the receiver is started the moment the sender prints
"Wormhole code is: ..." (as a script that passes the code on does; a person typing it adds
seconds), so neither start-up overlaps the other's and the sender has nothing to do while
the receiver starts. Timed: the receiver from its launch to its exit (what the person
receiving waits for) and the sender from the code's appearance to its exit. Official and
hilltop alternate, with the same local mailbox, namespace and webrtc setting as run.py.
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from run import (
    DATA,
    HILLTOP,
    OFFICIAL,
    Bench,
    compile_like_an_install,
    enter_loopback_namespace,
    load_average,
    without_webrtc,
)

CODE_LINE = "Wormhole code is: "
"""What both clients print on stderr once the code is allocated."""


def one_run(bench: Bench, exe: str, what: list[str], deadline: float = 60.0,
            ) -> tuple[float, float]:
    """Seconds from the receiver's launch to its exit, and from the code's appearance to the
    sender's exit."""
    run = next(bench.counter)
    inbox = bench.fresh_inbox(run)
    sender = subprocess.Popen([exe, "send", "--hide-progress", *what], cwd=bench.work,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    codes: queue.Queue[str] = queue.Queue()
    # A thread reads the sender's stderr to the end: closing the pipe early would make the
    # sender's next status line fail (official's does).
    threading.Thread(target=watch_stderr, args=(sender, codes), daemon=True).start()
    try:
        code = codes.get(timeout=deadline)
    except queue.Empty:
        code = ""
    if not code:
        sender.kill()
        sender.wait()
        raise SystemExit(f"{exe} send printed no code")
    shown = time.monotonic()
    receiver = subprocess.Popen([exe, "receive", "--hide-progress", "--accept-file", code],
                                cwd=inbox, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    exits: dict[int, float] = {}
    while len(exits) < 2:
        pid, status, _ = os.wait4(-1, 0)
        if pid in (sender.pid, receiver.pid):
            exits[pid] = time.monotonic()
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(f"{exe}: the {'sender' if pid == sender.pid else 'receiver'}"
                                 f" failed")
    return exits[receiver.pid] - shown, exits[sender.pid] - shown


def watch_stderr(sender: subprocess.Popen[str], codes: queue.Queue[str]) -> None:
    """Hand on the code the moment its line appears ("" if the sender ends without one)."""
    assert sender.stderr is not None
    found = False
    for line in sender.stderr:
        if not found and line.startswith(CODE_LINE):
            found = True
            codes.put(line[len(CODE_LINE):].strip())
    sender.stderr.close()
    if not found:
        codes.put("")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--text", action="store_true", help="the 10-byte text instead of a file")
    ap.add_argument("--data", default=DATA, help="where test data is cached")
    args = ap.parse_args()
    enter_loopback_namespace()
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    tiny = data / "three-bytes.txt"
    if not tiny.exists():
        tiny.write_bytes(b"hi\n")
    what = ["--text", "0123456789"] if args.text else [str(tiny)]
    compile_like_an_install()
    clients = {"official": OFFICIAL, "hilltop": HILLTOP}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    with tempfile.TemporaryDirectory(prefix="hilltop-staggered-", dir=data) as tmp:
        webrtc = without_webrtc(Path(tmp))
        bench = Bench(Path(tmp), verbose=False)
        bench.start_servers()
        print(f"staggered: {'a 10-byte text' if args.text else 'a 3-byte file'}, "
              f"{args.runs} runs, webrtc {webrtc}, {load_average()}", flush=True)
        try:
            for _ in range(args.runs):
                for name, exe in clients.items():
                    times[name].append(one_run(bench, exe, what))
        finally:
            bench.stop_servers()
    for name, runs in times.items():
        recv = [r for r, _ in runs]
        send = [s for _, s in runs]
        print(f"  {name:<9} receiver launch->exit median {statistics.median(recv):.3f} s "
              f"(runs {' '.join(f'{x:.2f}' for x in recv)}), sender code->exit median "
              f"{statistics.median(send):.3f} s")
    ratio = statistics.median(r for r, _ in times["hilltop"]) / statistics.median(
        r for r, _ in times["official"])
    print(f"  receiver hilltop / official = {ratio:.2f}\nend: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
