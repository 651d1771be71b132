"""Durable transfers between two hilltop peers (``durable-v1``, over Dilation): a broken path
is replaced and the transfer goes on from the last acknowledged byte, within the grace.

Both peers use ``--no-listen``, so the transit relay (an official one of the test's own, behind
:class:`CountingProxy`, which throttles and counts what the clients send through it) is the
only path. The relay is SIGKILLed at about a third and started again on the same port a few
seconds later; the same two commands must finish and the proxy's count after the restart
tells how much crossed again.

Size: the issue's acceptance asks 1.5 GB, which was run by hand (bench/README.md); here
:data:`SIZE` is 150 MB at :data:`RATE`, because the two-core CI machine moves a dilated
transfer at ~40-60 MB/s and a test must take well under a minute or two.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from faultkit import ends_cleanly, nothing_visible, wait_until_partial
from serverkit import ServerProcess
from transferkit import CountingProxy, digest, random_file

from hilltop.rendezvous.capabilities import DURABLE, FEATURES

if TYPE_CHECKING:
    from conftest import Peer

SIZE = 150 * 1000 * 1000
RATE = 30 * 1000 * 1000
"""Bytes per second through the proxy: 150 MB take ~5 s, so "a third" is reliable."""
TIMEOUT = 180.0

pytestmark = pytest.mark.skipif(DURABLE not in FEATURES,
                                reason="the dilate extra (noiseprotocol) is not installed")


class Relay:
    """An official transit relay on a fixed port of its own, behind a counting proxy."""

    def __init__(self, peers_venv: Path, workdir: Path) -> None:
        self.server = ServerProcess(peers_venv / "bin" / "twist", "transitrelay", [], workdir)
        self.server.start()
        self.proxy = CountingProxy(("127.0.0.1", self.server.port), RATE)

    def close(self) -> None:
        self.proxy.close()
        self.server.stop()


@pytest.fixture
def relay(peers_venv: Path, tmp_path: Path) -> Iterator[Relay]:
    r = Relay(peers_venv, tmp_path / "relay")
    try:
        yield r
    finally:
        r.close()


def start(hilltop: Callable[..., Peer], relay: Relay, src: Path, dest: Path,
          *flags: str) -> tuple[Peer, Peer]:
    s = hilltop("send", "--no-listen", *flags, str(src), transit_helper=relay.proxy.hint)
    code = s.wait_for_code()
    r = hilltop("receive", "--no-listen", "--accept-file", *flags, code,
                transit_helper=relay.proxy.hint, cwd=dest)
    return s, r


def test_relay_killed_and_restarted_mid_transfer(hilltop: Callable[..., Peer], relay: Relay,
                                                 tmp_path: Path) -> None:
    src = random_file(tmp_path / "big.bin", SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()
    s, r = start(hilltop, relay, src, dest)
    wait_until_partial(dest, src.name, SIZE // 3, s, r, timeout=TIMEOUT)
    relay.server.kill()
    before = relay.proxy.reset()
    on_disk = (dest / f".{src.name}.hilltop-part").stat().st_size
    time.sleep(3)
    assert s.poll() is None and r.poll() is None, "a peer gave up while the relay was down"
    relay.server.restart()
    sent, received = s.finish(TIMEOUT), r.finish(TIMEOUT)
    crossed = relay.proxy.reset()
    for result in (sent, received):
        assert result.returncode == 0, result.describe()
        assert "Traceback" not in result.stderr, result.describe()
    assert "reconnecting..." in received.stderr, received.describe()
    assert digest(dest / src.name) == digest(src)
    # what crossed after the restart is what was missing, not the whole file: the bytes
    # sent twice (lost in flight at the kill, unacknowledged) are a few MB of 150
    missing = SIZE - on_disk
    again = before + crossed - SIZE
    print(f"before the kill {before}, after the restart {crossed}, missing {missing}, "
          f"sent twice {again}")
    assert crossed < missing * 1.02 + 2_000_000, (crossed, missing)
    assert again < SIZE * 0.05, (before, crossed)
    assert crossed > missing * 0.9, (crossed, missing)  # the rest crossed the new connection


def test_grace_expires_with_one_clear_line(hilltop: Callable[..., Peer], relay: Relay,
                                           tmp_path: Path) -> None:
    src = random_file(tmp_path / "cut.bin", SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()
    s, r = start(hilltop, relay, src, dest, "--reconnect-grace", "3")
    wait_until_partial(dest, src.name, SIZE // 4, s, r, timeout=TIMEOUT)
    relay.server.kill()  # and never back
    needle = "did not come back within 3 s"
    ends_cleanly(s, 60, needle)
    ends_cleanly(r, 60, needle)
    assert nothing_visible(dest) == []
    assert (dest / f".{src.name}.hilltop-part").exists()  # kept for a resume, as today
