"""Fixtures for transport tests: the official transit relay on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def transit_relay() -> Iterator[int]:
    """Start ``twist transitrelay`` from $HILLTOP_PEERS_VENV; yields its port."""
    venv = os.environ.get("HILLTOP_PEERS_VENV")
    if not venv:
        pytest.skip("set HILLTOP_PEERS_VENV to a venv with magic-wormhole-transit-relay "
                    "(e.g. /tmp/peers) to run relay tests")
    twist = Path(venv) / "bin" / "twist"
    if not twist.exists():
        pytest.skip(f"{twist} not found (HILLTOP_PEERS_VENV={venv})")
    port = free_port()
    proc = subprocess.Popen(
        [str(twist), "transitrelay", "--port", f"tcp:{port}:interface=127.0.0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("transit relay did not start")
                time.sleep(0.05)
        time.sleep(0.1)  # the relay logs our probe connection; let it settle
        yield port
    finally:
        proc.terminate()
        proc.wait(10)
