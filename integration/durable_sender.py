"""A durable sender (``send --durable``) on the library API that drops its L2 connection once,
mid-transfer: the counterpart of ``wormhole receive`` in the durable tests over Tor and WebRTC.

    python durable_sender.py MAILBOX_URL CODE PATH DROP_AFTER

It sends ``PATH`` with ``TransitOptions(durable=True)`` and, once the receiver acknowledged
``DROP_AFTER`` bytes, aborts the L2 connection of the transfer's Dilation (as
integration/dilation_peer.py's ``HILLTOP_DROP_AFTER`` does), so the next generation must carry
the rest. It reads no more of the file until then: over Tor a 300 kB file's acks and the
receiver's final answer could all come in one read, and the transfer ended before the drop.
``HILLTOP_TRANSPORTS=a,b`` races only those transports; ``HILLTOP_TOR_CONTROL=ENDPOINT`` puts
the mailbox and every L2 connection through that Tor (as ``--tor-control-port``). Prints
``dropping the L2 connection at N``, each ``path: WHAT`` (``path: lost`` when it broke), and at
the end ``sent`` and ``generations G``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

from dilation_peer import tor_from_environment
from twisted.internet import defer, task

from hilltop import TransitOptions, install_asyncio_reactor


async def main(reactor: Any, url: str, code: str, path: str, drop_after: str) -> None:
    from hilltop.api import Wormhole
    from hilltop.cli.send import close_quietly
    from hilltop.rendezvous.capabilities import default_advertisement
    from hilltop.transfer import session

    only = os.environ.get("HILLTOP_TRANSPORTS")
    options = TransitOptions(transports=only.split(",") if only else None, durable=True,
                             reconnect_grace=60.0)
    manager, options, extra = await tor_from_environment(reactor, options)
    from hilltop import __version__

    w = Wormhole(relay_url=url, reactor=reactor, dilation=True,
                 app_versions=default_advertisement(__version__, options.transports), **extra)
    w.set_code(code)
    dilated: list[Any] = []
    dilate = w.dilate

    def keep(**kwargs: Any) -> Any:  # the session dilates; keep its handle to drop L2 once
        dilated.append(dilate(**kwargs))
        defer.ensureDeferred(dilated[-1].dilator()).addCallback(lambda d: setattr(
            d, "on_status", lambda text: print(f"dilation: {text}", flush=True)))
        return dilated[-1]

    w.dilate = keep  # type: ignore[method-assign]
    handed = [0]
    limit = int(drop_after)
    dropped_yet = threading.Event()

    def progress(n: int) -> None:
        handed[0] += n

    async def drop_once_acknowledged() -> None:
        # bytes the peer acknowledged (handed over, no longer waiting in L3): counting only
        # what was handed, the drop could come before the receiver even had the subchannel.
        # Looked at after each batch of records, not polled: a poll every 20 ms missed a
        # small file's acks over Tor (all of it acknowledged between two looks, 2 runs in 14)
        dilator = await dilated_soon()
        dropped: defer.Deferred[None] = defer.Deferred()
        flush = dilator.flush

        def drop() -> None:
            print(f"dropping the L2 connection at {handed[0] - dilator.l3.unacked_bytes} "
                  "acknowledged", flush=True)
            dilator.drop_connection()
            dropped.callback(None)
            dropped_yet.set()

        def flush_and_look() -> None:
            flush()
            if (not dropped.called and dilator.l3 is not None
                    and handed[0] - dilator.l3.unacked_bytes >= limit):
                dilator.flush = flush
                reactor.callLater(0, drop)  # not within the Dilator's own flush

        dilator.flush = flush_and_look
        await dropped

    async def dilated_soon() -> Any:
        while not dilated:
            await task.deferLater(reactor, 0.02, lambda: None)
        return await dilated[0].dilator()

    listener = session.Listener(
        progress=progress,
        on_path=lambda what: print(f"path: {what or 'lost'}", flush=True))
    source = session.open_source(path)
    hold_back_after_limit(source, limit, dropped_yet)
    dropping = defer.ensureDeferred(drop_once_acknowledged())
    try:
        await session.send(reactor, w, source, options, listener=listener)
        print("sent", flush=True)
        if not dropping.called:
            raise SystemExit(f"sent before {limit} bytes were acknowledged: nothing dropped")
        dilator = await dilated[0].dilator()
        print(f"generations {dilator.generation_count}", flush=True)
    finally:
        dropped_yet.set()  # a sending thread still held back lets go
        dropping.cancel()
        dropping.addErrback(lambda _: None)  # cancelled on the way out: not an error
        source.close()
        await close_quietly(w)
        if manager is not None:
            await manager.close()


def hold_back_after_limit(source: Any, limit: int, dropped_yet: threading.Event) -> None:
    """Reads stop at ``limit`` bytes until ``dropped_yet``: the sending thread's batch ends
    there (``more_ready``), the next read waits (at most 120 s, then goes on and the run
    fails as "nothing dropped")."""
    plain = source.readinto

    def readinto(buffer: Any) -> int:
        room = limit - source.position
        if room <= 0:
            dropped_yet.wait(120)
            return plain(buffer)
        return plain(memoryview(buffer)[:room] if room < len(buffer) else buffer)

    source.readinto = readinto
    source.more_ready = lambda: source.position < limit or dropped_yet.is_set()


if __name__ == "__main__":
    # on stderr, which the test shows when it fails: each step with its milliseconds
    logging.basicConfig(level=logging.INFO, format="%(relativeCreated)d %(name)s %(message)s")
    install_asyncio_reactor()
    task.react(lambda reactor: defer.ensureDeferred(main(reactor, *sys.argv[1:])))
