"""One misbehaving plugin is reported once and skipped; the transfer goes on with the others.

Each test puts a faulty transport that claims ``direct-tcp-v1`` in front of the built-in
direct-tcp on both sides, then runs two TransitRunners over loopback and moves records both
ways. Hook timeouts are short so a hanging plugin costs a fraction of a second.
"""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import defer

from hilltop.hints import direct_tcp_v1
from hilltop.hookspecs import TransportInfo, hookimpl
from hilltop.testing import TK, Leaks, close_and_stop, exchange, pair
from hilltop.transit.plugins import HookTimeouts, Transports, load_transports
from hilltop.transit.runner import TransitRunner

FAST = HookTimeouts(start=0.3, connect=0.3, stop=0.3)
DIRECT = EntryPoint("direct-tcp", "hilltop.transports.direct_tcp:DirectTCP", "hilltop.transports")


class Faulty:
    """Claims direct-tcp-v1 and misbehaves in the hook named by ``fault``."""

    api = 1

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.calls: list[str] = []
        self.stopped = False

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        return TransportInfo(name="faulty", hint_types=(direct_tcp_v1.TYPE,))

    @hookimpl
    def hilltop_transport_start(self, session: Any) -> Any:
        self.calls.append("start")
        return self._misbehave("start", [])

    @hookimpl
    def hilltop_transport_connect(self, hint: Any, session: Any) -> Any:
        self.calls.append("connect")
        return self._misbehave("connect", None)

    @hookimpl
    def hilltop_transport_stop(self) -> Any:
        self.calls.append("stop")
        self.stopped = True
        return self._misbehave("stop", None)

    def _misbehave(self, hook: str, normal: Any) -> Any:
        fault = self.fault
        if fault == f"raise-{hook}" or fault == "raise-all":
            raise RuntimeError(f"{hook} exploded")
        if fault == f"hang-{hook}":
            return defer.Deferred()  # never fires, no canceller
        if hook == "start" and fault.startswith("garbage-"):
            return GARBAGE[fault]
        if hook == "connect" and fault == "not-a-stream":
            return defer.succeed(42)
        if hook == "connect" and fault == "fails-later":
            return defer.fail(ConnectionRefusedError("nobody home"))
        return normal


class _NotJson:
    type = direct_tcp_v1.TYPE
    priority = 0.0

    def to_wire(self) -> dict:
        return {"type": direct_tcp_v1.TYPE, "blob": object()}


GARBAGE = {
    "garbage-string": "127.0.0.1:1234",
    "garbage-object": [object()],
    "garbage-undeclared": [direct_tcp_v1.Hint("127.0.0.1", 1), _RelayLike := type(
        "RelayLike", (), {"type": "relay-v1", "priority": 0.0,
                          "to_wire": lambda self: {"type": "relay-v1"}})()],
    "garbage-not-json": [_NotJson()],
    "garbage-priority": [type("P", (), {"type": direct_tcp_v1.TYPE, "priority": "high",
                                         "to_wire": lambda self: {}})()],
}


def transports_with(fault: str) -> tuple[Transports, Faulty]:
    faulty = Faulty(fault)
    ts = load_transports(eps=[DIRECT], extra=[faulty])
    ts.loaded.insert(0, ts.loaded.pop())  # the faulty one is asked first
    return ts, faulty


def make(reactor: Any, role: str, ts: Transports, **kw: Any) -> TransitRunner:
    kw.setdefault("local_addresses", ["127.0.0.1"])
    return TransitRunner(reactor, role, TK, transports=ts, hook_timeouts=FAST, **kw)


FAULTS = ["raise-start", "hang-start", "raise-connect", "hang-connect", "not-a-stream",
          "raise-stop", "hang-stop", "raise-all", *GARBAGE]
EXPECTED = {
    "raise-start": "hilltop_transport_start failed: RuntimeError: start exploded",
    "hang-start": "hilltop_transport_start did not finish within 0.3 s",
    "raise-connect": "hilltop_transport_connect raised RuntimeError: connect exploded",
    "hang-connect": "hilltop_transport_connect did not connect or fail within 0.3 s",
    "not-a-stream": "hilltop_transport_connect gave 42 instead of a ByteStream",
    "raise-stop": "hilltop_transport_stop failed: RuntimeError: stop exploded",
    "hang-stop": "hilltop_transport_stop did not finish within 0.3 s",
    "raise-all": "hilltop_transport_start failed: RuntimeError: start exploded",
    "garbage-string": "expected a list of hints, got '127.0.0.1:1234'",
    "garbage-object": "has type None, not one of the declared hint types",
    "garbage-undeclared": "has type 'relay-v1', not one of the declared",
    "garbage-not-json": "cannot be sent: TypeError",
    "garbage-priority": "has priority 'high', not a number",
}


