"""The official servers a test starts itself: a ``twist`` process on a loopback port.

Kept out of ``conftest.py`` because helper modules import these at run time, and pytest
imports every ``conftest.py`` under the one module name ``conftest``: with ``tests`` and
``integration`` in one run, ``from conftest import ServerProcess`` found the unit suite's
conftest and CI stopped at collection (exit 2).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SERVER_START_TIMEOUT = 30.0


def free_port() -> int:
    """A loopback TCP port nobody listens on right now (the usual small race is accepted)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def silent_port() -> Iterator[int]:
    """A loopback port that takes TCP connections (the kernel does it) and never answers: the
    worst dead server, which holds a client until its own deadline."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


class ServerProcess:
    """One ``twist`` server on a fixed loopback port that can be killed and started again.

    The port is chosen once, so a restarted server is found at the same URL, which is what a
    client reconnecting after a dropped WebSocket needs. The log goes to a file in ``workdir``
    (a pipe nobody reads could fill up and stall the server).
    """

    def __init__(self, twist: Path, plugin: str, extra_args: list[str], workdir: Path) -> None:
        self.twist = twist
        self.plugin = plugin
        self.extra_args = extra_args
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / f"{plugin}.log"

    def start(self) -> None:
        if self.proc is not None:
            raise RuntimeError(f"{self.plugin} is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [str(self.twist), self.plugin,
                "--port", f"tcp:{self.port}:interface=127.0.0.1", *self.extra_args]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while not _accepts(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log_path.read_text(errors="replace")[-2000:]
                pytest.fail(f"{self.plugin} did not start on port {self.port}:\n{tail}",
                            pytrace=False)
            time.sleep(0.05)

    def kill(self) -> None:
        """Stop abruptly (SIGKILL): clients see their connections drop with no goodbye."""
        self._end(signal.SIGKILL)

    def stop(self) -> None:
        """Stop politely, then firmly; used at teardown."""
        self._end(signal.SIGTERM)

    def restart(self) -> None:
        self.kill()
        self.start()

    def _end(self, sig: int) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class MailboxServer(ServerProcess):
    """``twist wormhole-mailbox`` with its channel database in a file, so it survives restarts."""

    def __init__(self, twist: Path, workdir: Path) -> None:
        super().__init__(twist, "wormhole-mailbox",
                         ["--channel-db", str(workdir / "channel.sqlite")], workdir)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1"


WELL_KNOWN_TRANSIT_PORT = 4001
"""Inside ``integration/netns-run``, transit.magic-wormhole.io resolves to 127.0.0.1; a relay on
this port then serves peers that cannot be told another one (wormhole-william)."""


class TransitRelayServer(ServerProcess):
    def __init__(self, twist: Path, workdir: Path) -> None:
        super().__init__(twist, "transitrelay", [], workdir)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", WELL_KNOWN_TRANSIT_PORT))
            except OSError:
                return  # taken: keep the free port chosen above
        self.port = WELL_KNOWN_TRANSIT_PORT

    @property
    def hint(self) -> str:
        return f"tcp:127.0.0.1:{self.port}"


class WebSocketRelayServer(ServerProcess):
    """``twist transitrelay`` with its WebSocket side on too (``--websocket``): TCP and
    WebSocket clients share one pairing table, so either kind meets the other. With ``tls``
    (a ``(cert_file, key_file)`` pair for ``localhost``) the WebSocket side speaks wss."""

    def __init__(self, twist: Path, workdir: Path,
                 tls: tuple[Path, Path] | None = None) -> None:
        self.ws_port = free_port()
        if tls is None:
            endpoint, self.url = (f"tcp:{self.ws_port}:interface=127.0.0.1",
                                  f"ws://127.0.0.1:{self.ws_port}/")
        else:
            endpoint = (f"ssl:{self.ws_port}:interface=127.0.0.1:privateKey={tls[1]}"
                        f":certKey={tls[0]}")
            self.url = f"wss://localhost:{self.ws_port}/"  # the name the certificate holds
        super().__init__(twist, "transitrelay",
                         ["--websocket", endpoint, "--websocket-url", self.url], workdir)

    def start(self) -> None:
        super().start()
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while not _accepts(self.ws_port):
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"the relay's WebSocket side did not open {self.ws_port}",
                            pytrace=False)
            time.sleep(0.05)

    @property
    def hint(self) -> str:
        return f"tcp:127.0.0.1:{self.port}"
