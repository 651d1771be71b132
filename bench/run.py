"""Throughput and footprint bench: official magic-wormhole 0.24 against hilltop, A B A B...

Runs inside a loopback-only network namespace (it re-executes itself through
``integration/netns-run`` when the machine has other interfaces, because both CLIs advertise
every non-loopback address as a direct hint). It starts a local official mailbox and transit
relay, then times complete sender+receiver runs (process start to both exits), alternating
the official pair and the hilltop pair so drift in the machine affects both alike.

    python bench/run.py                       # everything, 3 pairs, 1 GiB
    python bench/run.py --size 256M --pairs 1 --only direct,text   # a quick look

Peak RSS and CPU time come from ``os.wait4`` on each child (no wrappers, no sampling).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
NETNS_RUN = REPO / "integration" / "netns-run"
PEERS = Path(os.environ.get("HILLTOP_PEERS_VENV", "/tmp/peers"))
OFFICIAL = str(PEERS / "bin" / "wormhole")
TWIST = str(PEERS / "bin" / "twist")
HILLTOP = os.environ.get("HILLTOP_WORMHOLE", str(Path(sys.executable).parent / "wormhole"))
SCENARIOS = ("direct", "relay", "files", "small", "text", "cross")
DATA = os.environ.get("BENCH_DATA", "/tmp/hilltop-bench")
"""Where test data is cached (``--data``)."""


def parse_size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1] if text and text[-1] in units else ""
    return int(float(text[: len(text) - len(unit)]) * units[unit])


def loopback_only() -> bool:
    return sorted(os.listdir("/sys/class/net")) == ["lo"]


def enter_loopback_namespace() -> None:
    """Re-run this benchmark inside integration/netns-run unless it already is there: the
    peers advertise every address they have, and a benchmark must reach only loopback."""
    if loopback_only():
        return
    if os.environ.get("HILLTOP_BENCH_IN_NETNS"):
        raise SystemExit("still not loopback-only inside netns-run; refusing to run")
    os.environ["HILLTOP_BENCH_IN_NETNS"] = "1"
    os.execv(str(NETNS_RUN), [str(NETNS_RUN), sys.executable, *sys.argv])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise SystemExit(f"server on port {port} did not start")


@dataclass
class Proc:
    """One finished child: wall time from the common start, peak RSS, CPU seconds."""

    rc: int
    wall: float
    rss_mb: float
    user: float  # CPU seconds in the process itself...
    system: float  # ...and in the kernel on its behalf
    stderr: str = ""
    marks: dict[str, float] = field(default_factory=dict)
    """With ``--timeline``: seconds from the common start to the client's own "command
    dispatch" and "exit" events (its ``--dump-timing`` file; both clients write these two)."""

    @property
    def cpu(self) -> float:
        return self.user + self.system


@dataclass
class Result:
    wall: float
    sender: Proc
    receiver: Proc


@dataclass
class Series:
    label: str
    runs: list[Result] = field(default_factory=list)

    def median(self, pick) -> float:  # noqa: ANN001
        return statistics.median(pick(r) for r in self.runs)


TIMELINE_EVENTS = ("command dispatch", "exit")
"""The events official 0.24 and hilltop both write under these names with ``--dump-timing``:
launch -> dispatch is start-up, dispatch -> exit the protocol and the transfer, exit -> reaped
the process's teardown, which the user waits for too (the shell prompt returns at the exit)."""


