"""Plugin loading: entry points, api version check, broken plugins skipped once, --transports."""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import pytest_twisted
from click.testing import CliRunner

from hilltop.cli import transports as cli_transports
from hilltop.config import config_path
from hilltop.errors import DialError, HilltopError, LocalError, TransitError
from hilltop.hints import direct_tcp_v1
from hilltop.hookspecs import TransitSession, TransportInfo, hookimpl
from hilltop.transit.plugins import (
    PluginConfig,
    Transports,
    load_configured,
    load_transports,
    read_config,
)


class Good:
    api = 1

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        return TransportInfo(name="good", hint_types=("good-v1",), usable=False,
                             why_not="needs a unicorn")

    @hookimpl
    def hilltop_transport_start(self):  # opt-in arguments: takes none of them
        return ["hint"]


class OldApi(Good):
    api = 0


class BadInfo:
    api = 1

    @hookimpl
    def hilltop_transport_info(self):
        raise RuntimeError("no info for you")


class UnknownHook:
    api = 1

    @hookimpl
    def hilltop_transport_frobnicate(self):
        return None


def test_builtins_register_through_entry_points() -> None:
    transports = load_transports()
    assert {"direct-tcp", "relay"} <= set(transports.names())
    relay = next(t for t in transports.loaded if t.name == "relay")
    assert relay.info.relay and relay.info.tier == 1
    assert transports.failures == []


def test_broken_plugins_reported_once_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="hilltop.transit.plugins")
    eps = [EntryPoint("missing", "hilltop.no_such_module:Thing", "hilltop.transports")]
    transports = load_transports(eps=eps, extra=[OldApi(), BadInfo(), UnknownHook(), Good()])
    assert transports.names() == ["good"]
    reasons = {f.name: f.reason for f in transports.failures}
    assert "failed to load" in reasons["missing"]
    assert "api 0" in reasons["OldApi"]
    assert "no info for you" in reasons["BadInfo"]
    assert "UnknownHook" in reasons
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == 4


def test_unusable_transport_is_listed_but_not_called() -> None:
    transports = load_transports(eps=[], extra=[Good()])
    [good] = transports.loaded
    assert good.info.why_not == "needs a unicorn"
    assert transports.call_each("hilltop_transport_start", session=None) == []
    assert transports.for_hint_type("good-v1") == []
    assert transports.call(good, "hilltop_transport_start", session=None) == ["hint"]


def test_select_subset() -> None:
    transports = load_transports(["relay"])
    assert transports.names() == ["relay"]
    with pytest.raises(LocalError, match="unknown transport.*nope.*available: direct-tcp"):
        load_transports(["nope"])


def test_duplicate_names_rejected() -> None:
    transports = load_transports(eps=[], extra=[Good(), Good()])
    assert transports.names() == ["good"]
    assert "already loaded" in transports.failures[0].reason


def test_api_mismatch_message_is_clear() -> None:
    class Future(Good):
        api = 2

    class NoApi:
        @hookimpl
        def hilltop_transport_info(self) -> TransportInfo:
            return TransportInfo(name="x", hint_types=("x-v1",))

    transports = load_transports(eps=[], extra=[Future(), NoApi()])
    reasons = {f.name: f.reason for f in transports.failures}
    assert reasons["Future"] == (
        "is written for plugin api 2, but this hilltop provides api 1; install a release of "
        "the plugin made for api 1, or a hilltop that provides api 2")
    assert reasons["NoApi"] == "declares no plugin api version (a transport class needs `api = 1`)"


def test_garbage_info_rejected() -> None:
    class Nameless(Good):
        @hookimpl
        def hilltop_transport_info(self) -> TransportInfo:
            return TransportInfo(name="", hint_types=["list-not-tuple"])  # type: ignore[arg-type]

    transports = load_transports(eps=[], extra=[Nameless()])
    assert transports.names() == []
    assert "hilltop_transport_info gave" in transports.failures[0].reason


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hilltop" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert config_path() == tmp_path / "hilltop" / "config.toml"
    assert read_config() == PluginConfig()  # no file: defaults
    path = write_config(tmp_path, '[transports]\ndisabled = ["relay", "nonesuch"]\n')
    assert read_config().disabled == ("relay", "nonesuch")
    transports = load_configured()
    assert "relay" not in transports.names() and "direct-tcp" in transports.names()
    assert [(d.name, d.reason) for d in transports.disabled] == [
        ("relay", f"disabled by config file {path}")]
    # naming it explicitly (--transports) beats the standing config
    assert load_configured(["relay"]).names() == ["relay"]


