"""The conformance kit for transport plugins: run your transport through the real runner.

Use it from your plugin's tests (it needs pytest and pytest-twisted, with the asyncio reactor:
``pytest --reactor=asyncio``)::

    # conftest.py
    pytest_plugins = ["hilltop.testing"]

    # test_conformance.py
    import pytest
    from hilltop.testing import ConformanceSuite, TransportSubject
    from my_plugin import MyTransport

    class TestMyTransport(ConformanceSuite):
        @pytest.fixture
        def transport_subject(self):
            return TransportSubject(MyTransport, receiver={"no_listen": True})

Every test builds a sender and a receiver :class:`~hilltop.transit.runner.TransitRunner` in one
process, each with only your transport loaded, passes the hints between them as JSON (as the
mailbox would) and checks: your info and hints are well formed; the transit handshake
succeeds and encrypted records flow both ways; a peer with the wrong key never connects;
cancelling a pending connect (your Deferred, and the runner's race) fails with
``CancelledError`` and leaves nothing behind; closing either end is seen by the other; and at
the end of every test no socket this process opened and no delayed call is left over.

The pytest plugin part also provides the ``transit_relay`` fixture: the official transit relay
(``twist transitrelay`` from the venv named by ``$HILLTOP_PEERS_VENV``) on a free loopback port,
for transports that meet at a relay.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import field
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import defer
from twisted.internet.task import deferLater
from twisted.python.failure import Failure

from hilltop._values import value
from hilltop.errors import TransitError
from hilltop.hints import parse_hints
from hilltop.hookspecs import TransitSession, TransportInfo
from hilltop.streams import ByteStream
from hilltop.transit.connection import TransitConnection
from hilltop.transit.plugins import HookTimeouts, Transports, check_hints, load_transports
from hilltop.transit.race import RaceConfig
from hilltop.transit.runner import TransitRunner

TK = bytes(range(32))
"""The transit key both runners use (any 32 bytes do)."""


# --- leftovers -----------------------------------------------------------------------------------
def open_sockets() -> int | None:
    """How many sockets (TCP, UDP, Unix) this process holds; None where /proc is missing."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    n = 0
    for fd in fds:
        with contextlib.suppress(OSError):
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return n


class Leaks:
    """Snapshot sockets and delayed calls now; :meth:`check` asserts none were added."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.sockets = open_sockets()
        self.calls = set(reactor.getDelayedCalls())

    async def check(self, patience: float = 2.0) -> None:
        for _ in range(3):  # let calls already due (Twisted schedules some at 0 s) run
            await deferLater(self.reactor, 0, lambda: None)
        deadline = self.reactor.seconds() + patience
        while self.sockets is not None and self.reactor.seconds() < deadline:
            if (open_sockets() or 0) <= self.sockets:  # closing needs a reactor turn or two
                break
            await deferLater(self.reactor, 0.01, lambda: None)
        now = open_sockets()
        if self.sockets is not None and now is not None:
            assert now <= self.sockets, f"sockets left open: {now - self.sockets}"
        ours = [c for c in self.reactor.getDelayedCalls() if c not in self.calls and c.active()]
        assert not ours, f"delayed calls left pending: {ours}"


# --- the subject ---------------------------------------------------------------------------------
@value(frozen=False)
class TransportSubject:
    """The transport under test and how to set up the two sides.

    * ``make``: builds a fresh plugin instance (the class itself will usually do); each
      runner gets its own, as in two processes.
    * ``sender`` / ``receiver``: keyword arguments for that side's TransitRunner, e.g.
      ``{"no_listen": True}`` or ``{"transit_helpers": [relay_hint]}``. ``local_addresses``
      defaults to ``["127.0.0.1"]``.
    * ``description``: if set, the winning connection's description must start with it.
    * ``timeouts``: hook timeouts for both runners.
    """

    make: Callable[[], Any]
    sender: dict[str, Any] = field(default_factory=dict)
    receiver: dict[str, Any] = field(default_factory=dict)
    description: str | None = None
    timeouts: HookTimeouts = field(default_factory=lambda: HookTimeouts(5.0, 10.0, 5.0))

    def transports(self) -> Transports:
        ts = load_transports(eps=[], extra=[self.make()])
        assert not ts.failures, f"the plugin did not load: {ts.failures}"
        return ts

    def runner(self, reactor: Any, role: str, key: bytes = TK,
               config: RaceConfig | None = None) -> TransitRunner:
        kw = dict(self.sender if role == "sender" else self.receiver)
        kw.setdefault("local_addresses", ["127.0.0.1"])
        return TransitRunner(reactor, role, key, transports=self.transports(),  # type: ignore[arg-type]
                             hook_timeouts=self.timeouts, config=config, **kw)


# --- helpers usable on their own ----------------------------------------------------------------
def through_json(runner: TransitRunner, hints: list[Any]) -> list[Any]:
    """The peer's hints as ``runner`` would get them from the mailbox."""
    wire = json.loads(json.dumps([h.to_wire() for h in hints]))
    return parse_hints(wire, runner.transports.hint_types())


