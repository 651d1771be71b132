"""``send --browser`` under a flood of idle connections to its page port, with a low ulimit.

Before the page server capped its connections, 300 idle TCP connections under ``ulimit -n 256``
made the sender die ("unexpected OSError: [Errno 24] Too many open files ... this is a bug in
hilltop") and its receiver hang. Now the page port holds a few of them and the transfer goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

from nsproc import hilltop_command

if TYPE_CHECKING:
    from conftest import Peers

FLOOD = 300
LIMIT = 256


def _flood(port: int) -> list[socket.socket]:
    """FLOOD connections that never send a byte (non-blocking: a full backlog must not stall)."""
    socks = []
    for _ in range(FLOOD):
        sock = socket.socket()
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.connect(("127.0.0.1", port))
        socks.append(sock)
        time.sleep(0.002)  # let the sender accept as they come, as a real flood would allow
    return socks


def test_a_connection_flood_on_the_page_port_does_not_stop_the_transfer(
        peers: Peers, fresh_code: str, tmp_path: Path) -> None:
    data = os.urandom(1_000_000)
    source = tmp_path / "flood.bin"
    source.write_bytes(data)
    relay = peers.servers.relay_url
    sender = peers.run("sender", [
        "sh", "-c", f'ulimit -n {LIMIT} && exec "$@"', "sh", *hilltop_command(),
        "--relay-url", relay, "--transit-helper", peers.servers.transit_helper,
        "send", "--browser", "--browser-address", "127.0.0.1", "--code", fresh_code,
        "--hide-progress", str(source)], relay_url=relay)
    port = int(sender.wait_for_line(re.compile(r"http://127\.0\.0\.1:(\d+)/#")).group(1))
    socks = _flood(port)
    try:
        time.sleep(1)  # the sender has met the flood before the receiver comes
        receiver = peers.hilltop("receive", "--accept-file", "-o", "got.bin", fresh_code)
        received = receiver.finish(60)
        sent = sender.finish(30)
    finally:
        for sock in socks:
            sock.close()
    assert received.returncode == 0, received.describe() + "\n" + sent.describe()
    assert sent.returncode == 0, sent.describe()
    assert "bug in hilltop" not in sent.stderr
    got = receiver.cwd / "got.bin"
    assert hashlib.sha256(got.read_bytes()).digest() == hashlib.sha256(data).digest()
