"""DualDeferred: awaitable from Twisted coroutines and from asyncio tasks alike."""

from __future__ import annotations

import asyncio

import pytest
import pytest_twisted
from twisted.internet import defer

from hilltop._runtime.awaitable import DualDeferred, Queue, Watch


@pytest_twisted.ensureDeferred
async def test_awaited_from_a_twisted_coroutine() -> None:
    from twisted.internet import reactor

    d: DualDeferred[int] = DualDeferred()
    reactor.callLater(0.01, d.callback, 7)
    assert await d == 7


@pytest_twisted.ensureDeferred
async def test_awaited_from_an_asyncio_task() -> None:
    from twisted.internet import reactor

    d: DualDeferred[str] = DualDeferred()

    async def asyncio_side() -> str:
        assert asyncio.current_task() is not None
        return await d

    task = asyncio.ensure_future(asyncio_side())
    reactor.callLater(0.01, d.callback, "both")
    assert await defer.Deferred.fromFuture(task) == "both"


@pytest_twisted.ensureDeferred
async def test_errors_reach_asyncio_awaiters() -> None:
    d: DualDeferred[str] = DualDeferred()

    async def asyncio_side() -> str:
        return await d

    task = asyncio.ensure_future(asyncio_side())
    d.errback(ValueError("nope"))
    with pytest.raises(ValueError, match="nope"):
        await defer.Deferred.fromFuture(task)


def test_watch_fires_late_and_early_waiters() -> None:
    w = Watch()
    early = w.when()
    w.fire(3)
    late = w.when()
    got = []
    early.addCallback(got.append)
    late.addCallback(got.append)
    assert got == [3, 3]


def test_queue_keeps_order_and_fails_waiters() -> None:
    q = Queue()
    q.put(1)
    q.put(2)
    got: list = []
    q.get().addCallback(got.append)
    q.get().addCallback(got.append)
    assert got == [1, 2]
    waiting = q.get()
    errors: list = []
    waiting.addErrback(lambda f: errors.append(f.value))
    q.fail(RuntimeError("closed"))
    assert isinstance(errors[0], RuntimeError)


@pytest_twisted.ensureDeferred
async def test_twisted_coroutine_resumed_inside_an_asyncio_task_stays_twisted() -> None:
    """aiortc and zeroconf fire callbacks from inside asyncio Tasks; a Twisted-driven
    coroutine woken there must still wait the Twisted way."""
    gate: defer.Deferred[None] = defer.Deferred()
    later: DualDeferred[int] = DualDeferred()

    async def twisted_side() -> int:
        await gate
        return await later

    result = defer.ensureDeferred(twisted_side())

    async def some_asyncio_task() -> None:
        gate.callback(None)

    await defer.Deferred.fromFuture(asyncio.ensure_future(some_asyncio_task()))
    later.callback(9)
    assert await result == 9


@pytest_twisted.ensureDeferred
async def test_asyncio_task_awaits_through_nested_coroutines() -> None:
    from twisted.internet import reactor

    d: DualDeferred[str] = DualDeferred()

    async def inner() -> str:
        return await d

    async def outer() -> str:
        return await inner()

    task = asyncio.ensure_future(outer())
    reactor.callLater(0.01, d.callback, "deep")
    assert await defer.Deferred.fromFuture(task) == "deep"