async def pair(s: TransitRunner, r: TransitRunner) -> tuple[TransitConnection, TransitConnection]:
    """Start both runners, swap hints through JSON, race; returns (sender, receiver) ends,
    each a record connection over the stream that won."""
    s_hints, r_hints = await s.our_hints(), await r.our_hints()
    assert s_hints or r_hints, "neither side contributed a hint, so nobody can dial"
    ws, wr = await defer.gatherResults([s.connect(through_json(s, r_hints)),
                                        r.connect(through_json(r, s_hints))])
    return (TransitConnection(ws, s.role, s.transit_key),
            TransitConnection(wr, r.role, r.transit_key))


async def exchange(cs: TransitConnection, cr: TransitConnection) -> None:
    """Records both ways: small ones in order, an empty one, and 1 MiB in 16 KiB records."""
    for i in range(20):
        cs.send_record(b"record %d" % i)
    cs.send_record(b"")
    big = bytes(range(256)) * 64  # 16 KiB
    for i in range(64):
        cs.send_record(i.to_bytes(4, "big") + big)
    for i in range(20):
        assert await cr.receive_record() == b"record %d" % i
    assert await cr.receive_record() == b""
    for i in range(64):
        assert await cr.receive_record() == i.to_bytes(4, "big") + big
    cr.send_record(b'{"ack": "ok"}')
    assert await cs.receive_record() == b'{"ack": "ok"}'


async def close_and_stop(closer: TransitConnection, other: TransitConnection,
                         *runners: TransitRunner, unread: tuple[bytes, ...] = ()) -> None:
    """Close one end; the other gets the ``unread`` records, then reads fail; stop runners."""
    await closer.close()
    await other.when_closed()
    for record in unread:
        assert await other.receive_record() == record
    with pytest.raises(TransitError):
        await other.receive_record()
    for runner in runners:
        await runner.stop()


