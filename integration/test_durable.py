"""Durable transfers between two hilltop peers (``durable-v1``, over Dilation): a broken path
is replaced and the transfer goes on from the last acknowledged byte, within the grace.

Both peers use ``--no-listen``, so the transit relay (an official one of the test's own, behind
:class:`CountingProxy`, which throttles and counts what the clients send through it) is the
only path. The relay is SIGKILLed at about a third and started again on the same port a few
seconds later; the same two commands must finish and the proxy's count after the restart
tells how much crossed again.

Size: the issue's acceptance asks 1.5 GB, which was run by hand (bench/README.md); here
:data:`SIZE` is 150 MB at :data:`RATE` (30 MB/s through the proxy), because 1.5 GB takes
well over 90 s on the two-core CI machine and a test must take a minute or two at most.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from durablelab import path_reports, start_durable_pair, wait_for_partial
from faultkit import ends_cleanly, nothing_visible, wait_until_partial
from serverkit import ServerProcess
from transferkit import CountingProxy, digest, random_file

from hilltop.rendezvous.capabilities import DURABLE, FEATURES

if TYPE_CHECKING:
    from conftest import Peer

SIZE = int(os.environ.get("HILLTOP_DURABLE_SIZE", 150 * 1000 * 1000))
"""150 MB; ``HILLTOP_DURABLE_SIZE=1500000000`` runs the acceptance's 1.5 GB by hand."""
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
    # the sender asks (--durable); the receiver follows it without a flag
    s = hilltop("send", "--no-listen", "--durable", *flags, str(src),
                transit_helper=relay.proxy.hint)
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
    # sent twice (lost in flight at the kill, unacknowledged) are a few MB
    missing = SIZE - on_disk
    again = before + crossed - SIZE
    print(f"before the kill {before}, after the restart {crossed}, missing {missing}, "
          f"sent twice {again}")
    assert crossed < missing * 1.02 + 2_000_000, (crossed, missing)
    assert again < SIZE * 0.05, (before, crossed)
    assert crossed > missing * 0.9, (crossed, missing)  # the rest crossed the new connection


SMALL_SIZE = 12 * 1000 * 1000
SMALL_RATE = 3 * 1000 * 1000
"""The orders' variant: 12 MB at 3 MB/s through the proxy, ~4 s, so "a third" is reliable
beside a busy loop."""


