"""Several relays and WebSocket relays, end to end with the official transit relay 0.5.0.

Both sides use ``--no-listen``, so the relay is the only way through, and the receiver's
``--json`` events say which relay connection won (``transit_attempt``, state ``won``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from serverkit import WebSocketRelayServer, silent_port

from hilltop.testing import make_ca

if TYPE_CHECKING:
    from conftest import Peers

interop = pytest.mark.interop
PAYLOAD = bytes(range(256)) * 800  # 200 KiB: many relay reads, still quick
NO_ENV_HELPER = {"WORMHOLE_TRANSIT_HELPER": ""}
"""The environment the peers get names the shared relay; empty, only flags and config count."""


@pytest.fixture
def ws_relay(peers_venv: Path, tmp_path: Path) -> Iterator[WebSocketRelayServer]:
    server = WebSocketRelayServer(peers_venv / "bin" / "twist", tmp_path / "ws-relay")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def silent_relay() -> Iterator[str]:
    """A "relay" that accepts connections (the kernel does it) and never answers: the worst
    dead relay, which would hold an attempt for its full 60 s."""
    with silent_port() as port:
        yield f"tcp:127.0.0.1:{port}"


def source(tmp_path: Path) -> Path:
    path = tmp_path / "payload.bin"
    path.write_bytes(PAYLOAD)
    return path


def inbox(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    return folder


def won(stdout: str) -> str:
    """The target of the transit attempt that won, from ``--json`` output."""
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    [target] = [e["target"] for e in events
                if e["event"] == "transit_attempt" and e["state"] == "won"]
    return str(target)


def helpers(*relays: str) -> list[str]:
    return [arg for relay in relays for arg in ("--transit-helper", relay)]


def test_websocket_only_relay(peers: Peers, ws_relay: WebSocketRelayServer, tmp_path: Path,
                              fresh_code: str) -> None:
    """hilltop to hilltop through the relay's WebSocket side only."""
    out = inbox(tmp_path)
    sender = peers.hilltop("send", "--no-listen", "--code", fresh_code, str(source(tmp_path)),
                           transit_helper=ws_relay.url)
    receiver = peers.hilltop("receive", "--json", "--no-listen", "--accept-file", fresh_code,
                             transit_helper=ws_relay.url, cwd=out)
    got, sent = receiver.finish(), sender.finish()
    assert got.returncode == 0 and sent.returncode == 0, got.describe() + sent.describe()
    assert won(got.stdout) == ws_relay.url
    assert (out / "payload.bin").read_bytes() == PAYLOAD


@interop
def test_official_tcp_sender_meets_hilltop_websocket_receiver(
        peers: Peers, ws_relay: WebSocketRelayServer, tmp_path: Path, fresh_code: str) -> None:
    """Official 0.24 (no relay of its own) dials the TCP endpoint of the receiver's relay hint
    and skips its WebSocket endpoint; hilltop dials the WebSocket endpoint first, a stagger
    before the TCP one, and the relay pairs the TCP client with the WebSocket client."""
    out = inbox(tmp_path)
    relay = f"{ws_relay.url},{ws_relay.hint}"  # one relay, WebSocket endpoint first
    sender = peers.official("--relay-url", peers.servers.relay_url, "--transit-helper", "",
                            "send", "--no-listen", "--code", fresh_code, str(source(tmp_path)),
                            flags=False)
    receiver = peers.hilltop("receive", "--json", "--no-listen", "--accept-file", fresh_code,
                             transit_helper=relay, cwd=out)
    got, sent = receiver.finish(), sender.finish()
    assert got.returncode == 0 and sent.returncode == 0, got.describe() + sent.describe()
    assert won(got.stdout) == ws_relay.url
    assert (out / "payload.bin").read_bytes() == PAYLOAD


