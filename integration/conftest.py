"""Fixtures that run real processes: the official servers and three wormhole clients.

Everything listens on 127.0.0.1 only. The official peers (magic-wormhole 0.24 and its two
servers) live in their own venv, because they install a ``wormhole`` command just as hilltop
does; ``HILLTOP_PEERS_VENV`` names it (``.ci/run`` builds ``.peers-venv``). Without the
variable we build one under the user's cache directory once, which is slow but needs no setup.

A test gets processes through ``official(...)``, ``william(...)`` and ``hilltop(...)``. Each
returns a :class:`Peer` whose stdout and stderr are drained by threads, so a chatty process
can never block on a full pipe while the test waits for something else. Every process a test
started is killed by its PID at teardown, whatever the test did.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from nsproc import hilltop_command
from serverkit import (
    MailboxServer,
    TransitRelayServer,
)

PEER_PACKAGES = (
    "magic-wormhole[dilate]==0.24.0",
    "magic-wormhole-mailbox-server",
    "magic-wormhole-transit-relay",
)
"""What the peers venv holds; ``.ci/run`` installs the same list."""

DEFAULT_TIMEOUT = 60.0
"""Seconds a peer may take to finish; a loopback text transfer needs about one."""

CODE_LINE = re.compile(r"Wormhole code is: (\S+)")
"""The official CLI and hilltop print this on stderr, wormhole-william on stdout."""


# --------------------------------------------------------------------------- the peers venv

def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hilltop"


def _build_peers_venv(venv: Path) -> None:
    """Create ``venv`` with the official peers; a marker file says it finished."""
    done = venv / ".hilltop-complete"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / "peers-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest processes must not build it together
        if done.exists():
            return
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", *PEER_PACKAGES],
            check=True,
        )
        done.write_text(" ".join(PEER_PACKAGES) + "\n")


@pytest.fixture(scope="session")
def peers_venv() -> Path:
    """The venv holding magic-wormhole 0.24 and the official mailbox and transit relay."""
    configured = os.environ.get("HILLTOP_PEERS_VENV")
    if configured:
        venv = Path(configured)
    else:
        venv = _cache_dir() / "peers-venv"
        _build_peers_venv(venv)
    for tool in ("wormhole", "twist"):
        if not (venv / "bin" / tool).exists():
            pytest.fail(f"{venv}/bin/{tool} is missing: HILLTOP_PEERS_VENV must name a venv "
                        f"with {' '.join(PEER_PACKAGES)}", pytrace=False)
    return venv


# --------------------------------------------------------------------------- servers

def only_loopback() -> bool:
    """True inside ``integration/netns-run``: the only network interface is ``lo``."""
    return sorted(os.listdir("/sys/class/net")) == ["lo"]


@pytest.fixture(scope="session", autouse=True)
def interruptible_peers() -> None:
    """Peers must meet Ctrl-C as a user's would, whoever started pytest.

    A shell starts a background job (``bash .ci/run &``, a CI runner) with SIGINT ignored, and
    an ignored signal stays ignored across ``exec``: every peer would then shrug off the
    SIGINT a test sends. A handler, unlike SIG_IGN, is reset to the default by ``exec``."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def isolated_network() -> None:
    """Every peer advertises every address it has; only a loopback-only network namespace
    guarantees that no test traffic goes anywhere but 127.0.0.1/::1."""
    if not only_loopback():
        pytest.fail("integration tests must run in a loopback-only network namespace: "
                    "`bash .ci/run`, or `integration/netns-run .venv-ci/bin/pytest integration`",
                    pytrace=False)


