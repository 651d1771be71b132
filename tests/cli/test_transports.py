"""``wormhole transports``: the Tor rows say what was really checked."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import pytest_twisted

from hilltop.cli import transports as cli_transports
from hilltop.tor import manager as tor_manager
from hilltop.transit.plugins import load_transports


def rows(lines: list[str]) -> dict[str, str]:
    return {line.split()[0]: line for line in lines[1:]}


def test_without_check_tor_is_not_called_usable() -> None:
    """It said "usable" with no Tor running, and ``send --tor`` then failed."""
    listed = rows(cli_transports.listing(load_transports(builtins_only=True)))
    for name in ("tor", "tor-relay"):
        assert listed[name].endswith(
            "usable with --tor (txtorcon installed; Tor not looked for: add --check)")
    assert listed["direct-tcp"].endswith("usable")


def test_with_check_the_tor_rows_carry_what_was_found() -> None:
    found = cli_transports.TorFound(False, "Tor is not running: ...")
    listed = rows(cli_transports.listing(load_transports(builtins_only=True), {}, found))
    assert listed["tor"].endswith("not usable now (checked): Tor is not running: ...")
    assert listed["relay"].endswith("ok (checked)")


def _listener() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


@pytest.fixture
def nothing_listens(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[socket.socket]]:
    """Points the default Tor ports at loopback ports that refuse (bound, never listening)."""
    closed = [socket.socket() for _ in range(4)]
    for sock in closed:
        sock.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in closed]
    monkeypatch.setattr(tor_manager, "DEFAULT_CONTROL_PORTS",
                        tuple(f"tcp:127.0.0.1:{p}" for p in ports[:2]))
    monkeypatch.setattr(tor_manager, "DEFAULT_SOCKS_PORTS",
                        tuple(("127.0.0.1", p) for p in ports[2:]))
    yield closed
    for sock in closed:
        sock.close()


@pytest_twisted.ensureDeferred
async def test_check_without_tor_says_it_is_not_running(nothing_listens: object) -> None:
    from twisted.internet import reactor

    found = await cli_transports.look_for_tor(reactor, deadline=20)
    assert not found.ok and "Tor is not running" in found.detail


@pytest_twisted.ensureDeferred
async def test_check_with_only_a_socks_port_says_so(nothing_listens: object,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from twisted.internet import reactor

    with _listener() as socks:
        port = socks.getsockname()[1]
        monkeypatch.setattr(tor_manager, "DEFAULT_SOCKS_PORTS", (("127.0.0.1", port),))
        found = await cli_transports.look_for_tor(reactor, deadline=20)
    assert found.ok
    assert found.detail == (f"no control port; SOCKS port 127.0.0.1:{port} accepts connections "
                            "(not checked to be Tor); no onion service can be made")


@pytest_twisted.ensureDeferred
async def test_check_gives_up_on_a_control_port_that_never_answers(
        nothing_listens: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from twisted.internet import reactor

    with _listener() as silent:
        monkeypatch.setattr(tor_manager, "DEFAULT_CONTROL_PORTS",
                            (f"tcp:127.0.0.1:{silent.getsockname()[1]}",))
        found = await cli_transports.look_for_tor(reactor, deadline=1)
    assert not found.ok and found.detail == "no answer from Tor within 1 s"
