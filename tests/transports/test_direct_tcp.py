"""direct-tcp over loopback: listen on IPv4 and IPv6, advertise, dial, move bytes."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest
import pytest_twisted
from twisted.internet import defer
from twisted.internet.error import ConnectingCancelledError

from hilltop.hints import direct_tcp_v1
from hilltop.hookspecs import TransitSession
from hilltop.transit.settings import TransportSettings
from hilltop.transports.direct_tcp import DirectTCP, DirectTCPSettings, discover_addresses


def has_ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def adapter(*ips) -> SimpleNamespace:
    return SimpleNamespace(ips=[SimpleNamespace(ip=ip) for ip in ips])


def test_discover_addresses_skips_loopback_and_link_local() -> None:
    got = discover_addresses([
        adapter("127.0.0.1", ("::1", 0, 0)),
        adapter("192.0.2.2", ("fd00::2", 0, 0), ("fe80::1", 0, 4), "169.254.1.1"),
    ])
    assert got == ["192.0.2.2", "fd00::2"]


def test_discover_addresses_falls_back_to_loopback() -> None:
    assert discover_addresses([adapter("127.0.0.1")]) == ["127.0.0.1"]


def test_discover_addresses_real_machine() -> None:
    assert discover_addresses()  # never empty


def session(reactor, inbound: list, **kw) -> TransitSession:
    return TransitSession(reactor=reactor, role="sender", offer_inbound=inbound.append, **kw)


def test_declines_under_no_listen_and_tor() -> None:
    from twisted.internet import reactor

    t = DirectTCP()
    assert t.hilltop_transport_start(session(reactor, [], no_listen=True)) == []
    assert t.hilltop_transport_start(session(reactor, [], tor=True)) == []
    hint = direct_tcp_v1.Hint("127.0.0.1", 1)
    assert t.hilltop_transport_connect(hint, session(reactor, [], tor=True)) is None
    assert t.hilltop_transport_connect(SimpleNamespace(type="relay-v1"),
                                       session(reactor, [])) is None


def deferLater(reactor, delay: float) -> defer.Deferred:  # noqa: N802
    from twisted.internet.task import deferLater as later

    return later(reactor, delay, lambda: None)


@pytest_twisted.ensureDeferred
async def test_listen_advertise_dial_ipv4() -> None:
    from twisted.internet import reactor

    t, inbound = DirectTCP(), []
    sess = session(reactor, inbound, local_addresses=["127.0.0.1"])
    [hint] = t.hilltop_transport_start(sess)
    assert hint.hostname == "127.0.0.1" and hint.port > 0
    stream = await t.hilltop_transport_connect(hint, sess)
    while not inbound:
        await deferLater(reactor, 0.01)
    got: list[bytes] = []
    inbound[0].start_receiving(got.append, lambda why: None)
    stream.write(b"ping")
    while b"".join(got) != b"ping":
        await deferLater(reactor, 0.01)
    assert inbound[0].description.startswith("direct-tcp 127.0.0.1:")
    stream.close()
    await inbound[0].when_closed()
    await t.hilltop_transport_stop()


@pytest.mark.skipif(not has_ipv6(), reason="no IPv6 loopback on this machine")
@pytest_twisted.ensureDeferred
async def test_listens_on_ipv6_too() -> None:
    from twisted.internet import reactor

    t, inbound = DirectTCP(), []
    sess = session(reactor, inbound, local_addresses=["::1", "127.0.0.1"])
    v6, v4 = t.hilltop_transport_start(sess)
    assert v6.port == v4.port
    for hint, shown in ((v6, "[::1]:"), (v4, "127.0.0.1:")):
        stream = await t.hilltop_transport_connect(hint, sess)
        while not inbound:
            await deferLater(reactor, 0.01)
        server = inbound.pop()
        assert server.description.startswith(f"direct-tcp {shown}")
        stream.close()
        await server.when_closed()
    await t.hilltop_transport_stop()


@pytest_twisted.ensureDeferred
async def test_dial_refused_and_cancel() -> None:
    from twisted.internet import reactor

    t = DirectTCP()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sess = session(reactor, [])
    with pytest.raises(Exception, match="refused"):
        await t.hilltop_transport_connect(direct_tcp_v1.Hint("127.0.0.1", port), sess)
    d = t.hilltop_transport_connect(direct_tcp_v1.Hint("127.0.0.1", port), sess)
    d.cancel()  # before the reactor ran: the attempt must be aborted cleanly
    with pytest.raises((defer.CancelledError, ConnectingCancelledError)):
        await d


def reachable(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=5).close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize(("chosen", "also_on_other_address"), [(None, True),
                                                                (["127.0.0.1"], False)])
def test_listens_only_where_it_advertises(chosen, also_on_other_address: bool) -> None:
    """Chosen addresses (LAN ``--interface``) restrict the listener, not just the hints."""
    from twisted.internet import reactor

    t = DirectTCP()
    settings = (TransportSettings() if chosen is None
                else TransportSettings(DirectTCPSettings(listen_on=tuple(chosen))))
    hints = t.hilltop_transport_start(session(reactor, [], settings=settings))
    try:
        port = hints[0].port
        assert reachable("127.0.0.1", port) is (chosen is None or "127.0.0.1" in chosen)
        assert reachable("127.0.0.2", port) is also_on_other_address  # all of 127/8 is lo
    finally:
        t.hilltop_transport_stop()
