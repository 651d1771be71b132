"""What the fault tests share: a transit relay of a test's own (to kill), a slow path to it
(so "mid-transfer" lasts seconds), and the checks every fault outcome must pass.

The outcome every fault must have (issue 20): a clear message, a non-zero exit within a
bounded time, no traceback or "bug" line, and nothing at the target that looks complete.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from serverkit import ServerProcess
from transferkit import CountingProxy

if TYPE_CHECKING:
    from conftest import Peer, Result

RATE = 10 * 1000 * 1000
"""Bytes per second through the slow path: a 30 MB file takes 3 s."""
SIZE = 30 * 1000 * 1000


class OwnRelay:
    """An official transit relay on a free port of its own, behind a throttling proxy.

    Peers get :attr:`hint` (the proxy): killing :meth:`kill` the relay drops every
    connection through it, as a relay that dies does."""

    def __init__(self, peers_venv: Path, workdir: Path) -> None:
        self.server = ServerProcess(peers_venv / "bin" / "twist", "transitrelay", [], workdir)
        self.server.start()
        self.proxy = CountingProxy(("127.0.0.1", self.server.port), RATE)

    @property
    def hint(self) -> str:
        return self.proxy.hint

    def kill(self) -> None:
        self.server.kill()

    def close(self) -> None:
        self.proxy.close()
        self.server.stop()


@pytest.fixture(name="own_relay")
def own_relay_fixture(peers_venv: Path, tmp_path: Path) -> Iterator[OwnRelay]:
    """An :class:`OwnRelay` (import this name into a test module to use ``own_relay``)."""
    relay = OwnRelay(peers_venv, tmp_path / "own-relay")
    try:
        yield relay
    finally:
        relay.close()


def wait_until_partial(dest: Path, name: str, at_least: int, *peers: Peer,
                       timeout: float = 60.0, part: str | None = None) -> None:
    """Until the receiver's hidden partial of ``name`` holds ``at_least`` bytes (or its
    hidden folder exists, for a folder); every peer must still be running meanwhile.
    ``part`` names another receiver's partial (official 0.24 writes ``NAME.tmp``)."""
    folder = dest / f".{name}.hilltop-dir"
    part_path = dest / (part or f".{name}.hilltop-part")
    deadline = time.monotonic() + timeout
    while True:
        if folder.exists() or (part_path.exists() and part_path.stat().st_size >= at_least):
            return
        for peer in peers:
            if peer.poll() is not None:
                pytest.fail(f"{peer.name} ended before the transfer was under way:\n"
                            f"{peer.finish(5).describe()}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail("the transfer never got under way:\n"
                        + "\n".join(p.finish(5).describe() for p in peers), pytrace=False)
        time.sleep(0.02)


def ends_cleanly(peer: Peer, within: float, *needles: str, status: int | None = None
                 ) -> Result:
    """``peer`` exits non-zero within ``within`` seconds with one clear ``ERROR:`` line (for
    hilltop) holding every needle: no traceback, no "bug in hilltop"."""
    started = time.monotonic()
    result = peer.finish(within)
    took = time.monotonic() - started
    assert result.returncode != 0, result.describe()
    if status is not None:
        assert result.returncode == status, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    assert "bug in hilltop" not in result.stderr, result.describe()
    for needle in needles:
        assert needle in result.stderr, result.describe()
    assert took < within, took
    return result


def nothing_visible(dest: Path) -> list[str]:
    """Names at the target a person would take for the transfer (hidden ones are not)."""
    return sorted(p.name for p in dest.iterdir() if not p.name.startswith("."))


def stop(peer: Peer) -> None:
    """Freeze ``peer`` (SIGSTOP): its connections stay open and carry nothing."""
    os.kill(peer.pid, signal.SIGSTOP)


def cont(peer: Peer) -> None:
    if peer.poll() is None:
        os.kill(peer.pid, signal.SIGCONT)