class Bench:
    def __init__(self, work: Path, verbose: bool, timeline: bool = False) -> None:
        self.work = work
        self.verbose = verbose
        self.timeline = timeline
        self.servers: list[subprocess.Popen] = []
        self.counter = itertools.count(1)

    def start_servers(self) -> None:
        mport, tport = free_port(), free_port()
        db = self.work / "mailbox.sqlite"
        logs = open(self.work / "servers.log", "wb")  # noqa: SIM115 - lives as long as the bench
        self.servers.append(subprocess.Popen(
            [TWIST, "wormhole-mailbox", f"--port=tcp:{mport}:interface=127.0.0.1",
             f"--channel-db={db}"], stdout=logs, stderr=logs, cwd=self.work))
        self.servers.append(subprocess.Popen(
            [TWIST, "transitrelay", f"--port=tcp:{tport}:interface=127.0.0.1"],
            stdout=logs, stderr=logs, cwd=self.work))
        wait_port(mport)
        wait_port(tport)
        os.environ["WORMHOLE_RELAY_URL"] = f"ws://127.0.0.1:{mport}/v1"
        os.environ["WORMHOLE_TRANSIT_HELPER"] = f"tcp:127.0.0.1:{tport}"

    def stop_servers(self) -> None:
        for p in self.servers:
            p.terminate()
        for p in self.servers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(5)

    def transfer(self, sender: str, receiver: str, what: list[str], relay: bool,
                 flags: tuple[str, ...] = ()) -> Result:
        """One complete transfer; ``sender``/``receiver`` are "official" or "hilltop";
        ``flags`` go to both commands (e.g. ``--transports webrtc``, see bench/webrtc.py)."""
        run = next(self.counter)
        code = f"{run}-bench-run"
        # The inbox is set aside, deleted only when the bench ends: on an ext4 without a
        # journal (this VM's) creating a file right after thousands were deleted costs
        # ~0.8 ms each (the inode allocator skips "recently deleted" inodes one by one), which
        # made every receiver of the 10,000-file tree spend 5-8 s of system time on the
        # previous run's deletions instead of its own work.
        inbox = self.fresh_inbox(run)
        send_cmd = [OFFICIAL if sender == "official" else HILLTOP, "send", "--hide-progress",
                    "--code", code, *what]
        recv_cmd = [OFFICIAL if receiver == "official" else HILLTOP, "receive",
                    "--hide-progress", "--accept-file", code]
        send_cmd[2:2] = flags
        recv_cmd[2:2] = flags
        dumps: dict[str, Path] = {}
        if self.timeline:
            for key, cmd in (("s", send_cmd), ("r", recv_cmd)):
                dumps[key] = self.work / f"timing-{run}-{key}.json"
                cmd[1:1] = ["--dump-timing", str(dumps[key])]
        if relay:
            send_cmd[2:2] = ["--no-listen"] if sender == "official" else ["--transports",
                                                                            "relay"]
            recv_cmd[2:2] = ["--no-listen"] if receiver == "official" else ["--transports",
                                                                             "relay"]
        result = self.run_pair(send_cmd, recv_cmd, inbox, f"{sender}->{receiver} {what}",
                               dumps)
        if "--text" not in what:
            self.check_received(Path(what[-1]), inbox)
        return result

    def raw_copy(self, path: Path, sync: bool) -> Result:
        """The reference floor: bench/rawcopy.py's sendfile -> recv_into -> write, same file."""
        inbox = self.fresh_inbox(next(self.counter))
        port = free_port()
        script = str(HERE / "rawcopy.py")
        recv_cmd = [sys.executable, script, "recv", str(port), str(inbox / path.name)]
        result = self.run_pair([sys.executable, script, "send", str(port), str(path)],
                               recv_cmd + (["--fsync"] if sync else []), inbox, "raw copy")
        self.check_received(path, inbox)
        return result

    def fresh_inbox(self, run: int) -> Path:
        inbox = self.work / "inbox"
        if inbox.exists():
            # Set aside, deleted only when the bench ends (see transfer).
            inbox.rename(self.work / f"old-inbox-{run}")
        inbox.mkdir()
        return inbox

    def run_pair(self, send_cmd: list[str], recv_cmd: list[str], inbox: Path,
                 label: str, dumps: dict[str, Path] | None = None) -> Result:
        """Start both commands together and reap them with ``wait4`` (peak RSS, CPU)."""
        start = time.monotonic()
        epoch = time.time()  # --dump-timing files hold seconds since the epoch
        procs = {
            "s": subprocess.Popen(send_cmd, cwd=self.work, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE),
            "r": subprocess.Popen(recv_cmd, cwd=inbox, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE),
        }
        done: dict[str, Proc] = {}
        by_pid = {p.pid: k for k, p in procs.items()}
        while len(done) < 2:
            pid, status, usage = os.wait4(-1, 0)
            if pid not in by_pid:
                continue
            key = by_pid[pid]
            p = procs[key]
            p.returncode = os.waitstatus_to_exitcode(status)
            done[key] = Proc(p.returncode, time.monotonic() - start,
                             usage.ru_maxrss / 1024, usage.ru_utime, usage.ru_stime)
        wall = time.monotonic() - start
        for key, p in procs.items():
            done[key].stderr = p.stderr.read().decode(errors="replace") if p.stderr else ""
            p.stderr.close()
        for key in ("s", "r"):
            if done[key].rc != 0:
                raise SystemExit(f"{label}: {key} failed "
                                 f"(rc {done[key].rc}):\n{done[key].stderr}")
        for key, dump in (dumps or {}).items():
            done[key].marks = client_marks(dump, epoch)
        return Result(wall, done["s"], done["r"])

    def check_received(self, sent: Path, inbox: Path) -> None:
        got = inbox / sent.name
        if sent.is_file():
            if not got.is_file() or got.stat().st_size != sent.stat().st_size:
                raise SystemExit(f"received {got} is missing or has the wrong size")
            if os.environ.get("BENCH_CMP"):
                subprocess.run(["cmp", str(sent), str(got)], check=True)
        else:
            count = sum(len(f) for _, _, f in os.walk(got))
            want = sum(len(f) for _, _, f in os.walk(sent))
            if count != want:
                raise SystemExit(f"received {count} of {want} files")
            if os.environ.get("BENCH_CMP"):
                subprocess.run(["diff", "-rq", str(sent), str(got)], check=True)


