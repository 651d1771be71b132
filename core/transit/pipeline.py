"""A worker thread for the bulk data path, so crypto and hashing leave the reactor thread.

On two cores the file-transfer loop is CPU-bound: sealing or opening a record, hashing it and
reading or writing the file cost far more than the socket work. libsodium (through cffi) and
hashlib release the GIL on big buffers, so one worker thread doing that work while the reactor
thread moves bytes gets both cores busy. Items are processed strictly in order (nonces and the
SHA-256 depend on it) and results are delivered on the reactor thread, in order.

The caller bounds the work in flight with :attr:`OrderedWorker.pending` and its own
back-pressure; nothing here queues without limit on its own. Waking the reactor from a thread
costs a syscall and a context switch, so the worker only does it while the caller says it is
:meth:`hungry <OrderedWorker.set_hungry>` or it has run out of work; otherwise the caller
collects with :meth:`poll`.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet import defer

from hilltop._runtime.awaitable import once_fired

_STOP = object()


class OrderedWorker:
    """Applies ``fn`` to submitted items on one thread; results come back on the reactor.

    ``on_result(value)`` gets each result in submission order; the first exception goes to
    ``on_error(exc)`` instead, after which later items are dropped unprocessed.
    Call :meth:`stop` and wait for it before closing anything ``fn`` uses.
    """

    def __init__(self, reactor: Any, fn: Callable[[Any], Any],
                 on_result: Callable[[Any], None], on_error: Callable[[BaseException], None],
                 name: str = "hilltop-worker") -> None:
        self._reactor = reactor
        self._fn = fn
        self._on_result = on_result
        self._on_error = on_error
        self._in: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._out: deque[tuple[bool, Any]] = deque()
        self._lock = threading.Lock()
        self._wake_scheduled = False
        self._hungry = True
        self._failed = False  # worker side
        self._stopped = False  # reactor side
        self._exited: defer.Deferred[None] = defer.Deferred()
        self.pending = 0
        """Items submitted whose result has not been delivered yet (reactor thread only)."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: Any) -> None:
        if self._stopped:
            raise RuntimeError("worker already stopped")
        self.pending += 1
        self._in.put(item)

    def set_hungry(self, hungry: bool) -> None:
        """Whether each result should wake the reactor at once (else wait for :meth:`poll`).

        Errors always wake it.
        """
        with self._lock:
            self._hungry = hungry
            wake = hungry and bool(self._out) and not self._wake_scheduled
            if wake:
                self._wake_scheduled = True
        if wake:
            self._reactor.callLater(0, self._drain)

    def poll(self) -> None:
        """Deliver the results that are ready now (reactor thread)."""
        if self._out:
            self._drain()

    def stop(self) -> defer.Deferred[None]:
        """Drop what is queued; fires once the thread has finished its current item."""
        if not self._stopped:
            self._stopped = True
            self._failed = True  # skip whatever is still queued
            self._in.put(_STOP)
        return once_fired(self._exited)

    # worker thread
    def _run(self) -> None:
        try:
            while (item := self._in.get()) is not _STOP:
                if self._failed:
                    continue
                try:
                    result = (True, self._fn(item))
                except BaseException as err:  # noqa: BLE001 - handed to the reactor thread
                    self._failed = True
                    result = (False, err)
                with self._lock:
                    self._out.append(result)
                    # an idle worker always reports, so nothing waits for a poll forever
                    wake = ((self._hungry or not result[0] or self._in.empty())
                            and not self._wake_scheduled)
                    if wake:
                        self._wake_scheduled = True
                if wake:
                    self._reactor.callFromThread(self._drain)
        finally:
            self._reactor.callFromThread(self._exited.callback, None)

    # reactor thread
    def _drain(self) -> None:
        with self._lock:
            results = list(self._out)
            self._out.clear()
            self._wake_scheduled = False
        if self._stopped and not results:
            return
        for ok, value in results:
            self.pending -= 1
            if self._stopped:
                continue
            if ok:
                self._on_result(value)
            else:
                self._stopped = True
                self._in.put(_STOP)
                self._on_error(value)


class InlineWorker:
    """:class:`OrderedWorker`'s interface, doing the work at once on the calling thread.

    For a receiver paced by a single-threaded v1 sender: that sender keeps one core busy,
    so a second thread of ours only competes with it for the other core and adds hand-offs.
    """

    def __init__(self, reactor: Any, fn: Callable[[Any], Any],
                 on_result: Callable[[Any], None], on_error: Callable[[BaseException], None],
                 name: str = "hilltop-inline") -> None:
        self._fn = fn
        self._on_result = on_result
        self._on_error = on_error
        self._stopped = False
        self.pending = 0

    def submit(self, item: Any) -> None:
        if self._stopped:
            raise RuntimeError("worker already stopped")
        self.pending += 1
        try:
            result = self._fn(item)
        except BaseException as err:  # noqa: BLE001 - reported like the threaded worker does
            self.pending -= 1
            self._stopped = True
            self._on_error(err)
            return
        self.pending -= 1
        self._on_result(result)

    def set_hungry(self, hungry: bool) -> None:
        """Nothing waits: results are delivered inside :meth:`submit`."""

    def poll(self) -> None:
        """Nothing to collect."""

    def stop(self) -> defer.Deferred[None]:
        self._stopped = True
        return defer.succeed(None)
