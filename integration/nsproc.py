"""Processes the integration tests start: the hilltop command, and peers inside namespaces.

Output goes to files, so a full pipe never blocks a peer; ``WORMHOLE_*`` variables of the
test runner are dropped, so only the arguments decide which servers a peer uses.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest


def hilltop_command() -> list[str]:
    """The hilltop ``wormhole`` installed beside the interpreter running the tests.

    In a venv that is ``bin/wormhole`` next to ``bin/hilltop`` (the alias only hilltop
    installs, which tells it apart from an official ``wormhole``). Otherwise the package is run
    through the interpreter, which works from any install that can import it.
    """
    bindir = Path(sys.executable).parent
    if (bindir / "hilltop").exists():
        wormhole = bindir / "wormhole"
        return [str(wormhole if wormhole.exists() else bindir / "hilltop")]
    return [sys.executable, "-c", "from hilltop.cli.launch import main; main()"]


class Proc:
    """A process in a namespace; stdout and stderr go to files so a full pipe never blocks it."""

    def __init__(self, name: str, argv: list[str], cwd: Path, logs: Path) -> None:
        self.name = name
        self.out = logs / f"{name}.out"
        self.err = logs / f"{name}.err"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("WORMHOLE_")}
        env.update({"PYTHONUNBUFFERED": "1", "PYTHONUTF8": "1", "WORMHOLE_QR": "0"})
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=err, start_new_session=True)

    @property
    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def describe(self) -> str:
        return (f"{self.name}: exit {self.proc.poll()}\n--- stdout ---\n{self.stdout}"
                f"\n--- stderr ---\n{self.stderr}")

    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            if m := re.search(pattern, self.stdout + self.stderr):
                return m
            if self.proc.poll() is not None or time.monotonic() > deadline:
                if m := re.search(pattern, self.stdout + self.stderr):
                    return m
                pytest.fail(f"no /{pattern}/ from {self.describe()}", pytrace=False)
            time.sleep(0.02)

    def finish(self, timeout: float = 60.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"hung, killed: {self.describe()}", pytrace=False)

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: children too
            self.proc.wait(10)


class NamespaceLab:
    """Network namespaces named ``<tag>-<name>`` and the processes started in them.

    The tag is random, so labs of parallel runs never collide; :meth:`down` kills every
    process and removes every namespace, also when a test failed half-way through ``up``.
    """

    def __init__(self, workdir: Path, prefix: str) -> None:
        self.tag = f"{prefix}{uuid.uuid4().hex[:6]}"
        self.workdir = workdir
        self.namespaces: list[str] = []
        self.procs: list[Proc] = []

    def ns(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)

    def exec(self, name: str, *args: str, stdin: str | None = None) -> None:
        """Run a short command inside namespace ``name``; a failure fails the test."""
        subprocess.run(["ip", "netns", "exec", self.ns(name), *args], check=True,
                       capture_output=True, timeout=10, input=stdin, text=True)

    def add_namespace(self, name: str) -> str:
        ns = self.ns(name)
        self.ip("netns", "add", ns)
        self.namespaces.append(ns)
        self.ip("-n", ns, "link", "set", "lo", "up")
        return ns

    def run(self, name: str, proc: str, argv: list[str], cwd: Path | None = None) -> Proc:
        """Start ``argv`` in namespace ``name``; by default in a fresh directory of its own."""
        if cwd is None:
            cwd = self.workdir / proc
            cwd.mkdir(parents=True, exist_ok=True)
        started = Proc(proc, ["ip", "netns", "exec", self.ns(name), *argv], cwd, self.workdir)
        self.procs.append(started)
        return started

    def wait_listening(self, name: str, port: int, ss_flags: str = "-ltnH",
                       timeout: float = 30.0) -> None:
        """Wait until something in ``name`` listens on ``port`` (``-lunH`` for UDP)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["ip", "netns", "exec", self.ns(name), "ss", ss_flags],
                                 capture_output=True, text=True, timeout=10).stdout
            if f":{port} " in out:
                return
            time.sleep(0.1)
        pytest.fail(f"nothing listens on port {port} in {name}:\n"
                    + "\n".join(p.describe() for p in self.procs), pytrace=False)

    def down(self) -> None:
        for proc in self.procs:
            proc.kill()
        for ns in reversed(self.namespaces):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                  text=True, timeout=10).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        self.namespaces = []
