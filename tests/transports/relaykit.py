"""The official transit relay, with its WebSocket side, for the relay transport's tests.

A module of its own, not ``conftest.py``: test modules import :class:`RelayPorts` and
:func:`official_relay`, and every ``conftest.py`` is imported under the one name ``conftest``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hilltop.testing import LocalCA, free_port, make_ca

__all__ = ["LocalCA", "RelayPorts", "make_ca", "official_relay", "secure_websocket_relay",
           "websocket_relay"]


@dataclass(frozen=True)
class RelayPorts:
    tcp: int
    websocket: int
    scheme: str = "ws"
    pid: int = 0
    """The relay process (a test may freeze it with SIGSTOP to play a stalled relay)."""

    @property
    def url(self) -> str:
        host = "localhost" if self.scheme == "wss" else "127.0.0.1"  # the certificate names it
        return f"{self.scheme}://{host}:{self.websocket}/"


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def official_relay(websocket_endpoint: str | None = None,
                   websocket_url: str | None = None) -> Iterator[tuple[int, int]]:
    """``twist transitrelay`` from $HILLTOP_PEERS_VENV on a free loopback port; yields that
    port and the process id. Its WebSocket side is on ``websocket_endpoint`` (a Twisted
    endpoint string) if given."""
    venv = os.environ.get("HILLTOP_PEERS_VENV")
    twist = Path(venv or "/nonexistent") / "bin" / "twist"
    if not twist.exists():
        pytest.skip("set HILLTOP_PEERS_VENV to a venv with magic-wormhole-transit-relay")
    port = free_port()
    argv = [str(twist), "transitrelay", "--port", f"tcp:{port}:interface=127.0.0.1"]
    if websocket_endpoint:
        argv += ["--websocket", websocket_endpoint]
    if websocket_url:
        argv += ["--websocket-url", websocket_url]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while not _listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"transit relay did not start: {argv}")
            time.sleep(0.05)
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def websocket_relay() -> Iterator[RelayPorts]:
    """The official relay with TCP and WebSocket sides sharing one pairing table."""
    ws = free_port()
    with official_relay(f"tcp:{ws}:interface=127.0.0.1", f"ws://127.0.0.1:{ws}/") as (tcp, pid):
        deadline = time.monotonic() + 15
        while not _listening(ws):
            assert time.monotonic() < deadline, "the relay's WebSocket side did not start"
            time.sleep(0.05)
        yield RelayPorts(tcp, ws, pid=pid)


def secure_websocket_relay(ca: LocalCA) -> Iterator[RelayPorts]:
    """The official relay whose WebSocket side speaks TLS with ``ca``'s server certificate."""
    ws = free_port()
    endpoint = (f"ssl:{ws}:interface=127.0.0.1:privateKey={ca.key_file}"
                f":certKey={ca.cert_file}")
    with official_relay(endpoint, f"wss://localhost:{ws}/") as (tcp, pid):
        deadline = time.monotonic() + 15
        while not _listening(ws):
            assert time.monotonic() < deadline, "the relay's wss side did not start"
            time.sleep(0.05)
        yield RelayPorts(tcp, ws, "wss", pid)
