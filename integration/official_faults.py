"""Official magic-wormhole 0.24 in the fault cases of docs/reliability.md: its column, re-checkable.

Not a test (it asserts nothing): it puts official, on both sides unless the case needs
another peer, in each case of the tables where hilltop's outcome is tested, and prints one
line per run: ``CASE: what happened`` (exit status and time from the fault, the exception
of a traceback, the last stderr line, what is left in the target folder). A process still
running after the case's wait is killed and said to be. Run it as root (tmpfs mounts) inside
the loopback-only namespace, with the official peers' venv::

    HILLTOP_PEERS_VENV=/path/to/peers-venv \\
        integration/netns-run .venv-ci/bin/python integration/official_faults.py [CASE ...]

No CASE runs them all (about 8 minutes); ``--list`` names them, ``--verbose`` adds each
side's whole stderr. The machinery is the tests':
``conftest.Peers``, ``faultkit.OwnRelay`` (a 10 MB/s path, so a 30 MB file is mid-transfer
for seconds), the tmpfs of ``test_faults_local``. Every process is killed by its PID.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import Peer, Peers, Servers, only_loopback  # noqa: E402
from faultkit import SIZE, OwnRelay, cont, stop, wait_until_partial  # noqa: E402
from serverkit import MailboxServer  # noqa: E402
from test_faults_local import fill_up, mount_tmpfs, never_acking, until_asked  # noqa: E402
from test_faults_network import william_giving_up  # noqa: E402
from test_hostile_mailbox import start_hostile_mailbox  # noqa: E402
from transferkit import digest, random_file  # noqa: E402

WAIT = 20.0
"""Seconds a side may take after the fault before it is called hanging and killed."""
SIGNALS = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM}
VERBOSE = False
"""``--verbose``: every ended side's whole stderr too."""
EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Closed|Exit)\b)", re.M)


@dataclass
class Case:
    """What one run gets: peers on its own mailbox and relay, and a folder of its own."""

    peers: Peers
    relay: OwnRelay
    mailbox: MailboxServer
    tmp: Path

    def dest(self, name: str = "dest") -> Path:
        d = self.tmp / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def pair(self, src: Path, dest: Path, *receive: str, env: dict[str, str] | None = None
             ) -> tuple[Peer, Peer]:
        """Official sends ``src`` to official in ``dest``, both only through the slow relay."""
        s = self.peers.official("send", "--no-listen", str(src))
        r = self.peers.official("receive", "--no-listen", "--accept-file", *receive,
                                s.wait_for_code(), cwd=dest, env=env)
        return s, r

    def mid_transfer(self, dest: Path) -> tuple[Peer, Peer]:
        """:meth:`pair` of a 30 MB file, once a quarter of it is in the receiver's partial."""
        src = random_file(self.tmp / "big.bin", SIZE)
        s, r = self.pair(src, dest)
        wait_until_partial(dest, src.name, SIZE // 4, s, r, part=f"{src.name}.tmp")
        return s, r


def ended(peer: Peer | subprocess.Popen[bytes], wait: float = WAIT, *,
          stderr: str | None = None) -> str:
    """How ``peer`` ended within ``wait`` seconds from now, in a few words."""
    proc = peer.proc if isinstance(peer, Peer) else peer
    started = time.monotonic()
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        shown = peer.finish(5).stderr.strip().splitlines() if isinstance(peer, Peer) else []
        return f"still running after {wait:.0f} s (killed)" + (
            f", its last line {shown[-1][-110:]!r}" if shown else "")
    took = time.monotonic() - started
    if isinstance(peer, Peer):
        stderr = peer.finish(5).stderr
    words = [f"exit {proc.returncode} after {took:.1f} s"]
    text = stderr or ""
    if "Traceback" in text:
        words.append(f"traceback ({', '.join(dict.fromkeys(EXCEPTION.findall(text)))})")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.lower().startswith("error")]
    if errors and errors[0] != lines[-1]:
        words.append(f"{errors[0][:110]!r}")
    if lines:
        words.append(f"last line {lines[-1][:110]!r}")
    if VERBOSE:
        words.append("stderr:\n    " + "\n    ".join(text.splitlines()))
    return "; ".join(words)


def left(dest: Path) -> str:
    names = sorted(dest.iterdir())
    if not names:
        return "nothing left"
    return "left " + ", ".join(f"{p.name}{'/' if p.is_dir() else ''} ({size(p)})"
                               for p in names)


