"""Install Twisted's asyncio reactor once, so aiortc and zeroconf share the loop with Twisted."""

from __future__ import annotations

import asyncio
import sys
from typing import Any


def install_asyncio_reactor(loop: asyncio.AbstractEventLoop | None = None) -> Any:
    """Return the running Twisted reactor, installing the asyncio one first if none is.

    Idempotent. A program that already installed another reactor gets a clear error instead
    of a half-working mix, because the WebRTC and LAN transports need asyncio futures.
    """
    if "twisted.internet.reactor" not in sys.modules:
        from twisted.internet import asyncioreactor

        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
        asyncioreactor.install(loop)
    from twisted.internet import reactor

    if type(reactor).__name__ != "AsyncioSelectorReactor":
        raise RuntimeError(
            f"hilltop needs Twisted's asyncio reactor, but {type(reactor).__name__} is installed"
        )
    return reactor


def ensure_running(reactor: Any) -> None:
    """Start Twisted's machinery when an asyncio program (not ``reactor.run()``) drives the loop.

    An asyncio program runs the loop itself, so the reactor never "starts": its thread pool
    (used for DNS lookups) and startup triggers would never run. Starting it without signal
    handlers leaves the loop, and Ctrl-C, to the asyncio program.
    """
    if reactor.running:
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # nobody runs the loop yet; reactor.run() will start everything
    reactor.startRunning(installSignalHandlers=False)
