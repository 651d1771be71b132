"""``wormhole forward`` with real peers: fowl (fowld, from PyPI, in its own venv named by
``HILLTOP_FOWL_VENV``; .ci/run builds .fowl-venv) both ways, and a forwarded stream that
survives the transit relay being killed and restarted mid-stream (hilltop on both ends)."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from serverkit import TransitRelayServer, free_port

WORMHOLE = Path(sys.executable).parent / "wormhole"


class Lines:
    """A process whose stdout lines are read on a thread, so waits can have deadlines."""

    def __init__(self, argv: list[str], stdin: bool = False) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     text=True)
        self.seen: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None and self._q.empty():
                    break
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no {text!r} within {timeout} s; output:\n"
                             + "\n".join(self.seen[-40:]))

    def send(self, obj: dict[str, object]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield port
    server.close()


@pytest.fixture
def fowld() -> Path:
    venv = os.environ.get("HILLTOP_FOWL_VENV")
    if not venv or not (Path(venv) / "bin" / "fowld").exists():
        pytest.fail("HILLTOP_FOWL_VENV must name a venv with fowl==26.8.0 (.ci/run builds "
                    ".fowl-venv)", pytrace=False)
    return Path(venv) / "bin" / "fowld"


def payload(size: int) -> bytes:
    out = bytearray()
    block = b"forward"
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:size])


def echo_through(port: int, data: bytes, during: object = None, at: int = 0) -> bytes:
    """Send ``data`` in pieces while reading the echo; call ``during()`` once ``at`` bytes
    came back. Every read has a deadline."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=60)
    got = bytearray()
    sent = 0
    called = False
    with conn:
        conn.settimeout(90)
        while len(got) < len(data):
            if sent < len(data):
                conn.sendall(data[sent:sent + 65536])
                sent += 65536
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            got += chunk
            if during is not None and not called and len(got) >= at:
                called = True
                during()  # type: ignore[operator]
    return bytes(got)


def hilltop_forward(mailbox_url: str, *args: str) -> Lines:
    return Lines([str(WORMHOLE), "--relay-url", mailbox_url, "forward", *args])


@pytest.mark.interop
def test_fowl_service_reached_through_hilltop_client(
        fowld: Path, mailbox_url: str, fresh_code: str, echo_port: int) -> None:
    port = free_port()
    fowl = Lines([str(fowld), "--mailbox", mailbox_url], stdin=True)
    ours = hilltop_forward(mailbox_url, "--client", f"echo:{port}", fresh_code)
    try:
        fowl.send({"kind": "remote", "name": "echo", "local_connect_port": echo_port})
        fowl.send({"kind": "set-code", "code": fresh_code})
        ours.wait_for(f"listening on 127.0.0.1:{port} for echo")
        data = payload(2_000_000)
        assert echo_through(port, data) == data
    finally:
        ours.stop()
        fowl.stop()


@pytest.mark.interop
def test_hilltop_service_reached_through_fowl_client(
        fowld: Path, mailbox_url: str, fresh_code: str, echo_port: int) -> None:
    port = free_port()
    fowl = Lines([str(fowld), "--mailbox", mailbox_url], stdin=True)
    ours = hilltop_forward(mailbox_url, "--service", f"echo:{echo_port}", fresh_code)
    try:
        fowl.send({"kind": "local", "name": "echo", "local_listen_port": port})
        fowl.send({"kind": "set-code", "code": fresh_code})
        ours.wait_for("the peer listens for echo")
        data = payload(2_000_000)
        assert echo_through(port, data) == data
    finally:
        ours.stop()
        fowl.stop()


def test_forwarded_stream_survives_a_relay_restart(
        peers_venv: Path, tmp_path: Path, mailbox_url: str, fresh_code: str,
        echo_port: int) -> None:
    """Both peers reach each other only through the relay; it is killed once a third of the
    echo came back and started again a second later. The same TCP connection carries on and
    every byte comes back once, in order."""
    relay = TransitRelayServer(peers_venv / "bin" / "twist", tmp_path / "relay")
    relay.start()
    port = free_port()
    flags = ["--transit-helper", relay.hint]
    service = Lines([str(WORMHOLE), "--relay-url", mailbox_url, *flags, "forward",
                     "--no-listen", "--transports", "relay",
                     "--service", f"echo:{echo_port}", fresh_code])
    client = Lines([str(WORMHOLE), "--relay-url", mailbox_url, *flags, "forward",
                    "--no-listen", "--transports", "relay",
                    "--client", f"echo:{port}", fresh_code])
    try:
        client.wait_for(f"listening on 127.0.0.1:{port} for echo")
        data = payload(3_000_000)

        def bounce_relay() -> None:
            relay.kill()
            time.sleep(1)
            relay.start()

        assert echo_through(port, data, during=bounce_relay, at=len(data) // 3) == data
        client.wait_for("dilation: reconnecting")
        client.wait_for("dilation: connected")  # a second generation, through the new relay
    finally:
        client.stop()
        service.stop()
        relay.stop()
