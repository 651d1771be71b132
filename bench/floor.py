"""The parts of a 1 GiB hilltop -> hilltop transfer that no protocol work can remove, each
timed alone on this machine (issue 31: "if a floor above 1.5x exists, measure it per part").

    python bench/floor.py                 # 1 GiB, 3 rounds, in /tmp/hilltop-bench
    python bench/floor.py --size 256M --rounds 5

Per round, medians printed at the end (wall seconds; CPU seconds of this process):

* ``seal``/``open``: hilltop's record cipher between two hilltop peers (AES-256-GCM, 256 KiB
  records, into reused buffers, as ``hilltop.transit.bulkpump`` does), one thread;
* ``copy``: one pass of memory copying the same bytes (what each extra pass would cost);
* ``write+fsync``: writing the file through the page cache, then ``fsync``, as the raw copy
  with ``--fsync`` does; ``direct+fsync``: with O_DIRECT from aligned buffers, as hilltop's
  receiver writes a big file from a hilltop peer.
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import sys
import time
from pathlib import Path

from hilltop.transit import records

RECORD = 256 * 1024
CHUNK = 1 << 20


def timed(fn) -> tuple[float, float]:  # noqa: ANN001
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def cipher_rounds(size: int) -> tuple[float, float]:
    key = os.urandom(32)
    sealer = records.RecordSealer(key, records.AES256GCM)
    opener = records.RecordOpener(key, records.AES256GCM)
    plain = memoryview(os.urandom(RECORD))
    frame = bytearray(records.OVERHEAD + RECORD)
    out = bytearray(RECORD)
    first = bytes(records.RecordSealer(key, records.AES256GCM).seal(plain))
    one_frame = first[records.LENGTH_SIZE:]  # nonce 0: opened again and again below

    def seal() -> None:
        for _ in range(size // RECORD):
            sealer.seal_into(plain, frame)

    def open_all() -> None:
        for _ in range(size // RECORD):
            opener.expected = 0
            opener.open(one_frame, out)

    return timed(seal)[0], timed(open_all)[0]


def copy_pass(size: int) -> float:
    src = bytearray(os.urandom(CHUNK))
    dst = bytearray(CHUNK)

    def copy() -> None:
        for _ in range(size // CHUNK):
            dst[:] = src

    return timed(copy)[0]


def write_then_fsync(path: Path, size: int, direct: bool) -> tuple[float, float]:
    buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT needs
    buf.write(os.urandom(CHUNK))
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags, 0o600)
    try:
        began = time.perf_counter()
        for _ in range(size // CHUNK):
            os.write(fd, buf)
        written = time.perf_counter()
        os.fsync(fd)
        return written - began, time.perf_counter() - written
    finally:
        os.close(fd)
        path.unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1G")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data", default=os.environ.get("BENCH_DATA", "/tmp/hilltop-bench"))
    args = ap.parse_args()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    size = int(args.size[:-1]) * units[args.size[-1]] if args.size[-1] in units \
        else int(args.size)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        seal, opened = cipher_rounds(size)
        rows.setdefault("seal (AES-256-GCM)", []).append(seal)
        rows.setdefault("open (AES-256-GCM)", []).append(opened)
        rows.setdefault("copy (one memory pass)", []).append(copy_pass(size))
        for direct in (False, True):
            wrote, synced = write_then_fsync(data / "floor.tmp", size, direct)
            how = "O_DIRECT" if direct else "page cache"
            rows.setdefault(f"write ({how})", []).append(wrote)
            rows.setdefault(f"fsync after ({how})", []).append(synced)
    print(f"floor parts for {size} bytes, medians of {args.rounds} "
          f"(load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    for name, values in rows.items():
        print(f"  {name:28s} {statistics.median(values):7.3f} s   "
              f"({' '.join(f'{v:.3f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
