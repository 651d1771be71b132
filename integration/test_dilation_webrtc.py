"""Dilation whose L2 connections are WebRTC data channels: hilltop to hilltop, only the
``webrtc`` transport loaded on both sides, so every generation must ride a data channel.

Two integration/dilation_peer.py processes echo a subchannel's bytes (one run checks both
directions: the opener's SHA-256 of what came back against the listener's of what it saw, and
both against the payload's); the opener drops its L2 connection a third of the way, so the
second generation negotiates a fresh data channel through its own generation-scoped side
channel and carries the rest.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from test_dilation import finish, line, start
from transferkit import digest, random_file

if TYPE_CHECKING:
    from conftest import Peer

pytest.importorskip("aiortc")

SIZE = 2_000_000
ONLY_WEBRTC = {"HILLTOP_TRANSPORTS": "webrtc"}


@pytest.fixture
def ice_loopback() -> Iterator[None]:
    """aioice never offers 127.0.0.1 as a host candidate: give lo a second address, in the
    loopback-only test namespace only (integration/netns-run made it)."""
    if sorted(os.listdir("/sys/class/net")) != ["lo"] or os.geteuid() != 0:
        pytest.fail("needs the loopback-only test namespace (integration/netns-run) as root",
                    pytrace=False)
    subprocess.run(["ip", "addr", "add", "127.0.0.2/8", "dev", "lo"], check=False,
                   capture_output=True)
    yield
    subprocess.run(["ip", "addr", "del", "127.0.0.2/8", "dev", "lo"], check=False,
                   capture_output=True)


def payload_sha256(size: int) -> str:
    sys.path.insert(0, os.path.dirname(__file__))
    from dilation_peer import payload

    return hashlib.sha256(payload(size)).hexdigest()


def connections(out: str) -> list[str]:
    return [ln.split("connected: ", 1)[1] for ln in out.splitlines()
            if ln.startswith("dilation: connected: ")]


@pytest.mark.parametrize("order", ["listener first", "opener first, busy loop"])
def test_webrtc_l2_both_ways_across_a_reconnect(ice_loopback: None, mailbox_url: str,
                                                 fresh_code: str, order: str,
                                                 request: pytest.FixtureRequest) -> None:
    """Both start orders; the second beside a busy loop (the load under which a race of
    the generation's signalling and its data channel shows). ~13 s each."""
    if "busy" in order:
        request.getfixturevalue("busy_loop")

    def listen() -> subprocess.Popen[str]:
        return start(sys.executable, "dilation_peer.py", mailbox_url, fresh_code, "listen",
                     env=ONLY_WEBRTC)

    listener = listen() if order == "listener first" else None
    opener = start(sys.executable, "dilation_peer.py", mailbox_url, fresh_code, "open",
                   str(SIZE), env={**ONLY_WEBRTC, "HILLTOP_DROP_AFTER": str(SIZE // 3)})
    listener = listener or listen()
    opened = finish(opener)
    served = finish(listener)
    assert "dropping the L2 connection" in opened
    assert line(opened, "generations ") == "generations 2"
    for out in (opened, served):
        used = connections(out)
        assert len(used) == 2, out
        assert all(c.startswith("webrtc ") for c in used), used
    echoed = line(opened, "echoed ").split()
    assert echoed[1:] == [str(SIZE), payload_sha256(SIZE)]
    assert line(served, "served ").split()[1:] == echoed[1:]


DURABLE_SIZE = 2_000_000


@pytest.mark.parametrize("order", ["receiver first", "sender first, busy loop"])
def test_durable_transfer_over_webrtc_across_a_dropped_l2(
        ice_loopback: None, hilltop: Callable[..., Peer], mailbox_url: str, fresh_code: str,
        tmp_path: Path, request: pytest.FixtureRequest, order: str) -> None:
    """``wormhole receive --transports webrtc`` follows a durable sender with only webrtc
    loaded (integration/durable_sender.py); the sender aborts its L2 connection once the
    receiver acknowledged a third, the next generation negotiates a new data channel and
    carries the rest. Both start orders; the second beside a busy loop. ~14 s each."""
    if "busy" in order:
        request.getfixturevalue("busy_loop")
    src = random_file(tmp_path / "rtc.bin", DURABLE_SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()

    def receive() -> Peer:
        return hilltop("receive", "--transports", "webrtc", "--accept-file", fresh_code,
                       cwd=dest)

    receiver = None
    if order == "receiver first":
        receiver = receive()
        time.sleep(1)  # its claim reaches the mailbox before the sender starts
    sender = start(sys.executable, "durable_sender.py", mailbox_url, fresh_code, str(src),
                   str(DURABLE_SIZE // 3), env=ONLY_WEBRTC)
    got = (receiver or receive()).finish(120)
    sent = finish(sender, 30)
    assert got.returncode == 0, got.describe() + sent
    # exactly a third: the sender held the rest back until it dropped (mid-transfer)
    assert line(sent, "dropping ") == f"dropping the L2 connection at {DURABLE_SIZE // 3} " \
        "acknowledged", sent
    assert line(sent, "generations ") == "generations 2", sent
    assert "reconnecting..." in got.stderr, got.describe()
    assert line(sent, "path: ").startswith("path: webrtc "), sent  # the new path: a channel
    assert digest(dest / src.name) == digest(src)