def size(path: Path) -> str:
    if not path.is_dir():
        return f"{path.stat().st_size:,} B"
    files = [p for p in path.rglob("*") if p.is_file()]
    return f"{len(files)} files, {sum(p.stat().st_size for p in files):,} B"


@contextlib.contextmanager
def tmpfs(where: Path, size: int) -> Iterator[Path]:
    mount_tmpfs(where, size)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


# --- network faults ---------------------------------------------------------------------------
def sender_killed(c: Case) -> Iterator[str]:
    dest = c.dest()
    s, r = c.mid_transfer(dest)
    s.kill()
    yield f"receiver: {ended(r)}; {left(dest)}"


def frozen(side: str) -> Callable[[Case], Iterator[str]]:
    def run(c: Case) -> Iterator[str]:
        dest = c.dest()
        s, r = c.mid_transfer(dest)
        hit, other = (s, r) if side == "sender" else (r, s)
        stop(hit)
        try:
            yield f"{'receiver' if side == 'sender' else 'sender'}: {ended(other)}; {left(dest)}"
        finally:
            cont(hit)
        yield f"woken {side}: {ended(hit)}; {left(dest)}"
    return run


def mailbox_restarted(c: Case) -> Iterator[str]:
    dest, src = c.dest(), random_file(c.tmp / "small.bin", 1_000_000)
    s = c.peers.official("send", "--no-listen", str(src))
    code = s.wait_for_code()
    c.mailbox.restart()
    r = c.peers.official("receive", "--no-listen", "--accept-file", code, cwd=dest)
    yield f"receiver: {ended(r, 60)}; sender: {ended(s, 60)}"
    arrived = (dest / src.name).exists() and digest(dest / src.name) == digest(src)
    yield f"the file {'arrived whole' if arrived else 'did not arrive'}"


def peer_gives_up(c: Case) -> Iterator[str]:
    s = william_giving_up(c.peers, c.tmp)
    dest = c.dest()
    r = c.peers.official("receive", "--accept-file", s.wait_for_code(), cwd=dest)
    yield f"wormhole-william sender: {ended(s, 30)}"
    yield f"official receiver: {ended(r, 30)}; {left(dest)}"


def never_answered(c: Case) -> Iterator[str]:
    dest, src = c.dest(), random_file(c.tmp / "small.bin", 1000)
    s = c.peers.official("send", str(src))
    r, _ = until_asked(question_argv(c, "receive", s.wait_for_code()), dest, b"ok? (Y/n)",
                       on_stdout=True)
    try:
        yield f"sender, its receiver at the question: {ended(s, 60)}"
    finally:
        r.kill()
        r.wait()


def question_argv(c: Case, *args: str) -> list[str]:
    servers = c.peers.servers
    return [str(servers.official_bin), "--relay-url", servers.relay_url, "--transit-helper",
            servers.transit_helper, *args]


