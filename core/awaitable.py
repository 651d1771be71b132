"""A Deferred that an asyncio coroutine can ``await`` too.

The library API returns these so one object serves both worlds: Twisted code adds callbacks
or uses ``yield``/``await`` inside ``ensureDeferred``; asyncio code simply awaits. Inside an
asyncio Task a plain Deferred would be rejected ("Task got bad yield"), so there we hand the
Task an asyncio Future instead. This needs Twisted's asyncio reactor (see
:mod:`hilltop.reactor`), which runs both on the same loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any, TypeVar

from twisted.internet.defer import Deferred

T = TypeVar("T")


class DualDeferred(Deferred[T]):
    def __await__(self) -> Generator[Any, None, T]:
        try:
            loop = asyncio.get_running_loop()
            task = asyncio.current_task(loop)
        except RuntimeError:
            task = None
        if task is not None:
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
