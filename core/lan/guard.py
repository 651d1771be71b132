"""Limits around the in-process LAN mailbox, so nobody on the LAN can flood or block the sender.

Why: the official server was written for a machine of its own behind an operator; in LAN mode
it runs inside the sender's process and anyone on the network can connect to it. Every frame
is stored in memory, every connection may allocate or claim, and nothing bounds either. The
sender needs one nameplate (the one it announced), one mailbox (that nameplate's) and two
clients (itself and its receiver), so the limits below are tens of times what a transfer uses
and a tiny fraction of what a flood would need:

* at most :data:`LanLimits.connections` connections at once, and :data:`LanLimits.per_address`
  from one address (the sender's own counts as one). When a new connection would pass either,
  the oldest connection that holds no open mailbox (of that address, or of anyone) makes room
  for it: only connections in a session are safe, so idle ones cannot keep the receiver out
  (issue 27, item 15: 15 idle connections from 4 addresses did);
* a connection that holds no open mailbox for :data:`LanLimits.idle_seconds` (a bare TCP
  connection, a WebSocket that never claims and opens, one that closed its mailbox) is dropped;
  our clients and official ones open theirs within milliseconds and reconnect when dropped;
* at most :data:`LanLimits.frames` frames on one connection, each at most
  :data:`LanLimits.frame_bytes`, at most :data:`LanLimits.connection_bytes` on one connection
  and :data:`LanLimits.address_bytes` from one address over the session: one peer spends its
  own budget, never everyone's (a session-wide budget let nine 8 MB ``ping`` frames lock the
  receiver out);
* ``allocate``, a ``claim`` of any other nameplate than the announced one, and an ``open`` of
  any other mailbox than that nameplate's are refused with an ``error`` message (a client of
  ours then exits with a clear line); so is everything once its address's budget is spent.

A connection over a connection limit is dropped, not answered: a flood gets no work out of us.
The sender is told, once, on a line of its own (:attr:`Budget.notice`): a receiver refused, or
a flood, is never silent.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from twisted.internet.protocol import Factory, connectionDone
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.python.failure import Failure

from hilltop._values import value

log = logging.getLogger(__name__)

ANNOUNCED_ONLY = "this LAN mailbox serves only the nameplate it announced"


@value
class LanLimits:
    """What one LAN mailbox session lets a client spend, so a host on the LAN cannot flood us."""

    connections: int = 16
    per_address: int = 4
    frames: int = 1000
    """A text transfer takes about 10 frames a side; a WebRTC one about 20."""
    frame_bytes: int = 8 * 1024 * 1024
    """What every hilltop sender stays under (its ``--text -`` and manifest budgets); only
    hilltop peers meet on a LAN mailbox, so the client's larger limit for official senders
    (``hilltop.rendezvous.messages.MAX_FRAME_CHARS``) is not needed here."""
    connection_bytes: int = 16 * 1024 * 1024
    """Two frames of the biggest size: a text message near the frame limit still goes through."""
    address_bytes: int = 32 * 1024 * 1024
    """One address, all its connections over the whole session (reconnecting starts nothing
    afresh)."""
    idle_seconds: float = 10.0
    """How long a connection may hold no open mailbox."""


class Budget:
    """The session's shared state: the one nameplate and mailbox served, what each address
    has spent, and the one way to tell the sender (``notice``)."""

    def __init__(self, limits: LanLimits,
                 notice: Callable[[str], None] | None = None) -> None:
        self.limits = limits
        self.nameplate: str | None = None
        self.mailbox: str | None = None
        """The announced nameplate's mailbox, learnt from the server's first ``claimed``."""
        self.spent: dict[str, int] = {}
        self.notice = notice
        self._told: set[str] = set()

    def tell_once(self, kind: str, line: str) -> None:
        """Tell the sender ``line`` the first time something of ``kind`` happens."""
        log.info("LAN mailbox: %s", line)
        if kind in self._told or self.notice is None:
            return
        self._told.add(kind)
        self.notice(line)

    def flooded(self, host: str, what: str) -> None:
        self.tell_once("flood", f"LAN mailbox: {what} from {host}; someone on this network may "
                                "be flooding it (the transfer goes on if the receiver gets in)")

    def refusal(self, payload: bytes, host: str = "") -> str | None:
        """Why this frame from ``host`` is refused (None: serve it); spends its budget."""
        spent = self.spent.get(host, 0) + len(payload)
        self.spent[host] = spent
        if spent > self.limits.address_bytes:
            self.flooded(host, "a client sent more than its address may")
            return "this LAN mailbox has received all it will take from your address"
        try:
            msg = json.loads(payload)
        except (ValueError, RecursionError):
            return None  # the server answers garbage with its own error
        if not isinstance(msg, dict):
            return None
        kind = msg.get("type")
        if kind == "allocate":
            return ANNOUNCED_ONLY
        if kind == "claim" and msg.get("nameplate") != self.nameplate:
            self.tell_once("claim", f"LAN mailbox: refused a client from {host or 'somewhere'} "
                           f"that asked for nameplate {str(msg.get('nameplate'))[:20]!r} "
                           f"(this mailbox serves {self.nameplate!r} only); still waiting")
            return ANNOUNCED_ONLY
        if kind == "open" and (self.mailbox is None or msg.get("mailbox") != self.mailbox):
            return ANNOUNCED_ONLY
        return None


def guarded_protocol(base: type, budget: Budget) -> type:
    """``base`` (the official server's WebSocket protocol) with the per-connection limits."""

    class Guarded(base):
        _frames = 0
        _bytes = 0
        _host = ""
        _errors = 0
        holds_mailbox = False
        """True from an ``open`` the server accepted until a ``close``: a session is going on."""

        def onConnect(self, request: Any) -> Any:
            self._host = _host_of(self.transport.getPeer())
            return super().onConnect(request)

        def onMessage(self, payload: bytes, isBinary: bool) -> None:
            self._frames += 1
            self._bytes += len(payload)
            if self._frames > budget.limits.frames or self._bytes > budget.limits.connection_bytes:
                budget.flooded(self._host, "dropped a connection over its frame limits")
                self.dropConnection(abort=True)
                return
            why = budget.refusal(payload, self._host)
            if why is not None:
                self.send("error", error=why, orig=_orig(payload))
                return
            errors = self._errors
            super().onMessage(payload, isBinary)
            kind = _kind(payload)
            if kind == "open" and self._errors == errors:
                self.holds_mailbox = True
            elif kind == "close":
                self.holds_mailbox = False

        def send(self, mtype: str, **fields: Any) -> None:
            if mtype == "error":
                self._errors += 1
            elif mtype == "claimed" and budget.mailbox is None:
                budget.mailbox = fields.get("mailbox")
            super().send(mtype, **fields)

    return Guarded


def _kind(payload: bytes) -> Any:
    try:
        msg = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    return msg.get("type") if isinstance(msg, dict) else None


def _orig(payload: bytes) -> Any:
    try:
        msg = json.loads(payload)
    except (ValueError, RecursionError):
        return {}
    return msg if isinstance(msg, dict) and len(payload) < 1024 else {}


def _host_of(addr: Any) -> str:
    return str(getattr(addr, "host", addr))


class _Watched(ProtocolWrapper):
    """One connection, from TCP accept to close, whatever protocol it speaks by now (HTTP,
    then the WebSocket that took it over): drops it once it has held no mailbox too long."""

    factory: ConnectionGuard

    def __init__(self, factory: ConnectionGuard, wrapped: Any, host: str, opened: float) -> None:
        super().__init__(factory, wrapped)
        self.host = host
        self.opened = opened
        self._idle_since: float | None = opened
        self._timer: Any = None

    def holds_mailbox(self) -> bool:
        return bool(getattr(self.wrappedProtocol, "holds_mailbox", False))

    def makeConnection(self, transport: Any) -> None:
        super().makeConnection(transport)
        self._schedule(self.factory.limits.idle_seconds)

    def _schedule(self, delay: float) -> None:
        self._timer = self.factory.clock.callLater(delay, self._check)

    def _check(self) -> None:
        self._timer = None
        now = self.factory.clock.seconds()
        idle = self.factory.limits.idle_seconds
        if self.holds_mailbox():
            self._idle_since = None
            self._schedule(idle / 2)
            return
        if self._idle_since is None:
            self._idle_since = now
        left = self._idle_since + idle - now
        if left > 0:
            self._schedule(left)
            return
        log.info("LAN mailbox: dropping a connection from %s that opened no mailbox in %g s",
                 self.host, idle)
        self.drop()

    def drop(self) -> None:
        transport: Any = self.transport
        if transport is not None:
            transport.abortConnection()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        super().connectionLost(reason)


class ConnectionGuard(WrappingFactory[_Watched]):
    """Keeps the connection limits; makes room by dropping idle connections (see the module)."""

    protocol = _Watched

    def __init__(self, wrapped: Factory, limits: LanLimits, clock: Any = None,
                 budget: Budget | None = None) -> None:
        super().__init__(wrapped)
        if clock is None:
            from twisted.internet import reactor as clock
        self.limits = limits
        self.clock = clock
        self.budget = budget
        self.open: list[_Watched] = []  # oldest first

    @property
    def by_address(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for conn in self.open:
            counts[conn.host] = counts.get(conn.host, 0) + 1
        return counts

    def _make_room(self, host: str) -> bool:
        """Drop the oldest idle connection in the way of one more from ``host``; False if every
        connection in the way holds a mailbox."""
        mine = [c for c in self.open if c.host == host]
        crowd = mine if len(mine) >= self.limits.per_address else (
            self.open if len(self.open) >= self.limits.connections else [])
        if not crowd:
            return True
        what = ("too many connections" if crowd is mine else "too many connections at once")
        if self.budget is not None:
            self.budget.flooded(host, what)
        idle = [c for c in crowd if not c.holds_mailbox()]
        if not idle:
            return False
        oldest = idle[0]
        log.info("LAN mailbox: dropping an idle connection from %s to make room", oldest.host)
        self.open.remove(oldest)
        oldest.drop()
        return True

    def buildProtocol(self, addr: Any) -> Any:
        host = _host_of(addr)
        if not self._make_room(host):
            log.info("LAN mailbox: refusing a connection from %s (limit reached)", host)
            return None
        wrapper = _Watched(self, self.wrappedFactory.buildProtocol(addr), host,
                           self.clock.seconds())
        self.open.append(wrapper)
        return wrapper

    def registerProtocol(self, p: Any) -> None:
        pass  # ``open`` is the one record

    def unregisterProtocol(self, p: Any) -> None:
        if p in self.open:
            self.open.remove(p)
