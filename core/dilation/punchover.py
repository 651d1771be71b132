"""The I/O of a punched path's takeover between two hilltop peers (:mod:`.takeover` decides).

The leader asks through a hilltop side channel (``takeover``; official peers are never asked:
:func:`punchover_for` needs a hilltop peer), and both sides dial each other's ``tcp-punch-v1``
hint of the current generation from their punch port, as the ``tcp-punch`` transport does in a
race (:func:`hilltop.transports.punch.punch_dial`). The leader aborts a punch that connected at
once (a reset leaves no TIME_WAIT on the port the next race punches from again) and counts it
as an answer. The follower *holds* its end until the leader's reset (or the deadline): both
ends of a simultaneous open see the connection at about the same moment, and a follower that
reset it first turned the leader's half-finished connect into a failure (seen in the NAT lab:
the follower connected, the leader's probe failed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from hilltop.dilation import takeover as tk
from hilltop.transit.punch import Endpoint, may_punch

log = logging.getLogger(__name__)

CHANNEL = tk.REQUEST_KEY.removeprefix("hilltop-")


class Punchover:
    """The leader's request and the punch dial of one dilated wormhole ``w``."""

    def __init__(self, reactor: Any, w: Any, origin: Endpoint) -> None:
        self._reactor = reactor
        self._w = w
        self._origin = origin

    def ask(self, generation: int) -> None:
        """Leader: ask the follower to punch back during ``generation``."""
        self._w.send_message(tk.punch_request(generation))

    def listen(self, on_request: Callable[[int], None]) -> None:
        """Follower: call ``on_request(generation)`` for each well-formed request."""
        queue = self._w.side_messages(CHANNEL)

        def got(data: bytes) -> None:
            generation = tk.parse_punch_request(data)
            if generation is None:
                log.info("ignoring a malformed takeover request")
            else:
                on_request(generation)
            wait()

        def wait() -> None:
            queue.get().addCallbacks(got, lambda _f: None)  # fails once the wormhole closed

        wait()

    def dial(self, hint: Any, timeout: float, hold: bool = False) -> defer.Deferred[bool]:
        """Punch towards ``hint`` for up to ``timeout`` seconds: True if it connected. With
        ``hold`` (the follower) a connection stays until the peer drops it or ``timeout``."""
        from hilltop.transports.punch import punch_dial

        dialling = defer.ensureDeferred(punch_dial(self._reactor, hint, self._origin, timeout))
        result: defer.Deferred[bool] = defer.Deferred(lambda _d: dialling.cancel())

        def connected(stream: Any) -> None:
            if hold:
                later = self._reactor.callLater(timeout, stream.abort)
                stream.when_closed().addBoth(lambda _: later.cancel() if later.active()
                                             else None)
            else:
                stream.abort()
            if not result.called:
                result.callback(True)

        def failed(_f: Failure) -> None:
            if not result.called:
                result.callback(False)

        dialling.addCallbacks(connected, failed)
        return result


def any_answer(probes: list[defer.Deferred[bool]]) -> defer.Deferred[bool]:
    """True as soon as one of ``probes`` fires True (the rest are cancelled), False once all
    fired otherwise; cancelling it cancels them all."""

    def cancel_all(_d: object) -> None:
        for p in probes:
            if not p.called:
                p.cancel()

    result: defer.Deferred[bool] = defer.Deferred(cancel_all)
    left = [len(probes)]

    def one(ok: object) -> None:
        left[0] -= 1
        if result.called:
            return
        if ok is True:
            result.callback(True)
            cancel_all(result)
        elif left[0] == 0:
            result.callback(False)

    for p in probes:
        p.addBoth(one)
    if not probes:
        result.callback(False)
    return result


def punchover_for(reactor: Any, w: Any, options: Any, peer_app_versions: Any
                  ) -> Punchover | None:
    """A :class:`Punchover` when a punched path could take over: the peer is hilltop (it reads
    side channels), we may punch (not ``--no-listen`` or ``--tor``), ``tcp-punch`` is among
    the transports and the mailbox connection has a local port to punch from."""
    from hilltop.rendezvous import capabilities

    if capabilities.from_app_versions(peer_app_versions).is_v1_only:
        return None
    if not may_punch(options.no_listen, options.tor):
        return None
    if options.transports and "tcp-punch" not in options.transports:
        return None
    origin = getattr(w, "mailbox_local_address", None)
    return None if origin is None else Punchover(reactor, w, origin)
