"""Throughput of the browser page: hilltop's page in headless Chromium against the CLI.

    python bench/browser.py                  # 50 MB each way, 3 runs
    python bench/browser.py --size 20M --runs 1

Runs in the lab of ``integration/browserlab.py`` (namespaces with 198.18.0.0/24 addresses,
the official mailbox from ``$HILLTOP_PEERS_VENV``, Debian's chromium driven by
``web/driver/drive.mjs``), inside the loopback-only namespace of ``integration/netns-run``.
"To the page" is ``wormhole send --browser FILE`` received by the page (streamed to disk
through its service worker); "from the page" is the page, served by a static web server,
sending to ``wormhole receive``. Each figure is the time from starting the sender until
both sides have finished, so it includes Chromium's start (about 1 s); the page's own
figure (from the data channel opening to the ack) is printed beside it. Received files are
compared by SHA-256.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "integration"))

import run  # noqa: E402 - the sibling bench module
from browserlab import MAILBOX, BrowserLab, missing_tools, page_code, page_end, sha256  # noqa: E402
from nsproc import hilltop_command  # noqa: E402


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def to_page(lab: BrowserLab, big: Path, work: Path, i: int) -> tuple[float, dict]:
    started = time.monotonic()
    sender = lab.run("a", f"send{i}", [*hilltop_command(), "--relay-url", MAILBOX, "send",
                                       "--browser", "--hide-progress", str(big)])
    url = sender.wait_for(r"(http://198\.18\.0\.11:\d+/#\S+)").group(1)
    downloads = work / f"down{i}"
    page = lab.browser(f"to-page{i}", "--url", url, "--downloads", str(downloads),
                       "--secure-origin", url.split("/#")[0])
    end = page_end(page)
    if sender.finish(120) != 0 or end["state"] != "done":
        raise SystemExit(f"transfer failed:\n{sender.describe()}\n{page.describe()}")
    wall = time.monotonic() - started
    if sha256(downloads / big.name) != sha256(big):
        raise SystemExit("the page saved different bytes")
    return wall, end


def from_page(lab: BrowserLab, big: Path, site: str, work: Path, i: int) -> tuple[float, dict]:
    started = time.monotonic()
    page = lab.browser(f"from-page{i}", "--url", site + f"#mailbox={MAILBOX}",
                       "--send-file", str(big))
    code = page_code(page)
    out = work / f"up{i}"
    out.mkdir()
    receiver = lab.run("a", f"recv{i}", [*hilltop_command(), "--relay-url", MAILBOX,
                                         "receive", "--accept-file", "--hide-progress", code],
                       cwd=out)
    end = page_end(page)
    if receiver.finish(120) != 0 or end["state"] != "done":
        raise SystemExit(f"transfer failed:\n{receiver.describe()}\n{page.describe()}")
    wall = time.monotonic() - started
    if sha256(out / big.name) != sha256(big):
        raise SystemExit("the receiver got different bytes")
    return wall, end


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="50M", help="file size (50M)")
    ap.add_argument("--runs", type=int, default=3, help="transfers each way (3)")
    ap.add_argument("--data", default=os.environ.get("BENCH_DATA", "/tmp/hilltop-bench"),
                    help="where test data is cached")
    args = ap.parse_args()
    run.enter_loopback_namespace()
    if missing := missing_tools():
        raise SystemExit(f"missing: {', '.join(missing)}")
    peers = Path(os.environ.get("HILLTOP_PEERS_VENV", "/tmp/peers"))
    size = run.parse_size(args.size)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hilltop-browser-bench-", dir=data) as tmp:
        work = Path(tmp)
        big = run.make_file(work / "payload.bin", size, False)
        lab = BrowserLab(work, peers / "bin" / "twist")
        print(f"browser bench: {size} bytes, {args.runs} runs each way, "
              f"{os.cpu_count()} CPUs", flush=True)
        try:
            lab.up()
            site = lab.static_host()
            for name, once in (("to the page", lambda i: to_page(lab, big, work, i)),
                               ("from the page", lambda i: from_page(lab, big, site, work, i))):
                rates = []
                for i in range(args.runs):
                    before = load()
                    wall, end = once(i)
                    rates.append(size / wall / 1e6)
                    print(f"  {name}, run {i + 1}: {wall:6.2f} s {rates[-1]:5.1f} MB/s "
                          f"(page: {end['result']}; heap peak {end['heap_peak_mb']} MB) "
                          f"load {before} -> {load()}", flush=True)
                rates.sort()
                print(f"== {name}: median {rates[len(rates) // 2]:.1f} MB/s", flush=True)
        finally:
            lab.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
