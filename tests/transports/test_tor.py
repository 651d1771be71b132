"""The tor transport without a Tor: what it declines, what it would dial, finding SOCKS.

End-to-end runs on a private Tor network are in ``integration/test_tor_network.py``.
"""

from __future__ import annotations

import socket

import pytest
import pytest_twisted
from twisted.internet import defer

from hilltop.errors import LocalError
from hilltop.hints import direct_tcp_v1, relay_v1, tor_tcp_v1
from hilltop.hookspecs import TransitSession
from hilltop.tor.manager import TorManager, connect_retrying
from hilltop.tor.settings import TorSettings, TorTransitSettings, parse_socks
from hilltop.transit.settings import TransportSettings
from hilltop.transports.relay import Relay
from hilltop.transports.tor import Tor, TorRelay, public_address


def session(reactor, **kw) -> TransitSession:
    return TransitSession(reactor=reactor, role="sender", **kw)


def relay_hint(host: str, port: int = 4001) -> relay_v1.Hint:
    return relay_v1.parse({"type": "relay-v1",
                           "hints": [{"type": "direct-tcp-v1", "hostname": host, "port": port}]})


def test_info() -> None:
    info = Tor().hilltop_transport_info()
    assert info.name == "tor" and tor_tcp_v1.TYPE in info.hint_types and info.tier == 0
    relay = TorRelay().hilltop_transport_info()
    assert relay.name == "tor-relay" and relay.relay and relay.hint_types == (relay_v1.TYPE,)


def test_everything_declined_without_tor() -> None:
    from twisted.internet import reactor

    s = session(reactor)
    assert Tor().hilltop_transport_start(s) == []
    assert Tor().hilltop_transport_connect(tor_tcp_v1.Hint("x" * 56 + ".onion", 80), s) is None
    assert TorRelay().hilltop_transport_connect(relay_hint("relay.example"), s) is None


def test_no_listen_makes_no_onion_service() -> None:
    from twisted.internet import reactor

    assert Tor().hilltop_transport_start(session(reactor, tor=True, no_listen=True)) == []


def test_private_addresses_are_never_dialled_through_tor() -> None:
    from twisted.internet import reactor

    s = session(reactor, tor=True)
    for host in ("127.0.0.1", "192.168.1.2", "10.0.0.1", "fe80::1", "::1"):
        assert Tor().hilltop_transport_connect(direct_tcp_v1.Hint(host, 1234), s) is None
        assert TorRelay().hilltop_transport_connect(relay_hint(host), s) is None


def test_the_clear_net_relay_declines_under_tor() -> None:
    from twisted.internet import reactor

    assert Relay().hilltop_transport_connect(relay_hint("8.8.8.8"), session(reactor, tor=True)) \
        is None


def test_public_address() -> None:
    assert public_address("8.8.8.8") and public_address("2001:4860::8888")
    assert not public_address("192.168.0.1") and not public_address("example.org")


def test_parse_socks() -> None:
    assert parse_socks("127.0.0.1:9050") == ("127.0.0.1", 9050)
    assert parse_socks("[::1]:9150") == ("::1", 9150)
    for bad in ("9050", "host:", "host:99999", ":9050"):
        with pytest.raises(LocalError):
            parse_socks(bad)


@pytest_twisted.ensureDeferred
async def test_socks_only_manager_makes_no_onion_service() -> None:
    from twisted.internet import reactor

    manager = TorManager(reactor, TorSettings(socks="127.0.0.1:9"))
    await manager.ready()
    assert manager.socks_only and manager.socks == ("127.0.0.1", 9)
    s = session(reactor, tor=True, settings=TransportSettings(TorTransitSettings(manager)))
    plugin = Tor()
    assert await defer.maybeDeferred(plugin.hilltop_transport_start, s) == []
    await plugin.hilltop_transport_stop(s)


@pytest_twisted.ensureDeferred
async def test_unreachable_control_port_is_a_clear_error() -> None:
    from twisted.internet import reactor

    manager = TorManager(reactor, TorSettings(control_port="tcp:127.0.0.1:9"))
    with pytest.raises(LocalError, match="control port"):
        await manager.ready()


@pytest.mark.parametrize("command", ["send", "receive"])
def test_cli_tor_and_lan_exclude_each_other(command: str) -> None:
    from click.testing import CliRunner

    from hilltop.cli.main import cli

    args = [command, "--tor", "--lan", *(["--text", "hi"] if command == "send" else ["1-a-b"])]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "--tor and --lan" in result.output