def test_receiver_first_under_load_survives_a_relay_restart(
        hilltop: Callable[..., Peer], relay: Relay, tmp_path: Path, busy_loop: None,
        fresh_code: str) -> None:
    """The order a user produces as often as the other: the receiver types the code before
    the sender runs (``send --code``), with a busy loop beside both; the relay is killed at a
    third and back 2 s later, and the same two commands finish with the file intact."""
    relay.proxy.rate = SMALL_RATE
    src = random_file(tmp_path / "first.bin", SMALL_SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()
    r = hilltop("receive", "--no-listen", "--accept-file", fresh_code,
                transit_helper=relay.proxy.hint, cwd=dest)
    time.sleep(1)  # the receiver's claim reaches the mailbox first
    assert r.poll() is None, r.finish(5).describe()
    s = hilltop("send", "--no-listen", "--durable", "--code", fresh_code, str(src),
                transit_helper=relay.proxy.hint)
    wait_until_partial(dest, src.name, SMALL_SIZE // 3, s, r, timeout=TIMEOUT)
    relay.server.kill()
    time.sleep(2)
    relay.server.restart()
    received, sent = r.finish(TIMEOUT), s.finish(TIMEOUT)
    for result in (sent, received):
        assert result.returncode == 0, result.describe()
        assert "Traceback" not in result.stderr, result.describe()
    assert "reconnecting..." in received.stderr, received.describe()
    assert digest(dest / src.name) == digest(src)


@pytest.mark.parametrize("lost", ["relay", "sender"])
def test_grace_expires_with_one_clear_line(hilltop: Callable[..., Peer], relay: Relay,
                                           tmp_path: Path, lost: str) -> None:
    """The relay killed for good, or the sender SIGKILLed: to the side left, both are a
    path that does not come back."""
    src = random_file(tmp_path / "cut.bin", SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()
    s, r = start(hilltop, relay, src, dest, "--reconnect-grace", "3")
    wait_until_partial(dest, src.name, SIZE // 4, s, r, timeout=TIMEOUT)
    needle = "did not come back within 3 s"
    if lost == "relay":
        relay.server.kill()  # and never back
        ends_cleanly(s, 60, needle)
    else:
        s.kill()
    ends_cleanly(r, 60, needle)
    assert nothing_visible(dest) == []
    assert (dest / f".{src.name}.hilltop-part").exists()  # kept for a resume, as today


# --- the receiver's address changes (namespaces) ---------------------------------------------
NS_SIZE = 100 * 1000 * 1000
NS_RATE = "200mbit"
"""The receiver's link (tc tbf): 100 MB take ~4 s, so "a third" is reliable."""


@pytest.fixture
def lab(tmp_path: Path, peers_venv: Path) -> Iterator[Any]:
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "nft", "tc", "ss")):
        pytest.skip("the namespace lab needs root, iproute2, tc, ss and nftables")
    from natlab import NatLab

    lab = NatLab(tmp_path / "lab")
    try:
        lab.up()
        lab.add_public_host("hostC", "198.19.0.4")
        lab.add_public_host("hostD", "198.19.0.5")
        lab.exec("hostD", "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", NS_RATE,
                 "burst", "64kb", "latency", "50ms")
        lab.servers(peers_venv / "bin" / "twist", coturn=False, relay=True)
        yield lab
    finally:
        lab.down()


def test_the_receivers_address_changes_mid_transfer(lab: Any, tmp_path: Path) -> None:
    """hostD's address 198.19.0.5 goes and 198.19.0.6 comes; its sockets on the old address
    are aborted (``ss -K``), as a host that changed networks finds them. The direct path
    dies; the next generation reaches the new address (or the relay) and the same two
    commands finish with the file intact."""
    src = random_file(tmp_path / "src" / "moving.bin", NS_SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()
    sender, receiver = start_durable_pair(lab, "hostC", "hostD", src, dest,
                                          "direct-tcp,relay")
    part = dest / f".{src.name}.hilltop-part"
    wait_for_partial(part, NS_SIZE // 3, receiver, sender)
    # in this order: deleting a primary address takes its secondaries with it
    lab.exec("hostD", "ip", "addr", "del", "198.19.0.5/24", "dev", "eth0")
    lab.exec("hostD", "ip", "addr", "add", "198.19.0.6/24", "dev", "eth0")
    lab.exec("hostD", "ss", "-K", "src", "198.19.0.5")
    assert receiver.finish(90) == 0, receiver.describe() + sender.describe()
    assert sender.finish(30) == 0, sender.describe()
    assert digest(dest / src.name) == digest(src)
    assert '"state": "reconnecting"' in receiver.stdout, receiver.describe()
    assert '"state": "connected"' in receiver.stdout, receiver.describe()


SILENT_DROP = """table inet durable_silent_drop {
  chain input { type filter hook input priority 0; ip saddr 198.19.0.4 drop; }
  chain output { type filter hook output priority 0; ip daddr 198.19.0.4 drop; }
}
"""
"""On hostD: every packet to or from the sender (hostC) vanishes, no reset, no ICMP, as when a
NAT forgets a mapping or a Wi-Fi link goes dead; the relay (198.19.0.1) stays reachable."""


def test_a_direct_path_that_goes_silent_moves_to_the_relay(lab: Any, tmp_path: Path) -> None:
    """The direct path is dropped by nftables at a third: nothing tells either side, so only
    Dilation's pings (every 10 s, a path dropped after 20 s without an answer) notice; the
    next generation cannot reach the sender directly and goes through the relay, and the
    same two commands finish with the file intact."""
    src = random_file(tmp_path / "src" / "silent.bin", NS_SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()
    sender, receiver = start_durable_pair(lab, "hostC", "hostD", src, dest,
                                          "direct-tcp,relay")
    part = dest / f".{src.name}.hilltop-part"
    wait_for_partial(part, NS_SIZE // 3, receiver, sender)
    lab.exec("hostD", "nft", "-f", "-", stdin=SILENT_DROP)
    assert receiver.finish(90) == 0, receiver.describe() + sender.describe()
    assert sender.finish(30) == 0, sender.describe()
    assert digest(dest / src.name) == digest(src)
    seen = [path for path, _time in path_reports(receiver.stdout)]
    assert seen[0].startswith("direct-tcp "), seen  # the first generation was direct
    assert "reconnecting" in seen, seen
    assert seen[-1].startswith("relay "), seen  # and the relay carried the rest