def client_marks(dump: Path, epoch: float) -> dict[str, float]:
    """The first time of each of :data:`TIMELINE_EVENTS` in a ``--dump-timing`` file, in
    seconds since ``epoch`` (the pair's start)."""
    marks: dict[str, float] = {}
    for event in json.loads(dump.read_text()):
        if event["name"] in TIMELINE_EVENTS:
            marks.setdefault(event["name"], event["start"] - epoch)
    return marks


def timeline_line(s: Series) -> str | None:
    """Each side's median launch -> dispatch, dispatch -> exit event, exit event -> reaped
    (``--timeline``): where a pair's wall time goes, start-up, protocol or teardown."""
    def spans(side: str) -> tuple[float, float, float] | None:
        procs = [getattr(r, side) for r in s.runs]
        if not all(set(TIMELINE_EVENTS) <= p.marks.keys() for p in procs):
            return None
        return (statistics.median(p.marks["command dispatch"] for p in procs),
                statistics.median(p.marks["exit"] - p.marks["command dispatch"] for p in procs),
                statistics.median(p.wall - p.marks["exit"] for p in procs))
    send, recv = spans("sender"), spans("receiver")
    if send is None or recv is None:
        return None
    parts = ("launch->dispatch", "dispatch->exit", "exit->reaped")
    return (f"  {'':<20} timeline send/recv (median ms): " + ", ".join(
        f"{name} {a * 1000:.0f}/{b * 1000:.0f}" for name, a, b in zip(parts, send, recv,
                                                                     strict=True)))


def make_file(path: Path, size: int, sparse: bool) -> Path:
    if path.exists() and path.stat().st_size == size:
        return path
    if sparse:
        with open(path, "wb") as f:
            f.truncate(size)
        return path
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        left = size
        rnd = random.Random(1)
        while left > 0:
            n = min(left, len(block))
            start = rnd.randrange(0, 4096)
            f.write(block[start:] + block[:start] if n == len(block) else block[:n])
            left -= n
    return path


def make_tree(root: Path, count: int) -> Path:
    marker = root / ".complete"
    if marker.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    rnd = random.Random(7)
    pool = os.urandom(128 * 1024)
    for i in range(count):
        d = root / f"d{i // 500:02d}"
        d.mkdir(parents=True, exist_ok=True)
        size = rnd.randint(1024, 64 * 1024)
        off = rnd.randrange(0, len(pool) - size)
        (d / f"f{i:05d}.bin").write_bytes(pool[off : off + size])
    marker.touch()
    return root


def fmt(x: float) -> str:
    return f"{x:7.2f}"