def test_cli_only_one_way_to_find_tor() -> None:
    from click.testing import CliRunner

    from hilltop.cli.main import cli

    result = CliRunner().invoke(cli, ["send", "--launch-tor", "--tor-socks", "127.0.0.1:9050",
                                      "--text", "hi"])
    assert result.exit_code == 2 and "only one of" in result.output


# --------------------------------------------------------------------------- onion lifecycle

class FakeOnion:
    hostname = "a" * 56 + ".onion"

    def __init__(self) -> None:
        self.removed = 0

    def remove(self) -> defer.Deferred[None]:
        self.removed += 1
        return defer.succeed(None)


class FakeTor:
    """Stands in for txtorcon.Tor: the test decides when (and whether) the service is made."""

    def __init__(self) -> None:
        self.creating: defer.Deferred[FakeOnion] = defer.Deferred()
        self.asked: list[dict] = []

    def create_onion_service(self, **kwargs) -> defer.Deferred[FakeOnion]:
        self.asked.append(kwargs)
        return self.creating


class FakeManager:
    socks_only = False

    def __init__(self) -> None:
        self.tor = FakeTor()

    def ready(self) -> defer.Deferred[None]:
        return defer.succeed(None)


def tor_session(reactor, manager: FakeManager) -> TransitSession:
    return session(reactor, tor=True, settings=TransportSettings(TorTransitSettings(manager)))


def refuses(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest_twisted.ensureDeferred
async def test_onion_service_is_ephemeral_and_removed_at_stop() -> None:
    import txtorcon
    from twisted.internet import reactor

    manager, onion = FakeManager(), FakeOnion()
    s = tor_session(reactor, manager)
    plugin = Tor()
    started = plugin.hilltop_transport_start(s)
    manager.tor.creating.callback(onion)
    hints = await started
    assert [h.hostname for h in hints] == [onion.hostname]
    asked = manager.tor.asked[0]
    assert asked["private_key"] is txtorcon.DISCARD and asked["version"] == 3
    assert not asked.get("detach")
    assert not refuses(hints[0].port)
    await plugin.hilltop_transport_stop(s)
    assert onion.removed == 1
    assert refuses(hints[0].port)


@pytest_twisted.ensureDeferred
async def test_a_service_finished_after_a_start_timeout_is_still_removed() -> None:
    """The runner cancels a start hook that takes too long; Tor may finish the service later."""
    from twisted.internet import reactor

    manager, onion = FakeManager(), FakeOnion()
    s = tor_session(reactor, manager)
    plugin = Tor()
    started = plugin.hilltop_transport_start(s)
    started.cancel()  # what the start timeout does
    with pytest.raises(defer.CancelledError):
        await started
    await plugin.hilltop_transport_stop(s)
    assert onion.removed == 0  # nothing to remove yet
    manager.tor.creating.callback(onion)  # Tor finishes after all
    assert onion.removed == 1


@pytest_twisted.ensureDeferred
async def test_a_service_tor_could_not_make_needs_no_removal() -> None:
    from twisted.internet import reactor

    manager = FakeManager()
    s = tor_session(reactor, manager)
    plugin = Tor()
    started = plugin.hilltop_transport_start(s)
    manager.tor.creating.errback(RuntimeError("Failed to upload"))
    with pytest.raises(RuntimeError, match="upload"):
        await started
    await plugin.hilltop_transport_stop(s)  # no error, listener closed


@pytest_twisted.ensureDeferred
async def test_launched_tor_control_socket_is_retried_until_it_exists(tmp_path) -> None:
    """txtorcon connects as soon as tor prints that it is opening the control listener, which
    can be before the socket exists; our connector keeps trying."""
    from twisted.internet import endpoints, reactor
    from twisted.internet.protocol import Factory, Protocol

    path = str(tmp_path / "control.socket")
    listening = []
    reactor.callLater(0.6, lambda: listening.append(
        reactor.listenUNIX(path, Factory.forProtocol(Protocol))))
    proto = await connect_retrying(reactor, endpoints.UNIXClientEndpoint(reactor, path),
                                   Factory.forProtocol(Protocol))
    try:
        assert listening, "connected before anything listened?"
    finally:
        proto.transport.loseConnection()
        await listening[0].stopListening()


@pytest_twisted.ensureDeferred
async def test_connect_retrying_gives_up() -> None:
    from twisted.internet import endpoints, reactor
    from twisted.internet.error import ConnectError
    from twisted.internet.protocol import Factory, Protocol

    with pytest.raises(ConnectError):
        await connect_retrying(reactor, endpoints.UNIXClientEndpoint(reactor, "/nonexistent/s"),
                               Factory.forProtocol(Protocol), wait=0.5)
