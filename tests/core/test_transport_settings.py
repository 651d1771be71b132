"""Typed transport settings: the container's rules, and what a transfer hands the transports."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_twisted
from fresh_interpreter import run_fresh

from hilltop.lan.settings import LanSettings, LanTags
from hilltop.rendezvous.key import transit_key
from hilltop.transit.options import TransitOptions
from hilltop.transit.settings import TransportSettings
from hilltop.webrtc.settings import IceServer, WebRTCSettings


@dataclass(frozen=True)
class Mine:
    dir: str | None = None


@dataclass
class Mutable:
    dir: str | None = None


def test_get_by_type_and_none_when_unset() -> None:
    s = TransportSettings(Mine("/run/x"), LanSettings(interface="eth0"))
    assert s.get(Mine) == Mine("/run/x")
    assert s.get(LanSettings) == LanSettings(interface="eth0")
    assert s.get(WebRTCSettings) is None
    assert len(s) == 2 and set(map(type, s)) == {Mine, LanSettings}


@pytest.mark.parametrize("item", [Mutable(), {"dir": "/x"}, Mine, "webrtc"])
def test_only_frozen_dataclass_instances(item: object) -> None:
    with pytest.raises(TypeError, match="frozen dataclass"):
        TransportSettings(item)


def test_one_item_per_type() -> None:
    with pytest.raises(ValueError, match="two Mine"):
        TransportSettings(Mine("a"), Mine("b"))


def test_with_replaces_and_leaves_the_original_alone() -> None:
    s = TransportSettings(Mine("a"), LanSettings())
    t = s.with_(Mine("b"))
    assert t.get(Mine) == Mine("b") and t.get(LanSettings) == LanSettings()
    assert s.get(Mine) == Mine("a")
    assert s != t and s == TransportSettings(LanSettings(), Mine("a"))


def test_updated_starts_from_the_default_or_keeps_other_fields() -> None:
    s = TransportSettings().updated(LanSettings, interface="eth0")
    assert s.get(LanSettings) == LanSettings(interface="eth0")
    tags = LanTags.derive(b"k" * 32, "sender")
    s = s.updated(LanSettings, tags=tags)
    assert s.get(LanSettings) == LanSettings(interface="eth0", tags=tags)


def test_tags_mirror_each_other() -> None:
    ours = LanTags.derive(b"k" * 32, "sender")
    theirs = LanTags.derive(b"k" * 32, "receiver")
    assert (ours.ours, ours.theirs) == (theirs.theirs, theirs.ours)
    assert ours.ours != ours.theirs


def test_turn_password_is_not_in_the_repr() -> None:
    server = IceServer("turn:198.19.0.1:3478", "user", "hunter2")
    assert "hunter2" not in repr(TransportSettings(WebRTCSettings((server,))))


def test_options_default_to_empty_settings_not_shared() -> None:
    a, b = TransitOptions(), TransitOptions()
    assert a.settings == TransportSettings() and a.plugin_options == {}
    assert dataclasses.replace(a, settings=a.settings.with_(Mine())) != b


def test_settings_types_import_no_transport_dependencies() -> None:
    """The CLI builds settings for every command: none of this may load a transport's
    libraries, Twisted or the plugin machinery."""
    probe = (
        "import sys\n"
        "from hilltop.lan.settings import LanSettings\n"
        "from hilltop.tor.settings import TorTransitSettings\n"
        "from hilltop.transit.options import TransitOptions\n"
        "from hilltop.webrtc.settings import WebRTCSettings\n"
        "import hilltop\n"
        "assert hilltop.TransportSettings(LanSettings()).get(LanSettings) == LanSettings()\n"
        "heavy = ('aiortc', 'zeroconf', 'txtorcon', 'twisted', 'pluggy', 'ifaddr')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n")
    assert run_fresh(probe).strip() == "[]"


class FakeWormhole:
    appid = "lothar.com/wormhole/text-or-file-xfer"
    relay_url = "ws://198.18.0.1:4000/v1"
    app_versions: dict = {}

    shared_key = bytes(range(32))

    def transit_key(self) -> bytes:
        return transit_key(self.shared_key, self.appid)

    def side_messages(self, channel: str) -> None:
        raise AssertionError("not used while building a runner")


@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_a_transfer_hands_the_lan_tags_never_the_transit_key(role: str) -> None:
    """The transit key also protects the records; every plugin can read session.settings."""
    from twisted.internet import reactor

    from hilltop.transfer.session import make_runner

    w = FakeWormhole()
    options = TransitOptions(settings=TransportSettings(LanSettings(interface="eth0")),
                             plugin_options={"unix-socket": {"dir": "/run/x"}})
    session = make_runner(reactor, w, role, options).session
    tk = transit_key(w.shared_key, w.appid)
    # since issue 28 the transfer's part comes as session.services, the same for every
    # transport: the lan tags are derived from it, the webrtc signals go through its side
    # channel; the user's settings are handed on as they were
    assert session.settings.get(LanSettings) == LanSettings("eth0")
    services = session.services
    assert services is not None
    assert LanTags.from_services(services, role) == LanTags.derive(tk, role)
    assert services.mailbox_url == w.relay_url
    assert services.side_channel("webrtc") is not None
    assert session.settings.get(WebRTCSettings) is None  # nothing injected by the transfer
    assert session.options == {"unix-socket": {"dir": "/run/x"}}
    assert not [name for name, value in vars(services).items()
                if not name.startswith("_") and isinstance(value, bytes) and tk in value]

    def holds_key(value: object) -> bool:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return any(holds_key(getattr(value, f.name)) for f in dataclasses.fields(value))
        return isinstance(value, bytes) and tk in value

    assert not any(holds_key(item) for item in session.settings)


@pytest_twisted.ensureDeferred
async def test_a_third_party_plugin_reads_its_own_type_and_its_options() -> None:
    """Both documented places reach the plugin through the runner (docs/plugins.md)."""
    from twisted.internet import reactor

    from hilltop.hookspecs import TransportInfo, hookimpl
    from hilltop.testing import TK
    from hilltop.transit.plugins import load_transports
    from hilltop.transit.runner import TransitRunner

    class Probe:
        api = 1
        seen: list[tuple[object, object]] = []

        @hookimpl
        def hilltop_transport_info(self) -> TransportInfo:
            return TransportInfo(name="probe", hint_types=())

        @hookimpl
        def hilltop_transport_start(self, session: Any) -> list[Any]:
            self.seen.append((session.settings.get(Mine), session.options.get("probe")))
            return []

    runner = TransitRunner(reactor, "sender", TK,
                           transports=load_transports(eps=[], extra=[Probe()]),
                           settings=TransportSettings(Mine("/run/x")),
                           options={"probe": {"dir": "/run/y"}})
    assert await runner.our_hints() == []
    await runner.stop()
    assert Probe.seen == [(Mine("/run/x"), {"dir": "/run/y"})]
