"""A process started inside a network namespace by the namespace tests (LAN, WebRTC NAT).

Output goes to files, so a full pipe never blocks a peer; ``WORMHOLE_*`` variables of the
test runner are dropped, so only the arguments decide which servers a peer uses.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest


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
