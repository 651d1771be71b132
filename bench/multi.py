"""Several-files bench: ``wormhole send a b c d e`` (1,000 small files in 5 folders, hilltop
to hilltop, ``files-v1``) against official 0.24 sending the same files as one folder, its
nearest equivalent (it takes one path), and hilltop sending that folder too, A B C A B C...

    python bench/multi.py                     # 1,000 files, 3 rounds
    python bench/multi.py --files 5000 --pairs 5

Each run is timed from starting both processes until both have exited; peak RSS and CPU
seconds come from ``os.wait4``. Every received tree is compared with the sent one file by
file (names and SHA-256). Runs inside a loopback-only namespace, with the servers, data and
webrtc setting of ``bench/run.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import (  # noqa: E402 - the sibling bench module, found through the path above
    Bench,
    Result,
    Series,
    compile_like_an_install,
    enter_loopback_namespace,
    report,
    without_webrtc,
)

FOLDERS = ("alpha", "bravo", "charlie", "delta", "echo")


def make_folders(root: Path, count: int) -> Path:
    """``count`` files of 1-64 KiB spread over the five folders of ``root`` (cached)."""
    marker = root / ".complete"
    if marker.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    rnd = random.Random(18)
    pool = os.urandom(128 * 1024)
    for i in range(count):
        folder = root / FOLDERS[i % len(FOLDERS)]
        folder.mkdir(parents=True, exist_ok=True)
        size = rnd.randint(1024, 64 * 1024)
        offset = rnd.randrange(0, len(pool) - size)
        (folder / f"f{i:05d}.bin").write_bytes(pool[offset: offset + size])
    marker.touch()
    return root


def digests(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".complete"}


def run_one(bench: Bench, kind: str, root: Path, want: dict[str, str]) -> Result:
    """``official``/``folder``: the parent folder as one path; ``files``: five paths."""
    who = "official" if kind == "official" else "hilltop"
    what = [str(root / f) for f in FOLDERS] if kind == "files" else [str(root)]
    result = bench.transfer(who, who, what, relay=False)
    inbox = bench.work / "inbox"
    got = digests(inbox if kind == "files" else inbox / root.name)
    if got != want:
        raise SystemExit(f"{kind}: the received files differ from the sent ones "
                         f"({len(got)} of {len(want)} files)")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1000, help="files in the five folders (1000)")
    ap.add_argument("--pairs", type=int, default=3, help="rounds of the three (3)")
    ap.add_argument("--data", default=os.environ.get("BENCH_DATA", "/tmp/hilltop-bench"),
                    help="where test data is cached")
    ap.add_argument("--with-webrtc", action="store_true",
                    help="let hilltop race webrtc too (default: off, as in bench/run.py)")
    args = ap.parse_args()

    enter_loopback_namespace()

    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    root = make_folders(data / f"multi-{args.files}", args.files)
    want = digests(root)
    size = sum((root / k).stat().st_size for k in want)
    compile_like_an_install()
    with tempfile.TemporaryDirectory(prefix="hilltop-bench-multi-", dir=data) as tmp:
        webrtc = "raced" if args.with_webrtc else without_webrtc(Path(tmp))
        bench = Bench(Path(tmp), verbose=False)
        bench.start_servers()
        print(f"hilltop several-files bench: {len(want)} files ({size} bytes) in "
              f"{len(FOLDERS)} folders, {args.pairs} rounds, {os.cpu_count()} CPUs, "
              f"python {sys.version.split()[0]}, webrtc {webrtc}", flush=True)
        try:
            official = Series("official folder")
            folder = Series("hilltop folder")
            files = Series("hilltop 5 args")
            for _ in range(args.pairs):
                official.runs.append(run_one(bench, "official", root, want))
                folder.runs.append(run_one(bench, "folder", root, want))
                files.runs.append(run_one(bench, "files", root, want))
            print(report("(m) send a b c d e (files-v1) vs official sending their folder",
                         official, files, size), flush=True)
            print(report("(m) the same against hilltop sending the folder (a zip)",
                         folder, files, size), flush=True)
        finally:
            bench.stop_servers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