# --- the suite -----------------------------------------------------------------------------------
class ConformanceSuite:
    """Subclass this in your tests and override the ``transport_subject`` fixture."""

    @pytest.fixture
    def transport_subject(self) -> TransportSubject:
        pytest.fail("override the transport_subject fixture to return a TransportSubject")

    def test_info_is_well_formed(self, transport_subject: TransportSubject) -> None:
        [t] = transport_subject.transports().loaded
        assert isinstance(t.info, TransportInfo)
        assert t.info.name and t.info.hint_types
        assert t.info.usable, f"not usable here: {t.info.why_not}"

    @pytest_twisted.ensureDeferred
    async def test_start_gives_valid_hints_and_stop_releases(
        self, transport_subject: TransportSubject
    ) -> None:
        from twisted.internet import reactor

        leaks = Leaks(reactor)
        runners = [transport_subject.runner(reactor, role) for role in ("sender", "receiver")]
        given = []
        for runner in runners:
            hints = await runner.our_hints()
            [t] = runner.transports.loaded
            assert check_hints(hints, t.info) is None, check_hints(hints, t.info)
            assert runner.transports.failures == []
            given += hints
        assert given, "neither side contributed a hint, so nobody can dial"
        for runner in runners:
            await runner.stop()
        await leaks.check()

    @pytest_twisted.ensureDeferred
    async def test_handshake_and_records_both_ways(
        self, transport_subject: TransportSubject
    ) -> None:
        from twisted.internet import reactor

        leaks = Leaks(reactor)
        s, r = transport_subject.runner(reactor, "sender"), \
            transport_subject.runner(reactor, "receiver")
        cs, cr = await pair(s, r)
        for conn in (cs, cr):
            assert conn.description
            if transport_subject.description:
                assert conn.description.startswith(transport_subject.description), \
                    conn.description
        await exchange(cs, cr)
        await close_and_stop(cr, cs, s, r)
        assert s.transports.failures == r.transports.failures == []
        await leaks.check()

    @pytest_twisted.ensureDeferred
    async def test_sender_closes_first(self, transport_subject: TransportSubject) -> None:
        from twisted.internet import reactor

        leaks = Leaks(reactor)
        s, r = transport_subject.runner(reactor, "sender"), \
            transport_subject.runner(reactor, "receiver")
        cs, cr = await pair(s, r)
        cs.send_record(b"last words")
        await close_and_stop(cs, cr, s, r, unread=(b"last words",))
        await leaks.check()

    @pytest_twisted.ensureDeferred
    async def test_wrong_key_never_connects(self, transport_subject: TransportSubject) -> None:
        """The transport must not bypass the handshake: different keys, no connection."""
        from twisted.internet import reactor

        leaks = Leaks(reactor)
        cfg = RaceConfig(attempt_timeout=1.0, overall_timeout=2.0)
        s = transport_subject.runner(reactor, "sender", config=cfg)
        r = transport_subject.runner(reactor, "receiver", key=bytes(32), config=cfg)
        s_hints, r_hints = await s.our_hints(), await r.our_hints()
        results = await defer.DeferredList(
            [s.connect(through_json(s, r_hints)), r.connect(through_json(r, s_hints))],
            consumeErrors=True)
        for ok, outcome in results:
            assert not ok and isinstance(outcome, Failure) and outcome.check(TransitError), outcome
        await s.stop()
        await r.stop()
        await leaks.check()

    @pytest_twisted.ensureDeferred
    async def test_cancelling_the_connect_deferred(
        self, transport_subject: TransportSubject
    ) -> None:
        """Your connect Deferred, cancelled at once: it fails, and nothing is left behind.

        Any failure will do (Twisted's endpoints give ConnectingCancelledError); what matters
        is that cancel() makes the Deferred fire and the half-open connection is closed.
        """
        from twisted.internet import reactor

        leaks = Leaks(reactor)
        listener, dialler, hint = await self._a_hint_to_dial(reactor, transport_subject)
        [t] = dialler.transports.loaded
        d = dialler.transports.call(t, "hilltop_transport_connect", hint=hint,
                                    session=dialler.session)
        assert isinstance(d, defer.Deferred), f"connect returned {d!r}, not a Deferred"
        got: list[Any] = []
        d.addBoth(got.append)
        d.cancel()
        [result] = got  # cancel() must make the Deferred fire, one way or the other
        if isinstance(result, ByteStream):  # it had already connected: fine, but close it
            result.close()
            await result.when_closed()
        else:
            assert isinstance(result, Failure), result
        await listener.stop()
        await dialler.stop()
        await leaks.check()

    @pytest_twisted.ensureDeferred
    async def test_cancelling_a_pending_race(self, transport_subject: TransportSubject) -> None:
        """The peer never answers; the dialling side's connect() is cancelled mid-attempt."""
        from twisted.internet import reactor

        leaks = Leaks(reactor)
        listener, dialler, _hint = await self._a_hint_to_dial(reactor, transport_subject)
        d = dialler.connect(through_json(dialler, await listener.our_hints()))
        await deferLater(reactor, 0.2, lambda: None)  # let the dial get somewhere
        assert not d.called, "connected to a peer that never ran its side of the handshake"
        d.cancel()
        with pytest.raises(defer.CancelledError):
            await d
        await dialler.stop()
        await listener.stop()
        await leaks.check()

    async def _a_hint_to_dial(
        self, reactor: Any, subject: TransportSubject
    ) -> tuple[TransitRunner, TransitRunner, Any]:
        """Start the side that contributes hints; return it, the other side and one hint."""
        s, r = subject.runner(reactor, "sender"), subject.runner(reactor, "receiver")
        s_hints, r_hints = await s.our_hints(), await r.our_hints()
        if s_hints:
            return s, r, through_json(r, s_hints)[0]
        assert r_hints, "neither side contributed a hint, so nobody can dial"
        return r, s, through_json(s, r_hints)[0]


# --- pytest fixtures ----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def transit_relay() -> Iterator[int]:
    """Start ``twist transitrelay`` from $HILLTOP_PEERS_VENV on loopback; yields its port."""
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


@value
class LocalCA:
    """A CA made for one test and a server certificate it signed for ``localhost``."""

    ca_file: Path
    cert_file: Path
    key_file: Path


def make_ca(folder: Path) -> LocalCA:
    """Generate a CA and a ``localhost`` server certificate it signed (cryptography, P-256),
    as PEM files in ``folder``: for a test's ``wss://`` server, whose clients are then told
    to trust ``ca_file`` (never to skip verification)."""
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


__all__ = ["TK", "ConformanceSuite", "Leaks", "LocalCA", "TransitSession", "TransportSubject",
           "close_and_stop", "exchange", "free_port", "make_ca", "open_sockets", "pair",
           "through_json", "transit_relay"]
