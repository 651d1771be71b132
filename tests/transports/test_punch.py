"""tcp-punch on loopback: what it advertises, STUN over TCP, a simultaneous open, and the
settings under which it stays silent (no hint, no dial, no STUN query)."""

from __future__ import annotations

import socket
import struct
import threading

import pytest
import pytest_twisted
from twisted.internet import defer

from hilltop.hints import tcp_punch_v1
from hilltop.hookspecs import TransitSession
from hilltop.transit import stun
from hilltop.transit.punch import PunchSettings, stun_endpoint
from hilltop.transit.settings import TransportSettings
from hilltop.transports.punch import TcpPunch

PUBLIC = ("198.51.100.7", 40123)


def session(reactor, settings: PunchSettings | None, **kw) -> TransitSession:
    items = TransportSettings(settings) if settings is not None else TransportSettings()
    return TransitSession(reactor=reactor, role="sender", settings=items, **kw)


def shared_port() -> socket.socket:
    """A socket holding a loopback port the way the mailbox connection does."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", 0))
    return s


class FakeStun:
    """A STUN-over-TCP server on loopback that says every client is at ``PUBLIC``; counts
    connections, so a test can show that nobody asked."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(20)
        self.endpoint = self.sock.getsockname()
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        self.connections += 1
        with conn:
            request = conn.recv(20)
            tid = request[8:20]
            cookie = struct.pack("!I", stun.MAGIC_COOKIE)
            ip = bytes(a ^ b for a, b in zip(socket.inet_aton(PUBLIC[0]), cookie, strict=True))
            value = struct.pack("!BBH", 0, 1, PUBLIC[1] ^ (stun.MAGIC_COOKIE >> 16)) + ip
            attr = struct.pack("!HH", stun.XOR_MAPPED_ADDRESS, len(value)) + value
            conn.sendall(struct.pack("!HHI", stun.BINDING_SUCCESS, len(attr), stun.MAGIC_COOKIE)
                         + tid + attr)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def fake_stun():
    server = FakeStun()
    yield server
    server.close()


async def start(settings: PunchSettings | None, **kw) -> list:
    from twisted.internet import reactor

    return list(await TcpPunch().hilltop_transport_start(session(reactor, settings, **kw)))


@pytest_twisted.ensureDeferred
async def test_advertises_the_mailbox_address_and_not_loopback() -> None:
    local = ("198.18.1.10", 50000)
    assert await start(PunchSettings(PUBLIC, local)) == [tcp_punch_v1.Hint(*PUBLIC)]
    assert await start(PunchSettings(("127.0.0.1", 5), local)) == []
    assert await start(PunchSettings(PUBLIC, None)) == []  # through Tor: no shared port
    assert await start(PunchSettings(("2001:db8::5", 5), local)) == []  # not our family
    assert await start(None) == []


@pytest.mark.parametrize("flag", ["no_listen", "tor"])
@pytest_twisted.ensureDeferred
async def test_silent_under_no_listen_and_tor(fake_stun: FakeStun, flag: str) -> None:
    """No hint, no dial of the peer's hint, and no STUN server contacted."""
    from twisted.internet import reactor

    held = shared_port()
    with held:
        t = TcpPunch()
        settings = PunchSettings(None, held.getsockname(), (fake_stun.endpoint,))
        s = session(reactor, settings, **{flag: True})
        assert await t.hilltop_transport_start(s) == []
        assert t.hilltop_transport_connect(tcp_punch_v1.Hint(*PUBLIC), s) is None
        assert await start(PunchSettings(PUBLIC, held.getsockname()), **{flag: True}) == []
    assert fake_stun.connections == 0


@pytest_twisted.ensureDeferred
async def test_stun_over_tcp_when_the_mailbox_says_nothing(fake_stun: FakeStun) -> None:
    held = shared_port()
    with held:
        hints = await start(PunchSettings(None, held.getsockname(), (fake_stun.endpoint,)))
    assert hints == [tcp_punch_v1.Hint(*PUBLIC)]
    assert fake_stun.connections == 1


@pytest_twisted.ensureDeferred
async def test_the_punch_dials_from_the_held_port_and_redials_after_a_reset() -> None:
    """The peer's port refuses at first (its side has not dialled yet: a reset, as a host
    without NAT answers); the punch dials again and gets through, from our held port."""
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    ours, theirs = shared_port(), shared_port()
    with ours, theirs:
        punch = TcpPunch()
        punch._origin = ours.getsockname()
        dialled = punch.hilltop_transport_connect(tcp_punch_v1.Hint(*theirs.getsockname()),
                                                  session(reactor, None))
        dialled.addTimeout(10, reactor)
        await deferLater(reactor, 0.6)
        assert not dialled.called  # refused so far, dialling again
        theirs.listen()
        stream = await dialled
        theirs.settimeout(5)
        accepted, peer = theirs.accept()
        with accepted:
            assert peer == ours.getsockname()
            arrived: defer.Deferred[bytes] = defer.Deferred()
            stream.start_receiving(arrived.callback, lambda why: None)
            accepted.sendall(b"through the hole")
            arrived.addTimeout(5, reactor)
            assert await arrived == b"through the hole"
        stream.close()
        await stream.when_closed()


def test_stun_codec_round_trip_and_refusals() -> None:
    tid = bytes(range(12))
    request = stun.binding_request(tid)
    assert len(request) == 20 and stun.message_length(request) == 20
    mapped = struct.pack("!BBH", 0, 1, 4242) + socket.inet_aton("192.0.2.9")
    attr = struct.pack("!HH", stun.MAPPED_ADDRESS, len(mapped)) + mapped
    reply = struct.pack("!HHI", stun.BINDING_SUCCESS, len(attr), stun.MAGIC_COOKIE) + tid + attr
    assert stun.mapped_address(reply, tid) == ("192.0.2.9", 4242)
    assert stun.mapped_address(reply, bytes(12)) is None  # another transaction
    assert stun.mapped_address(reply[:10], tid) is None
    assert stun.mapped_address(b"\x01\x11" + reply[2:], tid) is None  # an error response
    with pytest.raises(ValueError):
        stun.binding_request(b"short")


@pytest.mark.parametrize(("url", "expected"), [
    ("stun:stun.example.org", ("stun.example.org", 3478)),
    ("stun:198.19.0.1:3479", ("198.19.0.1", 3479)),
    ("stun:[2001:db8::1]:5349?transport=tcp", ("2001:db8::1", 5349)),
])
def test_stun_endpoint(url: str, expected: tuple[str, int]) -> None:
    assert stun_endpoint(url) == expected


@pytest.mark.parametrize("url", ["turn:x.org", "stun:", "stun://x.org", "stun:x.org:99999"])
def test_stun_endpoint_refuses(url: str) -> None:
    from hilltop.errors import LocalError

    with pytest.raises(LocalError):
        stun_endpoint(url)