# --- local faults -----------------------------------------------------------------------------
def disk_full(what: str) -> Callable[[Case], Iterator[str]]:
    def run(c: Case) -> Iterator[str]:
        src = c.tmp / "big.bin"
        if what == "file":
            random_file(src, SIZE)
        else:
            for i in range(3):
                random_file(src / f"part{i}.bin", SIZE // 3)
        with tmpfs(c.tmp / "disk", 40 * 1024 * 1024) as disk:
            s, r = c.pair(src, disk)
            if what == "file":
                wait_until_partial(disk, src.name, SIZE // 5, s, r, part="big.bin.tmp")
            else:  # the zip goes to $TMPDIR, not the target: fill it once data flows
                s.wait_for_line(r"Sending \(")
                time.sleep(1.0)
            fill_up(disk)
            yield f"receiver: {ended(r, 60)}; {left(disk)}"
            yield f"sender: {ended(s)}"
    return run


def too_big(c: Case) -> Iterator[str]:
    src = random_file(c.tmp / "huge.bin", 45 * 1000 * 1000)
    with tmpfs(c.tmp / "disk", 40 * 1024 * 1024) as disk:
        c.relay.proxy.reset()
        s, r = c.pair(src, disk)
        yield f"receiver: {ended(r)}; {left(disk)}"
        yield f"sender: {ended(s)}; {c.relay.proxy.reset():,} B through the relay"


def folder_and_zip(c: Case) -> Iterator[str]:
    """30 MB of files (an incompressible zip of 30 MB) into 45 MB free. Official spools the
    zip to $TMPDIR: here on the same disk, the case the row is about."""
    src = c.tmp / "folder"
    for i in range(3):
        random_file(src / f"part{i}.bin", 10 * 1000 * 1000)
    with tmpfs(c.tmp / "disk", 45 * 1000 * 1000) as disk:
        spool = disk / ".spool"
        spool.mkdir()
        s, r = c.pair(src, disk, env={"TMPDIR": str(spool)})
        yield f"receiver (TMPDIR on the disk): {ended(r, 60)}; {left(disk)}"
        yield f"sender: {ended(s)}"


def folder_sync(c: Case) -> Iterator[str]:
    """Which sync calls official makes receiving a folder (strace; the power cut is not
    simulated)."""
    src = c.tmp / "folder"
    for i in range(3):
        random_file(src / f"part{i}.bin", 100_000)
    dest, log = c.dest(), c.tmp / "strace.log"
    s = c.peers.official("send", str(src))
    r = c.peers.run("official", ["strace", "-f", "-qq", "-o", str(log), "-e",
                                 "trace=fsync,fdatasync,syncfs,sync,sync_file_range",
                                 *question_argv(c, "receive", "--accept-file",
                                                s.wait_for_code())],
                    relay_url=c.peers.servers.relay_url, cwd=dest)
    yield f"receiver: {ended(r, 60)}; sender: {ended(s)}"
    calls = [ln for ln in log.read_text().splitlines() if "(" in ln]
    yield f"{len(calls)} sync calls: {sorted({ln.split('(')[0].split()[-1] for ln in calls})}"


# --- signals ----------------------------------------------------------------------------------
def each_signal(run: Callable[[Case, signal.Signals], Iterator[str]]
                ) -> Callable[[Case], Iterator[str]]:
    def both(c: Case) -> Iterator[str]:
        for name, sig in SIGNALS.items():
            for line in run(c, sig):
                yield f"{name}: {line}"
    return both


def signal_start(c: Case, sig: signal.Signals) -> Iterator[str]:
    for delay in (0.1, 0.3):
        proc = subprocess.Popen([str(c.peers.servers.official_bin), "--relay-url",
                                 "ws://127.0.0.1:9/v1", "receive", "10-a-b"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, cwd=c.tmp)
        try:
            time.sleep(delay)
            os.kill(proc.pid, sig)
            _, err = proc.communicate(timeout=WAIT)
            yield f"after {delay} s: {ended(proc, stderr=err.decode())}"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def signal_waiting(c: Case, sig: signal.Signals) -> Iterator[str]:
    s = c.peers.official("send", str(random_file(c.tmp / "small.bin", 1000)))
    s.wait_for_code()
    time.sleep(0.5)
    os.kill(s.pid, sig)
    yield f"sender waiting for its receiver: {ended(s)}"


def interrupted_at(proc: subprocess.Popen[bytes], seen: bytes, sig: signal.Signals) -> str:
    """Signal a process :func:`until_asked` left at its question; how it ended."""
    try:
        os.kill(proc.pid, sig)
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            return f"still running after {WAIT:.0f} s (killed)"
        assert proc.stderr is not None
        return ended(proc, 0, stderr=(seen + proc.stderr.read()).decode(errors="replace"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def signal_prompt(c: Case, sig: signal.Signals) -> Iterator[str]:
    proc, _ = until_asked(question_argv(c, "receive"), c.tmp, b"Enter receive wormhole code",
                          on_stdout=True)
    yield f"receiver at the code prompt: {interrupted_at(proc, b'', sig)}"


def signal_question(c: Case, sig: signal.Signals) -> Iterator[str]:
    dest, src = c.dest(sig.name), random_file(c.tmp / "small.bin", 1000)
    s = c.peers.official("send", str(src))
    proc, _ = until_asked(question_argv(c, "receive", s.wait_for_code()), dest, b"ok? (Y/n)",
                          on_stdout=True)
    yield f"receiver: {interrupted_at(proc, b'', sig)}; {left(dest)}"
    yield f"its sender: {ended(s)}"


def signal_mid_transfer(side: str) -> Callable[[Case, signal.Signals], Iterator[str]]:
    def run(c: Case, sig: signal.Signals) -> Iterator[str]:
        dest = c.dest(f"{side}-{sig.name}")
        s, r = c.mid_transfer(dest)
        hit, other = (r, s) if side == "receiving" else (s, r)
        os.kill(hit.pid, sig)
        yield f"{side} side: {ended(hit)}; the other: {ended(other)}; {left(dest)}"
    return run


def signal_ack(c: Case, sig: signal.Signals) -> Iterator[str]:
    """The sender waits for the ack of a receiver that never sends it (hilltop's
    ``never_acking_receiver.py``: official's own would ack within milliseconds)."""
    dest = c.dest(sig.name)
    s, _ = never_acking(c.peers, random_file(c.tmp / "small.bin", 1_000_000), dest,
                        "official")
    time.sleep(0.5)
    os.kill(s.pid, sig)
    yield f"sender waiting for the ack: {ended(s)}"


def no_close(c: Case) -> Iterator[str]:
    started: list[subprocess.Popen[str]] = []
    try:
        url = start_hostile_mailbox("no-close", started)
        s = c.peers.official("send", "--code", "4-purple-sausages", "--text", "hello",
                             relay_url=url, transit_helper="tcp:127.0.0.1:9")
        r = c.peers.official("receive", "4-purple-sausages", relay_url=url,
                             transit_helper="tcp:127.0.0.1:9")
        yield f"receiver: {ended(r, 30)}, stdout {r.output('stdout')!r}"
        yield f"sender: {ended(s, 30)}"
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


CASES: dict[str, Callable[[Case], Iterator[str]]] = {
    "sender-killed": sender_killed,
    "sender-frozen": frozen("sender"),
    "receiver-frozen": frozen("receiver"),
    "mailbox-restarted": mailbox_restarted,
    "peer-gives-up": peer_gives_up,
    "never-answered": never_answered,
    "disk-full-file": disk_full("file"),
    "disk-full-folder": disk_full("folder"),
    "too-big": too_big,
    "folder-and-zip": folder_and_zip,
    "folder-sync": folder_sync,
    "signal-start": each_signal(signal_start),
    "signal-waiting": each_signal(signal_waiting),
    "signal-prompt": each_signal(signal_prompt),
    "signal-question": each_signal(signal_question),
    "signal-receiving": each_signal(signal_mid_transfer("receiving")),
    "signal-sending": each_signal(signal_mid_transfer("sending")),
    "signal-ack": each_signal(signal_ack),
    "no-close": no_close,
}


def run_case(name: str, venv: Path, tmp: Path) -> None:
    mailbox = MailboxServer(venv / "bin" / "twist", tmp / "mailbox")
    mailbox.start()
    relay = OwnRelay(venv, tmp / "relay")
    peers = Peers(tmp / "peers", lambda: Servers(mailbox.url, relay.hint,
                                                 venv / "bin" / "wormhole"))
    try:
        for line in CASES[name](Case(peers, relay, mailbox, tmp)):
            print(f"{name}: {line}", flush=True)
    except BaseException as err:  # pytest.fail / skip from the shared helpers included
        if isinstance(err, KeyboardInterrupt):
            raise
        print(f"{name}: could not run: {type(err).__name__}: {err}", flush=True)
    finally:
        peers.kill_all()
        relay.close()
        mailbox.stop()


def main(argv: list[str]) -> None:
    global VERBOSE
    if "--verbose" in argv:
        VERBOSE = True
        argv = [a for a in argv if a != "--verbose"]
    if argv == ["--list"]:
        print("\n".join(CASES))
        return
    unknown = [a for a in argv if a not in CASES]
    if unknown:
        sys.exit(f"unknown case {', '.join(unknown)}; --list names them")
    if not only_loopback():
        sys.exit("run me inside integration/netns-run (a loopback-only namespace)")
    venv = Path(os.environ.get("HILLTOP_PEERS_VENV", ""))
    if not (venv / "bin" / "wormhole").exists():
        sys.exit("HILLTOP_PEERS_VENV must name a venv with magic-wormhole 0.24")
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # see conftest.interruptible_peers
        signal.signal(signal.SIGINT, signal.default_int_handler)
    with tempfile.TemporaryDirectory(prefix="official-faults-") as top:
        for i, name in enumerate(argv or list(CASES)):
            run_case(name, venv, Path(top) / f"{i}-{name}")


if __name__ == "__main__":
    main(sys.argv[1:])
