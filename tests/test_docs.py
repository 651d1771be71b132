"""docs/plugins.md keeps up with the plugin API: every hook, argument and field is documented,
nothing documented is gone, and the worked example really carries a transfer."""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
from pathlib import Path

import pytest
import pytest_twisted

from hilltop import hookspecs, streams
from hilltop.testing import Leaks, close_and_stop, exchange, free_port, pair
from hilltop.transit.plugins import load_transports
from hilltop.transports.direct_tcp import DirectTCP

DOC = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"
TEXT = DOC.read_text()


def hookspec_functions() -> dict[str, list[str]]:
    """Every hook in hilltop.hookspecs with its argument names, as pluggy sees them."""
    marker = f"{hookspecs.PROJECT}_spec"
    return {name: list(inspect.signature(fn).parameters)
            for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
            if hasattr(fn, marker)}


def sections(level: str) -> dict[str, str]:
    """Heading text -> the body under it, for headings of exactly ``level`` (e.g. '###')."""
    parts = re.split(rf"^{level} (.+)$", TEXT, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


HOOKS = hookspec_functions()


def test_there_are_hooks_to_document() -> None:
    assert set(HOOKS) >= {"hilltop_transport_info", "hilltop_transport_start",
                          "hilltop_transport_connect", "hilltop_transport_stop"}


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_hook_is_documented(hook: str) -> None:
    args = HOOKS[hook]
    heading = f"{hook}({', '.join(args)})"
    body = sections("###").get(heading)
    assert body is not None, f"docs/plugins.md needs a section '### {heading}'"
    for arg in args:
        assert re.search(rf"^\* `{arg}`: ", body, flags=re.MULTILINE), \
            f"argument {arg!r} of {hook} is not explained in its section"
    assert "**Returns**" in body, f"{hook}: say what a return means"
    assert "versionadded" in body, f"{hook}: say when it was added"


def test_no_documented_hook_is_gone() -> None:
    documented = {m.group(1) for m in re.finditer(r"^### (hilltop_\w+)\(", TEXT, re.MULTILINE)}
    assert documented == set(HOOKS), documented ^ set(HOOKS)


@pytest.mark.parametrize("cls", [hookspecs.TransportInfo, hookspecs.TransitSession])
def test_dataclass_fields_are_documented(cls: type) -> None:
    body = sections("###")[cls.__name__]
    for f in dataclasses.fields(cls):
        assert f"`{f.name}`" in body, f"{cls.__name__}.{f.name} is not documented"


def test_settings_types_named_in_the_docs_exist_and_are_frozen() -> None:
    import importlib

    body = sections("###")["Settings of your own"]
    named = re.findall(r"`(hilltop(?:\.\w+)+)\.(\w+Settings)`", body)
    assert len(named) >= 5, named  # the container and the four built-in types
    for module, name in named:
        cls = getattr(importlib.import_module(module), name)
        if name != "TransportSettings":
            assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, name
            assert hookspecs.TransportSettings(cls()).get(cls) == cls()


def test_bytestream_members_are_documented() -> None:
    body = sections("###")["ByteStream"]
    members = [n for n in vars(streams.ByteStream) if not n.startswith("_")]
    members += list(streams.ByteStream.__annotations__)
    for name in members:
        assert f"`{name}" in body, f"ByteStream.{name} is not documented"


def test_api_version_and_entry_point_group_match_the_code() -> None:
    from hilltop.transit.plugins import ENTRY_POINT_GROUP

    assert f"api = {hookspecs.API_VERSION}" in TEXT
    assert f'[project.entry-points."{ENTRY_POINT_GROUP}"]' in TEXT


def worked_example() -> types.ModuleType:
    body = sections("##")["Worked example"]
    code = re.search(r"```python\n(.*?)```", body, flags=re.DOTALL)
    assert code, "the worked example has no python block"
    lines = code.group(1).splitlines()
    assert 25 <= len(lines) <= 45, f"keep the worked example short ({len(lines)} lines)"
    module = types.ModuleType("hilltop_fixed_port")
    exec(compile(code.group(1), str(DOC), "exec"), module.__dict__)
    return module


@pytest_twisted.ensureDeferred
async def test_worked_example_carries_a_transfer(monkeypatch: pytest.MonkeyPatch) -> None:
    from twisted.internet import reactor

    from hilltop.testing import TK
    from hilltop.transit.runner import TransitRunner

    example = worked_example()
    port = free_port()
    monkeypatch.setenv("HILLTOP_FIXED_PORT", str(port))
    leaks = Leaks(reactor)
    fixed = load_transports(eps=[], extra=[example.FixedPort()])
    assert fixed.failures == [] and fixed.loaded[0].info.usable
    s = TransitRunner(reactor, "sender", TK, transports=fixed, local_addresses=["127.0.0.1"])
    r = TransitRunner(reactor, "receiver", TK, no_listen=True,
                      transports=load_transports(eps=[], extra=[DirectTCP()]))
    cs, cr = await pair(s, r)
    assert cr.description == f"direct-tcp 127.0.0.1:{port}"
    await exchange(cs, cr)
    await close_and_stop(cr, cs, s, r)
    await leaks.check()
    monkeypatch.delenv("HILLTOP_FIXED_PORT")
    assert not example.FixedPort().hilltop_transport_info().usable