@pytest.fixture(scope="session")
def mailbox_server(peers_venv: Path, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[MailboxServer]:
    """The official mailbox server shared by the whole session (do not kill this one)."""
    server = MailboxServer(peers_venv / "bin" / "twist", tmp_path_factory.mktemp("mailbox"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def mailbox_url(mailbox_server: MailboxServer) -> str:
    """``ws://127.0.0.1:PORT/v1`` of the shared official mailbox server."""
    return mailbox_server.url


@pytest.fixture(scope="session")
def transit_helper(peers_venv: Path, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[str]:
    """``tcp:127.0.0.1:PORT`` of an official transit relay shared by the whole session."""
    server = TransitRelayServer(peers_venv / "bin" / "twist",
                                tmp_path_factory.mktemp("transitrelay"))
    server.start()
    try:
        yield server.hint
    finally:
        server.stop()


@pytest.fixture
def restartable_mailbox(peers_venv: Path, tmp_path: Path) -> Iterator[MailboxServer]:
    """A mailbox server of this test's own: ``.kill()``, ``.start()``, ``.restart()``, ``.url``.

    Its sqlite channel database is a file in the test's temp dir, so nameplates, mailboxes and
    stored messages are still there after a restart on the same port.
    """
    server = MailboxServer(peers_venv / "bin" / "twist", tmp_path / "own-mailbox")
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- clients

@dataclass(frozen=True)
class Result:
    """What a finished peer left behind."""

    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (f"exit status {self.returncode}\n--- stdout ---\n{self.stdout}"
                f"\n--- stderr ---\n{self.stderr}")


class Peer:
    """A running wormhole client; its output is collected line by line as it arrives."""

    def __init__(self, name: str, argv: list[str], cwd: Path, env: dict[str, str],
                 stdin: bytes | None) -> None:
        self.name = name
        self.argv = argv
        self.cwd = cwd
        self._lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env,
            # An idle open stdin makes wormhole-william's receiver hang, so give none unless
            # the test has something to say.
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self._readers = [
            threading.Thread(target=self._drain, args=(stream, pipe), daemon=True)
            for stream, pipe in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr))
        ]
        for reader in self._readers:
            reader.start()
        if stdin is not None:
            assert self.proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.write(stdin)
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _drain(self, stream: str, pipe: object) -> None:
        for raw in iter(pipe.readline, b""):  # type: ignore[attr-defined]
            with self._changed:
                self._lines[stream].append(raw.decode("utf-8", errors="replace"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def output(self, stream: str) -> str:
        with self._changed:
            return "".join(self._lines[stream])

    def wait_for_line(self, pattern: re.Pattern[str] | str,
                      timeout: float = DEFAULT_TIMEOUT) -> re.Match[str]:
        """Block until a line on stdout or stderr matches ``pattern``; fail if it never does."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        seen = {"stdout": 0, "stderr": 0}
        with self._changed:
            while True:
                for stream, lines in self._lines.items():
                    for line in lines[seen[stream]:]:
                        if match := regex.search(line):
                            return match
                    seen[stream] = len(lines)
                exited = self.proc.poll() is not None and not any(
                    r.is_alive() for r in self._readers)
                left = deadline - time.monotonic()
                if exited or left <= 0:
                    break
                self._changed.wait(min(left, 0.2))
        why = "exited" if exited else f"still running after {timeout:.0f}s"
        self.kill()
        pytest.fail(f"{self.name} {why} without printing /{regex.pattern}/:\n"
                    f"{self.finish(5).describe()}", pytrace=False)

    def wait_for_code(self, timeout: float = DEFAULT_TIMEOUT) -> str:
        """The code from the ``Wormhole code is: CODE`` line, whichever stream it is on."""
        return self.wait_for_line(CODE_LINE, timeout).group(1)

    def finish(self, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Wait for the process to exit (killing it after ``timeout``) and collect its output.

        A peer that had to be killed fails the test: a hang is never an acceptable outcome.
        """
        try:
            self.proc.wait(timeout)
            hung = False
        except subprocess.TimeoutExpired:
            self.kill()
            hung = True
        for reader in self._readers:
            reader.join(5)
        result = Result(self.proc.returncode, self.output("stdout"), self.output("stderr"))
        if hung:
            pytest.fail(f"{self.name} did not finish within {timeout:.0f}s and was killed:\n"
                        f"{result.describe()}", pytrace=False)
        return result

    def poll(self) -> int | None:
        return self.proc.poll()

    def kill(self) -> None:
        """SIGKILL by PID if still running; safe to call twice."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@dataclass(frozen=True)
class Servers:
    """Where the default peers point: the shared mailbox and transit relay."""

    relay_url: str
    transit_helper: str
    official_bin: Path


class Peers:
    """Starts clients and remembers them so teardown can kill every one by PID.

    The shared servers (and with them the peers venv) are looked up only when a peer needs a
    default: a hilltop run given ``relay_url`` and ``transit_helper`` explicitly (help text,
    bad input, an unreachable relay) needs no official package at all.
    """

    def __init__(self, workdir: Path, servers: Callable[[], Servers]) -> None:
        self.workdir = workdir
        self._lookup = servers
        self._servers: Servers | None = None
        self.started: list[Peer] = []

    @property
    def servers(self) -> Servers:
        if self._servers is None:
            self._servers = self._lookup()
        return self._servers

    def _env(self, relay_url: str, transit_helper: str | None) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("WORMHOLE_ACCEPT_FILE", None)
        env.update({
            "WORMHOLE_RELAY_URL": relay_url,
            "WORMHOLE_QR": "0",          # the official sender draws a QR code otherwise
            "PYTHONUNBUFFERED": "1",
            "PYTHONUTF8": "1",           # non-ASCII text must survive any locale
        })
        if transit_helper is not None:
            env["WORMHOLE_TRANSIT_HELPER"] = transit_helper
        return env

    def run(self, name: str, argv: list[str], *, relay_url: str,
            transit_helper: str | None = None, stdin: bytes | str | None = None,
            cwd: Path | None = None, env: dict[str, str] | None = None) -> Peer:
        """Start ``argv`` as given, in its own empty directory unless ``cwd`` is given.

        ``env`` adds to (or overrides) the environment the peers get.
        """
        if cwd is None:
            cwd = self.workdir / f"{len(self.started)}-{name}"
            cwd.mkdir(parents=True, exist_ok=True)
        if isinstance(stdin, str):
            stdin = stdin.encode()
        peer = Peer(name, argv, cwd, {**self._env(relay_url, transit_helper), **(env or {})},
                    stdin)
        self.started.append(peer)
        return peer

    def official(self, *args: str, flags: bool = True, relay_url: str | None = None,
                 transit_helper: str | None = None, stdin: bytes | str | None = None,
                 cwd: Path | None = None, env: dict[str, str] | None = None) -> Peer:
        """``<peers venv>/bin/wormhole --relay-url URL --transit-helper HELPER *args``."""
        relay = relay_url or self.servers.relay_url
        helper = transit_helper or self.servers.transit_helper
        head = ["--relay-url", relay, "--transit-helper", helper] if flags else []
        return self.run("official", [str(self.servers.official_bin), *head, *args],
                        relay_url=relay, transit_helper=helper, stdin=stdin, cwd=cwd, env=env)

    def william(self, *args: str, flags: bool = True, relay_url: str | None = None,
                stdin: bytes | str | None = None, cwd: Path | None = None) -> Peer:
        """``wormhole-william --relay-url URL *args`` (it has no transit-helper flag)."""
        exe = shutil.which("wormhole-william")
        if exe is None:
            pytest.skip("wormhole-william is not installed (apt-get install wormhole-william)")
        relay = relay_url or self.servers.relay_url
        head = ["--relay-url", relay] if flags else []
        return self.run("wormhole-william", [exe, *head, *args], relay_url=relay, stdin=stdin,
                        cwd=cwd)

    def hilltop(self, *args: str, flags: bool = True, relay_url: str | None = None,
                transit_helper: str | None = None, stdin: bytes | str | None = None,
                cwd: Path | None = None, env: dict[str, str] | None = None) -> Peer:
        """hilltop's ``wormhole --relay-url URL --transit-helper HELPER *args``.

        ``flags=False`` leaves the two flags out, so only the environment variables point at
        the servers (that is how a test checks ``WORMHOLE_RELAY_URL`` is honoured).
        """
        relay = relay_url or self.servers.relay_url
        helper = transit_helper or self.servers.transit_helper
        head = ["--relay-url", relay, "--transit-helper", helper] if flags else []
        return self.run("hilltop", [*hilltop_command(), *head, *args], relay_url=relay,
                        transit_helper=helper, stdin=stdin, cwd=cwd, env=env)

    def kill_all(self) -> None:
        for peer in self.started:
            peer.kill()
            for pipe in (peer.proc.stdout, peer.proc.stderr, peer.proc.stdin):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()


@pytest.fixture
def peers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Peers]:
    """A :class:`Peers` on the shared servers; every process it started dies at teardown."""

    def servers() -> Servers:
        venv: Path = request.getfixturevalue("peers_venv")
        return Servers(request.getfixturevalue("mailbox_url"),
                       request.getfixturevalue("transit_helper"),
                       venv / "bin" / "wormhole")

    runner = Peers(tmp_path / "peers", servers)
    try:
        yield runner
    finally:
        runner.kill_all()


@pytest.fixture
def official(peers: Peers) -> Callable[..., Peer]:
    """``official(*args, stdin=, cwd=, relay_url=, transit_helper=, flags=) -> Peer``."""
    return peers.official


@pytest.fixture
def william(peers: Peers) -> Callable[..., Peer]:
    """``william(*args, stdin=, cwd=, relay_url=, flags=) -> Peer``."""
    return peers.william


@pytest.fixture
def hilltop(peers: Peers) -> Callable[..., Peer]:
    """``hilltop(*args, stdin=, cwd=, relay_url=, transit_helper=, flags=) -> Peer``."""
    return peers.hilltop


@pytest.fixture
def busy_loop() -> Iterator[None]:
    """A process spinning on one core beside the test: the load under which races show."""
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        loop.kill()
        loop.wait(10)


_nameplates = itertools.count(10000)
"""Far above what the server allocates: it hands out the shortest free nameplates (1-9, then
10-99, ...), so a fixed code in the low range could land in the mailbox of an allocated code
that an earlier test left behind, where a stranger's PAKE means "wrong code"."""


@pytest.fixture
def fresh_code() -> str:
    """A fixed code whose nameplate no other test in this session uses.

    The first is ``10000-guitarist-revenge``. Unique nameplates keep a test that died with its
    nameplate still claimed from crowding the next one on the shared mailbox.
    """
    return f"{next(_nameplates)}-guitarist-revenge"