@interop
@pytest.mark.parametrize("peer", ["official", "william"])
def test_websocket_endpoints_are_harmless_to_official_peers(
        peers: Peers, ws_relay: WebSocketRelayServer, tmp_path: Path, fresh_code: str,
        peer: str) -> None:
    """Our relay hint carries a WebSocket endpoint beside the TCP one; official 0.24 and
    wormhole-william skip it and meet us over TCP at the same relay."""
    relay = f"{ws_relay.hint},{ws_relay.url}"
    sender = peers.hilltop("send", "--no-listen", "--code", fresh_code, str(source(tmp_path)),
                           transit_helper=relay)
    out = inbox(tmp_path)
    if peer == "official":
        receiver = peers.official("receive", "--accept-file", fresh_code,
                                  transit_helper=ws_relay.hint, cwd=out)
    else:
        receiver = peers.william("receive", "--hide-progress", fresh_code, cwd=out,
                                 stdin="y\n")  # it has no --accept-file
    got, sent = receiver.finish(), sender.finish()
    assert got.returncode == 0 and sent.returncode == 0, got.describe() + sent.describe()
    assert (out / "payload.bin").read_bytes() == PAYLOAD


@pytest.mark.parametrize("dead_first", [True, False])
def test_several_relays_one_dead_either_order(peers: Peers, ws_relay: WebSocketRelayServer,
                                              silent_relay: str, tmp_path: Path,
                                              fresh_code: str, dead_first: bool) -> None:
    """Two ``--transit-helper`` flags on each side, one relay dead: the transfer goes through
    the live one, and the dead one costs a stagger, not its 60 s."""
    relays = [silent_relay, ws_relay.hint] if dead_first else [ws_relay.hint, silent_relay]
    out = inbox(tmp_path)
    mailbox = ["--relay-url", peers.servers.relay_url]
    started = time.monotonic()
    sender = peers.hilltop(*mailbox, *helpers(*relays), "send", "--no-listen", "--code",
                           fresh_code, str(source(tmp_path)), flags=False, env=NO_ENV_HELPER)
    receiver = peers.hilltop(*mailbox, *helpers(*relays), "receive", "--json", "--no-listen",
                             "--accept-file", fresh_code, cwd=out, flags=False,
                             env=NO_ENV_HELPER)
    got, sent = receiver.finish(timeout=45), sender.finish(timeout=45)
    took = time.monotonic() - started
    assert got.returncode == 0 and sent.returncode == 0, got.describe() + sent.describe()
    assert won(got.stdout) == ws_relay.hint.removeprefix("tcp:")
    assert (out / "payload.bin").read_bytes() == PAYLOAD
    assert took < 30, f"{took:.1f} s: the dead relay held the transfer up"


def test_wss_relay_from_the_config_file_with_its_own_ca(peers: Peers, peers_venv: Path,
                                                        tmp_path: Path,
                                                        fresh_code: str) -> None:
    """``[relay] helpers`` and ``ca-file`` in the config file: a wss relay whose certificate
    a test CA signed is verified against that CA, and the transfer goes through it."""
    ca = make_ca(tmp_path)
    server = WebSocketRelayServer(peers_venv / "bin" / "twist", tmp_path / "wss-relay",
                                  tls=(ca.cert_file, ca.key_file))
    server.start()
    try:
        config = tmp_path / "xdg" / "hilltop" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(f'[relay]\nhelpers = ["{server.url}"]\nca-file = "{ca.ca_file}"\n')
        env = {**NO_ENV_HELPER, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
        mailbox = ["--relay-url", peers.servers.relay_url]
        out = inbox(tmp_path)
        sender = peers.hilltop(*mailbox, "send", "--no-listen", "--code", fresh_code,
                               str(source(tmp_path)), flags=False, env=env)
        receiver = peers.hilltop(*mailbox, "receive", "--json", "--no-listen",
                                 "--accept-file", fresh_code, cwd=out, flags=False, env=env)
        got, sent = receiver.finish(), sender.finish()
    finally:
        server.stop()
    assert got.returncode == 0 and sent.returncode == 0, got.describe() + sent.describe()
    assert won(got.stdout) == server.url
    assert (out / "payload.bin").read_bytes() == PAYLOAD
