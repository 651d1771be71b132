"""Plugin loading: entry points, api version check, broken plugins skipped once, --transports."""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint

import pytest

from hilltop.errors import LocalError
from hilltop.hookspecs import TransportInfo, hookimpl
from hilltop.plugins import load_transports


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
    caplog.set_level(logging.WARNING, logger="hilltop.plugins")
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