@pytest.mark.parametrize("text", ["[transports\n", "[transports]\ndisabled = 'relay'\n",
                                  "[transports]\ndisabled = [1]\n"])
def test_bad_config_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     text: str) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    write_config(tmp_path, text)
    with pytest.raises(LocalError, match="config"):
        load_configured()


def test_disabling_an_entry_point_means_it_is_never_imported() -> None:
    eps = [EntryPoint("broken", "hilltop.no_such_module:Thing", "hilltop.transports")]
    transports = load_transports(eps=eps, disabled=["broken"])
    assert transports.failures == []
    assert [d.name for d in transports.disabled] == ["broken"]


def test_no_plugins_keeps_only_what_hilltop_ships() -> None:
    third_party = EntryPoint("elsewhere", "hilltop.no_such_module:Thing", "hilltop.transports")
    transports = load_transports(eps=[third_party], builtins_only=True)
    assert transports.failures == [] and transports.names() == []
    assert transports.disabled[0].reason == "disabled by --no-plugins"
    builtins = load_transports(builtins_only=True)
    assert {"direct-tcp", "relay"} <= set(builtins.names())
    assert all(t.builtin for t in builtins.loaded)


def test_wormhole_transports_lists_failures_and_disabled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    write_config(tmp_path, '[transports]\ndisabled = ["relay"]\n')
    result = CliRunner().invoke(cli_transports.transports, [])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["NAME", "HINT", "TYPES", "FROM", "STATUS"]
    assert any(line.startswith("direct-tcp") and "built-in" in line and "usable" in line
               for line in lines)
    assert any(line.startswith("relay") and "disabled by config file" in line
               for line in lines)

    class Future(Good):
        api = 2

    loaded = load_transports(eps=[], extra=[Future(), Good()])
    text = "\n".join(cli_transports.listing(loaded))
    assert "Future" in text and "written for plugin api 2" in text
    assert "not usable: needs a unicorn" in text


def test_wormhole_transports_no_plugins_flag() -> None:
    result = CliRunner().invoke(cli_transports.transports, ["--no-plugins"])
    assert result.exit_code == 0, result.output
    assert all("built-in" in line or "--no-plugins" in line
               for line in result.output.splitlines()[1:])


class Declines:
    """Claims direct-tcp-v1 hints, then says each one is not its own."""

    api = 1

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        return TransportInfo(name="declines", hint_types=(direct_tcp_v1.TYPE,))

    @hookimpl
    def hilltop_transport_connect(self, hint, session):
        return None


@pytest_twisted.ensureDeferred
async def test_a_hint_nobody_takes_is_a_transit_error() -> None:
    from twisted.internet import reactor

    ts = load_transports(eps=[], extra=[Declines()])
    session = TransitSession(reactor=reactor, role="receiver")
    with pytest.raises(DialError, match="no transport took it") as err:
        await ts.dial(direct_tcp_v1.Hint("192.0.2.1", 1), session, reactor, 1.0)
    assert isinstance(err.value, TransitError) and isinstance(err.value, HilltopError)


def test_registering_a_plugin_skips_its_dunder_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    # pluggy reads each name of dir(plugin) statically; object's dunders are two thirds of a
    # transport's names and never hook implementations (bench/README.md, "Fourth session")
    import pluggy._manager

    looked_at: list[str] = []
    real = pluggy._manager._static_hook_attr

    def recording(obj: object, name: str) -> object:
        looked_at.append(name)
        return real(obj, name)

    transports = Transports()  # (its hook specifications are read here, not recorded)
    monkeypatch.setattr(pluggy._manager, "_static_hook_attr", recording)
    transports.add(Good())
    assert transports.names() == ["good"]  # its hook implementations were still found
    assert "hilltop_transport_info" in looked_at
    assert not [name for name in looked_at if name.startswith("__")], looked_at
