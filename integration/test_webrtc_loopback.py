"""The webrtc transport over loopback: hilltop to hilltop through a data channel only, and
official 0.24 peers still transferring with hilltop (webrtc never engaged)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Peer, Result

pytest.importorskip("aiortc")

SIZE = 20 * 1024 * 1024


def ok(result: Result) -> Result:
    assert result.returncode == 0, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    return result


@pytest.fixture
def ice_loopback() -> object:
    """aioice never offers 127.0.0.1 as a host candidate, so give lo a second address, in
    the test namespace only (netns-run made it; nothing outside sees it)."""
    # (not conftest.only_loopback: "conftest" may name tests/transports/conftest.py here)
    if sorted(os.listdir("/sys/class/net")) != ["lo"] or os.geteuid() != 0:
        pytest.skip("needs the loopback-only test namespace (integration/netns-run) as root")
    subprocess.run(["ip", "addr", "add", "127.0.0.2/8", "dev", "lo"], check=False,
                   capture_output=True)
    yield
    subprocess.run(["ip", "addr", "del", "127.0.0.2/8", "dev", "lo"], check=False,
                   capture_output=True)


@pytest.fixture
def twenty_mb(tmp_path: Path) -> Path:
    path = tmp_path / "src" / "twenty.bin"
    path.parent.mkdir()
    path.write_bytes(os.urandom(SIZE))
    return path


def same(a: Path, b: Path) -> None:
    assert b.stat().st_size == a.stat().st_size
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()


def test_webrtc_only_both_sides(ice_loopback: object, twenty_mb: Path, fresh_code: str,
                                tmp_path: Path, hilltop: Callable[..., Peer]) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    s = hilltop("send", "--hide-progress", "--transports", "webrtc", "--code", fresh_code,
                str(twenty_mb))
    r = hilltop("receive", "--accept-file", "--hide-progress", "--transports", "webrtc",
                fresh_code, cwd=dest)
    received, sent = ok(r.finish(120)), ok(s.finish(120))
    same(twenty_mb, dest / twenty_mb.name)
    assert "Receiving (->webrtc " in received.stderr, received.describe()
    assert "webrtc" in sent.stderr, sent.describe()
    print([line for line in received.stderr.splitlines() if "Receiving (->" in line])


def test_no_listen_both_sides_goes_through_the_relay(
        ice_loopback: object, twenty_mb: Path, fresh_code: str, tmp_path: Path,
        hilltop: Callable[..., Peer]) -> None:
    """--no-listen on both hilltop peers, every transport allowed: with no TURN server webrtc
    stays out (its host candidates would carry 127.0.0.2), so they meet at the relay."""
    dest = tmp_path / "dest"
    dest.mkdir()
    s = hilltop("send", "--hide-progress", "--no-listen", "--code", fresh_code, str(twenty_mb))
    r = hilltop("receive", "--accept-file", "--hide-progress", "--no-listen", fresh_code,
                cwd=dest)
    received, sent = ok(r.finish(120)), ok(s.finish(120))
    same(twenty_mb, dest / twenty_mb.name)
    assert "Receiving (->relay " in received.stderr, received.describe()
    assert "Sending (relay " in sent.stderr, sent.describe()


def test_webrtc_failure_ends_both_sides_fast(fresh_code: str, tmp_path: Path,
                                            twenty_mb: Path,
                                            hilltop: Callable[..., Peer]) -> None:
    """--transports webrtc and ICE cannot work (relay candidates only, and the TURN server
    refuses, so neither side has a candidate): nothing else can connect and neither side
    listens, so both fail within seconds, saying why, instead of waiting for the race's
    120 s (or webrtc's own 30 s)."""
    dest = tmp_path / "dest"
    dest.mkdir()
    ice = ["--transports", "webrtc", "--webrtc-relay-only", "--turn",
           "turn:127.0.0.1:9?transport=tcp", "--turn-user", "u", "--turn-password", "p"]
    began = time.monotonic()
    s = hilltop("send", "--hide-progress", *ice, "--code", fresh_code, str(twenty_mb))
    r = hilltop("receive", "--accept-file", "--hide-progress", *ice, fresh_code, cwd=dest)
    received, sent = r.finish(60), s.finish(60)
    took = time.monotonic() - began
    for result in (received, sent):
        assert result.returncode == 1, result.describe()
        assert "webrtc: we have no ICE candidate" in result.stderr, result.describe()
        assert "Traceback" not in result.stderr, result.describe()
    assert took < 25, f"took {took:.1f} s"
    assert not (dest / twenty_mb.name).exists()
    print(f"both sides failed after {took:.1f} s:", sent.stderr.strip().splitlines()[-1])


@pytest.mark.interop
@pytest.mark.parametrize("direction", ["hilltop->official", "official->hilltop"])
def test_official_peer_unaffected(direction: str, twenty_mb: Path, fresh_code: str,
                                  tmp_path: Path, hilltop: Callable[..., Peer],
                                  official: Callable[..., Peer]) -> None:
    """Default transports (webrtc included): an official peer never advertises webrtc, so
    no signal is sent and the transfer goes over direct TCP as before."""
    dest = tmp_path / "dest"
    dest.mkdir()
    clients = {"hilltop": hilltop, "official": official}
    sender, receiver = direction.split("->")
    s = clients[sender]("send", "--hide-progress", "--code", fresh_code, str(twenty_mb))
    r = clients[receiver]("receive", "--accept-file", "--hide-progress", fresh_code, cwd=dest)
    received, sent = ok(r.finish(120)), ok(s.finish(120))
    same(twenty_mb, dest / twenty_mb.name)
    for result in (received, sent):
        assert "webrtc" not in result.stderr, result.describe()
