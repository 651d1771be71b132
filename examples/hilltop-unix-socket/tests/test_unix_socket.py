"""The unix-socket plugin: hilltop's conformance kit, plus what is special about it."""

from __future__ import annotations

import os
import stat

import pytest
import pytest_twisted
from hilltop_unix_socket import HINT_TYPE, UnixSocket, dialable_path

from hilltop.hints import RawHint, parse_hints
from hilltop.hookspecs import TransitSession
from hilltop.testing import ConformanceSuite, TransportSubject
from hilltop.transit.plugins import load_transports


class TestConformance(ConformanceSuite):
    @pytest.fixture
    def transport_subject(self, tmp_path) -> TransportSubject:
        options = {"unix-socket": {"dir": str(tmp_path)}}
        return TransportSubject(UnixSocket, sender={"options": options},
                                receiver={"no_listen": True, "options": options},
                                description="unix-socket /")


class TestConformanceBothListen(ConformanceSuite):
    @pytest.fixture
    def transport_subject(self) -> TransportSubject:
        return TransportSubject(UnixSocket, description="unix-socket /")


def test_registered_through_the_entry_point() -> None:
    transports = load_transports()  # what is installed, as `wormhole transports` sees it
    [t] = [t for t in transports.loaded if t.name == "unix-socket"]
    assert t.info.hint_types == (HINT_TYPE,) and not t.builtin


@pytest.mark.parametrize("path, ok", [
    ("/run/user/1000/hilltop-abc123/transit.sock", True),
    ("/tmp/hilltop-x/transit.sock", True),
    ("relative/hilltop-x/transit.sock", False),
    ("/var/run/docker.sock", False),
    ("/tmp/hilltop-x/../../var/run/docker.sock", False),
    ("/tmp/elsewhere/transit.sock", False),
    ("/tmp/hilltop-" + "x" * 120 + "/transit.sock", False),
    ("/tmp/hilltop-x/transit.sock\0", False),
    (42, False),
])
def test_only_our_own_kind_of_path_is_dialled(path, ok: bool) -> None:
    assert (dialable_path(path) is not None) is ok


def test_peer_hints_reach_the_plugin_raw() -> None:
    wire = [{"type": HINT_TYPE, "path": "/tmp/hilltop-x/transit.sock", "priority": 0.0}]
    assert parse_hints(wire) == []  # without a plugin claiming the type, it is dropped
    [hint] = parse_hints(wire, claimed=[HINT_TYPE])
    assert isinstance(hint, RawHint) and hint.get("path") == wire[0]["path"]


@pytest_twisted.ensureDeferred
async def test_listens_privately_and_tidies_up(tmp_path) -> None:
    from twisted.internet import reactor

    plugin = UnixSocket()
    session = TransitSession(reactor=reactor, role="sender",
                             options={"unix-socket": {"dir": str(tmp_path)}})
    [hint] = plugin.hilltop_transport_start(session)
    assert hint.to_wire() == {"type": HINT_TYPE, "path": hint.get("path"), "priority": 0.0}
    path = hint.get("path")
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o711
    await plugin.hilltop_transport_stop(session)
    assert list(tmp_path.iterdir()) == []


def test_declines_under_no_listen_and_tor() -> None:
    from twisted.internet import reactor

    plugin = UnixSocket()
    for kw in ({"no_listen": True}, {"tor": True}):
        assert plugin.hilltop_transport_start(TransitSession(reactor=reactor, role="sender",
                                                             **kw)) == []
    hint = RawHint.make(HINT_TYPE, path="/tmp/hilltop-x/transit.sock")
    assert plugin.hilltop_transport_connect(
        hint, TransitSession(reactor=reactor, role="sender", tor=True)) is None
    other = RawHint.make("something-else-v1")
    assert plugin.hilltop_transport_connect(
        other, TransitSession(reactor=reactor, role="sender")) is None


@pytest_twisted.ensureDeferred
async def test_bad_path_fails_the_dial_with_a_reason() -> None:
    from twisted.internet import reactor

    plugin = UnixSocket()
    hint = RawHint.make(HINT_TYPE, path="/var/run/docker.sock")
    with pytest.raises(ValueError, match="no usable path: '/var/run/docker.sock'"):
        await plugin.hilltop_transport_connect(hint, TransitSession(reactor=reactor,
                                                                     role="receiver"))