@pytest.mark.parametrize("fault", FAULTS)
@pytest_twisted.ensureDeferred
async def test_faulty_plugin_is_skipped_and_transfer_completes(
    fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    from twisted.internet import reactor

    caplog.set_level(logging.WARNING, logger="hilltop.transit.plugins")
    leaks = Leaks(reactor)
    s_ts, s_faulty = transports_with(fault)
    r_ts, r_faulty = transports_with(fault)
    s = make(reactor, "sender", s_ts)
    r = make(reactor, "receiver", r_ts, no_listen=True)
    cs, cr = await pair(s, r)
    assert cs.description.startswith("direct-tcp ")
    await exchange(cs, cr)
    await close_and_stop(cr, cs, s, r)
    await leaks.check()
    # the receiver dialled, so it saw every kind of fault; the report says what went wrong
    [failure] = r_ts.failures
    assert failure.name == "faulty"
    assert EXPECTED[fault] in failure.reason
    assert r_faulty.stopped and s_faulty.stopped  # stop is called even after a failure
    warnings = [rec.getMessage() for rec in caplog.records if "faulty" in rec.getMessage()]
    expected_warnings = 2 if fault in ("raise-start", "hang-start", "raise-stop", "hang-stop",
                                       "raise-all") or fault in GARBAGE else 1
    assert len(warnings) == expected_warnings  # once per side that saw it


@pytest_twisted.ensureDeferred
async def test_broken_plugin_is_not_asked_again_in_the_session() -> None:
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    s = make(reactor, "sender", load_transports(eps=[DIRECT]),
             local_addresses=["127.0.0.1", "127.0.0.2"])
    r_ts, faulty = transports_with("raise-connect")
    r = make(reactor, "receiver", r_ts, no_listen=True)
    cs, cr = await pair(s, r)
    await exchange(cs, cr)
    await close_and_stop(cr, cs, s, r)
    await leaks.check()
    assert faulty.calls.count("connect") == 1  # two hints, but only asked once
    assert len(r_ts.failures) == 1


@pytest_twisted.ensureDeferred
async def test_network_failure_is_not_a_plugin_fault() -> None:
    """A connect Deferred that fails is an ordinary failed attempt, not a broken plugin."""
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    s = make(reactor, "sender", load_transports(eps=[DIRECT]))
    only_faulty = load_transports(eps=[], extra=[Faulty("fails-later")])
    r = make(reactor, "receiver", only_faulty, no_listen=True)
    hints = await s.our_hints()
    await r.our_hints()
    with pytest.raises(Exception, match="nobody home"):
        await r.connect(hints)
    assert only_faulty.failures == []
    await s.stop()
    await r.stop()
    await leaks.check()


@pytest_twisted.ensureDeferred
async def test_plugin_that_fails_to_import_does_not_stop_a_transfer() -> None:
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    eps = [EntryPoint("broken", "hilltop.no_such_module:Transport", "hilltop.transports"),
           DIRECT]
    s_ts, r_ts = load_transports(eps=eps), load_transports(eps=eps)
    assert [f.name for f in r_ts.failures] == ["broken"]
    s, r = make(reactor, "sender", s_ts), make(reactor, "receiver", r_ts, no_listen=True)
    cs, cr = await pair(s, r)
    await exchange(cs, cr)
    await close_and_stop(cr, cs, s, r)
    await leaks.check()


@pytest_twisted.ensureDeferred
async def test_cancelling_a_hung_connect_cleans_up() -> None:
    """connect() cancelled while the only plugin's dial hangs: nothing is left behind."""
    from twisted.internet import reactor

    leaks = Leaks(reactor)
    ts = load_transports(eps=[], extra=[Faulty("hang-connect")])
    r = TransitRunner(reactor, "receiver", TK, transports=ts, no_listen=True)  # 45 s timeout
    await r.our_hints()
    d = r.connect([direct_tcp_v1.Hint("127.0.0.1", 9)])
    d.cancel()
    with pytest.raises(defer.CancelledError):
        await d
    await r.stop()
    await leaks.check()
    assert ts.failures == []  # cancelled by us, not the plugin's fault


@pytest.mark.parametrize("fault", ["hang-start", "raise-connect", "hang-connect",
                                   "garbage-not-json", "not-a-stream"])
@pytest_twisted.ensureDeferred
async def test_transports_check_shows_why(fault: str) -> None:
    """``wormhole transports --check`` runs each transport once and names the one that fails."""
    from twisted.internet import reactor

    from hilltop.cli.transports import listing

    class Listening(Faulty):
        """Contributes a real hint (so --check dials it) and then misbehaves."""

        @hookimpl
        def hilltop_transport_start(self, session: Any) -> Any:
            if self.fault.startswith(("hang-start", "garbage-")):
                return self._misbehave("start", [])
            return [direct_tcp_v1.Hint("127.0.0.1", 9)]

    leaks = Leaks(reactor)
    ts = load_transports(eps=[DIRECT], extra=[Listening(fault)])
    seen = await ts.probe(reactor, FAST)
    assert seen["direct-tcp"][0].startswith("direct-tcp-v1 127.0.0.1:")
    table = "\n".join(listing(ts, seen))
    [line] = [line for line in table.splitlines() if line.startswith("faulty")]
    assert EXPECTED[fault] in line, table
    assert "ok (checked)" in [line for line in table.splitlines()
                              if line.startswith("direct-tcp")][0]
    await leaks.check()