def report(title: str, official: Series, hilltop: Series, size: int | None,
           references: tuple[Series, ...] = ()) -> str:
    lines = [f"== {title}"]
    for s in (official, hilltop, *references):
        wall = s.median(lambda r: r.wall)
        rate = f"  {size / wall / 1e6:7.1f} MB/s" if size else ""
        lines.append(
            f"  {s.label:<20} median {fmt(wall)} s{rate}   runs "
            + " ".join(f"{r.wall:.2f}" for r in s.runs)
            + f"   RSS send/recv {s.median(lambda r: r.sender.rss_mb):5.1f}/"
            f"{s.median(lambda r: r.receiver.rss_mb):5.1f} MB"
            f" (max {max(r.sender.rss_mb for r in s.runs):.1f}/"
            f"{max(r.receiver.rss_mb for r in s.runs):.1f})"
            f"   CPU send/recv {s.median(lambda r: r.sender.cpu):5.2f}/"
            f"{s.median(lambda r: r.receiver.cpu):5.2f} s")
        spans = timeline_line(s)
        if spans:
            lines.append(spans)
    ratio = official.median(lambda r: r.wall) / hilltop.median(lambda r: r.wall)
    lines.append(f"  ratio {official.label} / {hilltop.label} = {ratio:.2f}x, "
                 f"{hilltop.label} / {official.label} = {1 / ratio:.2f}")
    for ref in references:
        lines.append(f"  ratio {hilltop.label} / {ref.label} = "
                     f"{hilltop.median(lambda r: r.wall) / ref.median(lambda r: r.wall):.2f}")
    lines.append(pair_ratios(official, hilltop))
    return "\n".join(lines)


def pair_ratios(official: Series, hilltop: Series) -> str:
    """Each A/B pair's own ratio: the two runs of a pair are back to back, so drift in the
    machine (page-cache cost, a slower host) mostly cancels in it. Their spread says how
    much a ratio near 1.0 can be trusted; the median of the medians above does not."""
    ratios = [a.wall / b.wall for a, b in zip(official.runs, hilltop.runs, strict=False)]
    faster = sum(r > 1.0 for r in ratios)
    return (f"  pair ratios {' '.join(f'{r:.2f}' for r in ratios)}   median "
            f"{statistics.median(ratios):.2f}x, {hilltop.label} faster in {faster} of "
            f"{len(ratios)} pairs")


