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

from hilltop.testing import free_port


@dataclass(frozen=True)
class RelayPorts:
    tcp: int
    websocket: int
    scheme: str = "ws"

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
                   websocket_url: str | None = None) -> Iterator[int]:
    """``twist transitrelay`` from $HILLTOP_PEERS_VENV on a free loopback port (yielded),
    with its WebSocket side on ``websocket_endpoint`` (a Twisted endpoint string) if given."""
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
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def websocket_relay() -> Iterator[RelayPorts]:
    """The official relay with TCP and WebSocket sides sharing one pairing table."""
    ws = free_port()
    with official_relay(f"tcp:{ws}:interface=127.0.0.1", f"ws://127.0.0.1:{ws}/") as tcp:
        deadline = time.monotonic() + 15
        while not _listening(ws):
            assert time.monotonic() < deadline, "the relay's WebSocket side did not start"
            time.sleep(0.05)
        yield RelayPorts(tcp, ws)


@dataclass(frozen=True)
class LocalCA:
    """A CA made for one test and a server certificate it signed for ``localhost``."""

    ca_file: Path
    cert_file: Path
    key_file: Path


def make_ca(folder: Path) -> LocalCA:
    """Generate the CA and a ``localhost`` server certificate (cryptography, P-256)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    def builder(subject: str, issuer: str, key: ec.EllipticCurvePrivateKey
                ) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(name(issuer))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=1)))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (builder("hilltop test CA", "hilltop test CA", ca_key)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (builder("localhost", "hilltop test CA", key)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    made = LocalCA(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    made.ca_file.write_bytes(ca.public_bytes(pem))
    made.cert_file.write_bytes(cert.public_bytes(pem))
    made.key_file.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    return made


def secure_websocket_relay(ca: LocalCA) -> Iterator[RelayPorts]:
    """The official relay whose WebSocket side speaks TLS with ``ca``'s server certificate."""
    ws = free_port()
    endpoint = (f"ssl:{ws}:interface=127.0.0.1:privateKey={ca.key_file}"
                f":certKey={ca.cert_file}")
    with official_relay(endpoint, f"wss://localhost:{ws}/") as tcp:
        deadline = time.monotonic() + 15
        while not _listening(ws):
            assert time.monotonic() < deadline, "the relay's wss side did not start"
            time.sleep(0.05)
        yield RelayPorts(tcp, ws, "wss")
