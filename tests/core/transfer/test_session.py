"""The session shell over real channels: the engine's deadlines and outcomes reach the caller.

Moved here from test_idle_timeouts (which tested story's helpers): the sender's wait for the
ack, the receiver's wait for the offer, and the mailbox lost before the sender heard us.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from loopback_transit import connected_pair
from twisted.internet import defer

from hilltop._runtime.awaitable import within
from hilltop.errors import SilentPeerError, StalledError, TransitError
from hilltop.transfer import engine as eng
from hilltop.transfer import offers, session
from hilltop.transit import records

TK = b"k" * 32
IDLE = 0.3
BOUND = 4.0
"""Seconds within which a stall of :data:`IDLE` must be reported (a loaded CI machine)."""


class QuietWormhole:
    """A peer that confirmed the key (as an official client: no features) and then says
    nothing more than the test gives it; its mailbox is lost when the test says so."""

    def __init__(self, *messages: bytes) -> None:
        self.app_versions: dict = {}
        self.sent: list[bytes] = []
        self._messages = list(messages)
        self._closed: list[defer.Deferred[str]] = []

    def get_peer_versions(self) -> defer.Deferred[dict]:
        return defer.succeed({})

    def get_message(self) -> defer.Deferred[bytes]:
        if self._messages:
            return defer.succeed(self._messages.pop(0))
        return defer.Deferred()

    def send_message(self, data: bytes) -> None:
        self.sent.append(data)

    def when_closed(self) -> defer.Deferred[str]:
        d: defer.Deferred[str] = defer.Deferred()
        self._closed.append(d)
        return d

    def lose_the_mailbox(self) -> None:
        from hilltop.errors import ServerUnreachableError

        for d in self._closed:
            d.errback(ServerUnreachableError("lost the connection to the mailbox server"))


@pytest.mark.parametrize("stream", [False, True])
@pytest_twisted.ensureDeferred
async def test_a_receiver_that_never_acks_stalls_the_sender(stream: bool) -> None:
    """The sender's wait for the final ack (a receiver frozen after the last byte): a
    stream's sender ends after the idle time-out too, like a file's (issue 28)."""
    from twisted.internet import reactor

    s, r, cs, cr = await connected_pair(reactor)
    plan = eng.Plan(records.BIG_RECORD_SIZE, True, records.SECRETBOX, stream=stream,
                    idle_timeout=IDLE)
    offer = offers.StreamOffer("x") if stream else offers.FileOffer("f", 3)
    engine = eng.TransferEngine.sender(plan, offer, size=None if stream else 3)
    engine.stage = eng.Stage.MOVING
    shell = session._Shell(reactor, QuietWormhole(), engine, session.Listener())  # noqa: SLF001
    shell.channel = cs
    engine.bulk_done((3, "ab" * 32) if stream else "ab" * 32, reactor.seconds())
    started = time.monotonic()
    what = "stream" if stream else "transfer"
    with pytest.raises(StalledError, match=f"sent nothing for 0.3 s while confirming the {what}"):
        await shell.wait()
    assert IDLE <= time.monotonic() - started < BOUND
    if stream:  # the end marker and the trailer went before the wait
        assert await cr.receive_record() == b""
        assert await cr.receive_record()
    # The channel of the failed transfer is dropped, not kept for later (it was a "the
    # connection still works afterwards" check when a story's helper timed out alone): our
    # side is closed and refuses to send; the peer's next read ends with a clean
    # TransitError at once, not a hang nor a garbled record.
    await within(cs.when_closed(), BOUND, reactor, lambda: AssertionError("channel leaked"))
    with pytest.raises(TransitError, match="cannot send"):
        cs.send_record(b"late")
    read = within(cr.receive_record(), BOUND, reactor, lambda: AssertionError("peer hangs"))
    with pytest.raises(TransitError):
        await read
    await within(cr.when_closed(), BOUND, reactor, lambda: AssertionError("peer not closed"))
    await s.stop()
    await r.stop()


@pytest.mark.parametrize("path", ["pump", "reactor"])
@pytest_twisted.ensureDeferred
async def test_a_stream_sender_that_stops_mid_stream_stalls_the_receiver(
        tmp_path: Path, path: str) -> None:
    """The receiver's side of a stalled stream (issue 28): the sender sent some of its
    stream, then nothing, its connection open. The receiver ends after the idle time-out
    with the stall message, keeps nothing that looks like the stream, and drops the channel
    (the sender sees it close)."""
    from twisted.internet import reactor

    from hilltop.transfer.filesink import UNKNOWN_SIZE, FileSink

    s, r, cs, cr = await connected_pair(reactor)
    if path == "reactor":  # the reactor-driven pipeline instead of the bulk pump's thread
        for conn in (cs, cr):
            conn.stream.lend_socket = lambda: defer.succeed(None)
    plan = eng.Plan(records.BIG_RECORD_SIZE, True, records.SECRETBOX, stream=True,
                    idle_timeout=IDLE)
    engine = eng.TransferEngine.receiver(plan, reactor.seconds())
    engine.actions()  # its read of the mailbox: the offer came already
    engine.offer = offers.StreamOffer("out.bin")
    engine.stage = eng.Stage.CONNECTING
    shell = session._Shell(reactor, QuietWormhole(), engine, session.Listener())  # noqa: SLF001
    shell.sink = FileSink(str(tmp_path / "out.bin"), UNKNOWN_SIZE)
    for _ in range(3):
        cs.send_record(b"s" * 1000)  # part of the stream; no end marker, no trailer
    started = time.monotonic()
    shell.feed(lambda now: shell._up(cr, now))  # noqa: SLF001 - the race is won
    stalled = re.escape(f"nothing moved for 0.3 s: {eng.STREAM_STALLED}")
    with pytest.raises(StalledError, match=stalled):
        await shell.wait()
    assert IDLE <= time.monotonic() - started < BOUND
    assert os.listdir(tmp_path) == []  # neither out.bin nor its partial
    await cs.when_closed()  # the receiver dropped the channel: the sender is not held
    await s.stop()
    await r.stop()


@pytest_twisted.ensureDeferred
async def test_a_sender_that_never_offers_is_given_up_on() -> None:
    from twisted.internet import reactor

    started = time.monotonic()
    with pytest.raises(SilentPeerError, match="said nothing for 0.3 s after the code"):
        await session.receive_offer(reactor, QuietWormhole(),  # type: ignore[arg-type]
                                    idle_timeout=IDLE)
    assert time.monotonic() - started < BOUND


class _Sink:
    aborted = False

    def skip_hash(self) -> None:
        pass

    def without_direct_io(self) -> None:
        pass

    def abort(self) -> None:
        self.aborted = True


class _Runner:
    class transports:  # noqa: N801 - the attribute the transit message reads
        loaded: list = []

    async def our_hints(self) -> list:
        return []

    async def stop(self) -> None:
        pass


def offered() -> QuietWormhole:
    transit = offers.TransitMsg(({"type": "direct-tcp-v1"},), ()).to_wire()
    return QuietWormhole(transit, offers.FileOffer("f", 10).to_wire())


@pytest_twisted.ensureDeferred
async def test_a_mailbox_lost_before_the_first_byte_ends_the_wait_with_its_cause(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from twisted.internet import reactor

    from hilltop.errors import ServerUnreachableError

    never: defer.Deferred[Any] = defer.Deferred()
    cancelled: list[bool] = []
    never.addErrback(lambda f: cancelled.append(bool(f.check(defer.CancelledError))) or f)
    monkeypatch.setattr(session, "make_runner", lambda *_a: _Runner())
    monkeypatch.setattr(session, "connect_channel", lambda *_a: never)
    w = offered()
    incoming = await session.receive_offer(reactor, w)  # type: ignore[arg-type]
    sink = _Sink()
    waiting = defer.ensureDeferred(incoming.receive(sink, session.TransitOptions()))  # type: ignore[arg-type]
    await defer.succeed(None)
    w.lose_the_mailbox()
    with pytest.raises(ServerUnreachableError, match="lost the connection to the mailbox"):
        await waiting
    assert cancelled == [True]  # what it waited for was stopped, not left running
    assert sink.aborted


@pytest_twisted.ensureDeferred
async def test_a_mailbox_lost_once_data_flows_changes_nothing() -> None:
    """Once the sender's first bytes came, losing the mailbox changes nothing (the engine
    alone: tests/core/transfer/test_engine.py has the same with the pair)."""
    from twisted.internet import reactor

    w = offered()
    incoming = await session.receive_offer(reactor, w)  # type: ignore[arg-type]
    engine = incoming._shell.engine  # noqa: SLF001
    engine.accept(b"{}", size=10)
    engine.actions()
    moved: list[int] = []
    shell = incoming._shell  # noqa: SLF001
    shell.listener = session.Listener(progress=moved.append)
    shell._moved(100)  # noqa: SLF001 - the sender's first bytes: it had our answer
    engine.mailbox_lost(RuntimeError("mailbox gone"))
    assert not engine.finished and engine.actions() == [] and moved == [100]


@pytest_twisted.ensureDeferred
async def test_a_refusal_goes_out_before_what_the_caller_does_next() -> None:
    """The caller's code after ``receive_offer`` runs once the engine's outputs went out:
    a refusal followed at once by closing the wormhole reached the sender after the close
    (seen against official 0.24: the sender waited for ever for "transfer rejected")."""
    from twisted.internet import reactor

    from hilltop.errors import RejectedError

    w = offered()
    arriving: defer.Deferred[bytes] = defer.Deferred()
    w.get_message = lambda: arriving  # type: ignore[method-assign]

    async def receiver() -> None:
        incoming = await session.receive_offer(reactor, w)  # type: ignore[arg-type]
        incoming.reject(RejectedError("refusing to overwrite"))
        w.sent.append(b"close")  # what the CLI does next

    done = defer.ensureDeferred(receiver())
    transit = offers.TransitMsg(({"type": "direct-tcp-v1"},), ()).to_wire()
    w.get_message = lambda: defer.succeed(offers.FileOffer("f", 10).to_wire())  # type: ignore[method-assign]
    arriving.callback(transit)  # the offer comes later, from the mailbox
    await done
    assert w.sent[-2:] == [offers.ErrorMsg("transfer rejected").to_wire(), b"close"]


@pytest.mark.parametrize("announced", [True, False])
@pytest_twisted.ensureDeferred
async def test_a_receiver_warms_up_transit_only_when_the_sender_announced_it(
        monkeypatch: pytest.MonkeyPatch, announced: bool) -> None:
    """A sender whose offer needs transit lists ``transit-follows``; its receiver imports the
    transit machinery before the offer comes (bench/README.md, "Time budget"). A text
    sender and official peers do not, and their receivers import nothing ahead."""
    from twisted.internet import reactor

    from hilltop.rendezvous import capabilities

    warmed: list[Any] = []
    monkeypatch.setattr(session, "warm_up_transit", warmed.append)
    w = QuietWormhole(offers.TextOffer("hi").to_wire())
    versions = capabilities.default_advertisement("0.1.0", transit_follows=announced)
    w.get_peer_versions = lambda: defer.succeed(versions)  # type: ignore[method-assign]
    options = session.TransitOptions()
    incoming = await session.receive_offer(reactor, w, transit=options)  # type: ignore[arg-type]
    assert isinstance(incoming.offer, offers.TextOffer)
    assert warmed == ([options] if announced else [])


def test_warming_up_covers_every_built_in_transport() -> None:
    from importlib.metadata import entry_points

    from hilltop.transit.plugins import ENTRY_POINT_GROUP

    ours = {ep.module for ep in entry_points(group=ENTRY_POINT_GROUP)
            if ep.dist is not None and ep.dist.name == "hilltop"}
    assert ours and ours <= set(session.TRANSIT_MODULES)


def test_warming_up_names_modules_that_exist() -> None:
    import sys

    session.warm_up_transit()  # an unknown name would raise
    assert all(name in sys.modules for name in session.TRANSIT_MODULES)


def test_transports_loaded_ahead_are_taken_once_for_the_same_choice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """warm_up_transit(options) loads the transports; make_runner takes them (once) when
    the options choose the same ones, and loads its own otherwise."""
    from hilltop.transit import plugins

    loads: list[Any] = []
    real = plugins.load_configured

    def counting(*a: Any, **kw: Any) -> Any:
        loads.append(a)
        return real(*a, **kw)

    monkeypatch.setattr(plugins, "load_configured", counting)
    monkeypatch.setattr(session, "_loaded_ahead", {})

    class Keyed:
        def transit_key(self) -> bytes:
            return TK

    from twisted.internet import reactor

    every = session.TransitOptions()
    session.warm_up_transit(every)
    assert len(loads) == 1
    first = session.make_runner(reactor, Keyed(), "receiver", every)  # type: ignore[arg-type]
    assert len(loads) == 1  # taken from the warm-up
    session.make_runner(reactor, Keyed(), "receiver", every)  # type: ignore[arg-type]
    assert len(loads) == 2  # once only
    relay_only = session.TransitOptions(transports=["relay"])
    session.warm_up_transit(every)
    runner = session.make_runner(reactor, Keyed(), "receiver", relay_only)  # type: ignore[arg-type]
    assert len(loads) == 4  # another choice: loaded for it
    assert [t.name for t in runner.transports.loaded] == ["relay"]
    assert first.transports.loaded


def test_a_broken_config_file_is_reported_where_it_was_not_by_the_warm_up(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up runs before the offer (and on the sender from a reactor callback): a
    config file it cannot read must not fail it; make_runner says why, as before."""
    from twisted.internet import reactor

    from hilltop.errors import LocalError

    (tmp_path / "hilltop").mkdir()
    (tmp_path / "hilltop" / "config.toml").write_text('[transports]\ndisabled = "relay"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setattr(session, "_loaded_ahead", {})
    session.warm_up_transit(session.TransitOptions())
    assert session._loaded_ahead == {}  # noqa: SLF001

    class Keyed:
        def transit_key(self) -> bytes:
            return TK

    with pytest.raises(LocalError, match="disabled must be a list"):
        session.make_runner(reactor, Keyed(), "receiver", session.TransitOptions())  # type: ignore[arg-type]