def load_average() -> str:
    """The machine's load, printed beside the figures: a shared machine's runs are noisy."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def compile_like_an_install() -> None:
    """Give hilltop's modules bytecode files, as installing a package does.

    pip compiles every module it installs, so official's venv has them; an editable checkout
    only gets them when Python may write them, and some environments (this machine's) set
    ``PYTHONDONTWRITEBYTECODE=1``: every hilltop process then compiled its ~60 modules from
    source, ~0.12-0.15 s of CPU per process that no installed copy pays. ``compileall``
    writes them whatever that variable says, next to the sources (``__pycache__``, ignored
    by git), for the interpreter the hilltop command runs on.
    """
    python = str(Path(HILLTOP).with_name("python"))
    where = subprocess.run(
        [python, "-c", "import importlib.util as u\n"
         "for n in ('hilltop', 'hilltop.cli', 'hilltop.hints', 'hilltop.transports'):\n"
         "    print(*u.find_spec(n).submodule_search_locations, sep='\\n')"],
        check=True, capture_output=True, text=True).stdout.split()
    subprocess.run([python, "-m", "compileall", "-q", *where], check=True)


def without_webrtc(work: Path) -> str:
    """Measure the default install, without the optional ``webrtc`` extra (aiortc) even when
    the venv has it: a config file in a private ``XDG_CONFIG_HOME`` disables the transport for
    the bench's hilltop processes only. ``--with-webrtc`` measures the extra installed (it
    joins a race 0.5 s late, docs/webrtc.md)."""
    config = work / "config" / "hilltop" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[transports]\ndisabled = ["webrtc"]\n')
    os.environ["XDG_CONFIG_HOME"] = str(config.parent.parent)
    return "off (as without the webrtc extra)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1G", help="file size for direct/relay/cross (1G)")
    ap.add_argument("--pairs", type=int, default=3, help="A/B pairs per scenario (3)")
    ap.add_argument("--files", type=int, default=10000, help="files in the tree (10000)")
    ap.add_argument("--only", default=",".join(SCENARIOS),
                    help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--sparse", action="store_true",
                    help="use a sparse file (truncate) instead of random data")
    ap.add_argument("--hilltop-only", action="store_true",
                    help="skip official runs (footprint checks, e.g. --size 4G --sparse)")
    ap.add_argument("--data", default=DATA,
                    help="where test data is cached")
    ap.add_argument("--with-webrtc", action="store_true",
                    help="let hilltop race webrtc too when the 'webrtc' extra is installed "
                         "(default: measure what a plain 'pip install hilltop' runs)")
    ap.add_argument("--timeline", action="store_true",
                    help="give both clients --dump-timing and print each side's start-up, "
                         "protocol and teardown (medians)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    enter_loopback_namespace()

    size = parse_size(args.size)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    suffix = "sparse" if args.sparse else "random"
    big = make_file(data / f"blob-{size}-{suffix}.bin", size, args.sparse)

    compile_like_an_install()
    with tempfile.TemporaryDirectory(prefix="hilltop-bench-", dir=data) as tmp:
        webrtc = "raced" if args.with_webrtc else without_webrtc(Path(tmp))
        bench = Bench(Path(tmp), args.verbose, args.timeline)
        bench.start_servers()
        out: list[str] = [f"hilltop bench: size {size} bytes, {args.pairs} pairs, "
                          f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}, "
                          f"webrtc {webrtc}, {load_average()}"]
        print(out[0], flush=True)
        try:
            plans: list[tuple[str, list[tuple[str, str]], list[str], bool, int | None]] = []
            if "direct" in only:
                plans.append(("(a) file, direct TCP", [("official", "official"),
                              ("hilltop", "hilltop"), ("raw", "raw"), ("raw", "raw+fsync")],
                              [str(big)], False, size))
            if "relay" in only:
                plans.append(("(b) file, via transit relay", [("official", "official"),
                              ("hilltop", "hilltop")], [str(big)], True, size))
            if "files" in only:
                tree = make_tree(data / f"tree-{args.files}", args.files)
                plans.append((f"(c) directory of {args.files} files", [
                    ("official", "official"), ("hilltop", "hilltop")], [str(tree)], False,
                    None))
            if "small" in only:
                tiny = data / "three-bytes.txt"
                if not tiny.exists():
                    tiny.write_bytes(b"hi\n")
                plans.append(("(e) 3-byte file", [("official", "official"),
                              ("hilltop", "hilltop")], [str(tiny)], False, None))
            if "text" in only:
                plans.append(("(d) 10-byte text", [("official", "official"),
                              ("hilltop", "hilltop")], ["--text", "0123456789"], False, None))
            if "cross" in only:
                plans.append(("(a') cross: hilltop->official vs official->official", [
                    ("official", "official"), ("hilltop", "official")], [str(big)], False,
                    size))
                plans.append(("(a'') cross: official->hilltop vs official->official", [
                    ("official", "official"), ("official", "hilltop")], [str(big)], False,
                    size))
            for title, pair, what, relay, nbytes in plans:
                series = [Series("raw copy" + r.removeprefix("raw") if s == "raw"
                                 else f"{s}->{r}") for s, r in pair]
                for _ in range(args.pairs):
                    for s, (snd, rcv) in zip(series, pair, strict=True):
                        if args.hilltop_only and "official" in (snd, rcv):
                            continue
                        if snd == "raw":
                            res = bench.raw_copy(Path(what[-1]), sync=rcv.endswith("fsync"))
                        else:
                            res = bench.transfer(snd, rcv, what, relay)
                        s.runs.append(res)
                        if args.verbose:
                            print(f"  {title}: {s.label} {res.wall:.2f} s "
                                  f"rss {res.sender.rss_mb:.0f}/{res.receiver.rss_mb:.0f} MB"
                                  f" user+sys send {res.sender.user:.2f}+"
                                  f"{res.sender.system:.2f} recv {res.receiver.user:.2f}+"
                                  f"{res.receiver.system:.2f} s", flush=True)
                if args.hilltop_only:
                    s = series[1]
                    text = (f"== {title}\n  {s.label} median "
                            f"{s.median(lambda r: r.wall):.2f} s, RSS send/recv "
                            f"{max(r.sender.rss_mb for r in s.runs):.1f}/"
                            f"{max(r.receiver.rss_mb for r in s.runs):.1f} MB (max)")
                else:
                    text = report(title, series[0], series[1], nbytes, tuple(series[2:]))
                out.append(text)
                print(text, flush=True)
        finally:
            bench.stop_servers()
    print(f"end: {load_average()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
