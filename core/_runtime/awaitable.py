"""A Deferred that an asyncio coroutine can ``await`` too.

The library API returns these so one object serves both worlds: Twisted code adds callbacks
or awaits inside ``ensureDeferred``; asyncio code simply awaits. An asyncio Task rejects a
plain Deferred ("Task got bad yield") and Twisted's coroutine driver cannot wait on an asyncio
Future, so at ``await`` time we look at *who drives the awaiting coroutine*: we walk out of the
chain of coroutine frames to the frame that resumed the outermost one. Twisted's driver lives
in ``twisted/internet/defer.py``; anything else is the asyncio loop, which gets a Future.
Asking "is there a current asyncio Task?" is not enough: a Twisted-driven coroutine can be
resumed by a Deferred callback fired inside some asyncio Task (aiortc, zeroconf). This needs
Twisted's asyncio reactor (:mod:`hilltop._runtime.reactor`), which runs both on one loop.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Callable, Generator
from pathlib import PurePath
from typing import Any, TypeVar

from twisted.internet.defer import CancelledError, Deferred
from twisted.python.failure import Failure

T = TypeVar("T")
_TWISTED_DRIVER = PurePath("twisted", "internet", "defer.py")
# a coroutine resumed with an exception is thrown into by Failure.throwExceptionIntoGenerator
_TWISTED_THROWER = PurePath("twisted", "python", "failure.py")


def _driven_by_twisted(awaiting_frame: Any) -> bool:
    frame = awaiting_frame
    while frame is not None and frame.f_code.co_flags & inspect.CO_COROUTINE:
        frame = frame.f_back
    if frame is None:
        return True
    parts = PurePath(frame.f_code.co_filename).parts[-3:]
    return parts in (_TWISTED_DRIVER.parts, _TWISTED_THROWER.parts)


class DualDeferred(Deferred[T]):
    def __await__(self) -> Generator[Any, None, T]:
        if not _driven_by_twisted(sys._getframe(1)):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                return self.asFuture(loop).__await__()
        return super().__await__()


class Watch:
    """A value that arrives once and that any number of callers may wait for."""

    def __init__(self) -> None:
        self._waiters: list[DualDeferred[Any]] = []
        self._result: tuple[bool, Any] | None = None

    @property
    def done(self) -> bool:
        return self._result is not None

    def when(self) -> DualDeferred[Any]:
        d: DualDeferred[Any] = DualDeferred()
        if self._result is None:
            self._waiters.append(d)
        elif self._result[0]:
            d.callback(self._result[1])
        else:
            d.errback(self._result[1])
        return d

    def fire(self, value: Any) -> None:
        if self._result is None:
            self._result = (True, value)
            waiters, self._waiters = self._waiters, []
            for d in waiters:
                d.callback(value)

    def fail(self, error: BaseException) -> None:
        if self._result is None:
            self._result = (False, error)
            waiters, self._waiters = self._waiters, []
            for d in waiters:
                d.errback(error)


class Queue:
    """Items that arrive in order; each ``get`` takes the next one (or waits for it)."""

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._waiters: list[DualDeferred[Any]] = []
        self._error: BaseException | None = None

    def put(self, item: Any) -> None:
        if self._waiters:
            self._waiters.pop(0).callback(item)
        else:
            self._items.append(item)

    def get(self) -> DualDeferred[Any]:
        d: DualDeferred[Any] = DualDeferred()
        if self._items:
            d.callback(self._items.pop(0))
        elif self._error is not None:
            d.errback(self._error)
        else:
            self._waiters.append(d)
        return d

    def fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        waiters, self._waiters = self._waiters, []
        for d in waiters:
            d.errback(error)


def once_fired(d: Deferred[Any]) -> Deferred[None]:
    """A new Deferred that fires with None when ``d`` fires, however it ends, leaving ``d``'s
    result to ``d``'s own callbacks: for callers who only wait for a thread to be gone."""
    done: Deferred[None] = Deferred()

    def fire(result: object) -> object:
        done.callback(None)
        return result

    d.addBoth(fire)
    return done


def within(d: Deferred[T], seconds: float, reactor: Any,
           error: Callable[[], BaseException]) -> Deferred[T]:
    """``d`` itself, cancelled and failing with ``error()`` if it has not fired within
    ``seconds``. A cancel from elsewhere (Ctrl-C) stays a plain cancel."""

    def timed_out(result: Any, _timeout: float) -> Any:
        if isinstance(result, Failure) and result.check(CancelledError):
            raise error()
        return result  # it fired just as the time ran out: keep what it brought

    return d.addTimeout(seconds, reactor, onTimeoutCancel=timed_out)
