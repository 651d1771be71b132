"""Limits around the in-process LAN mailbox, so nobody on the LAN can flood the sender.

Why: the official server was written for a machine of its own behind an operator; in LAN mode
it runs inside the sender's process and anyone on the network can connect to it. Every frame
is stored in memory, every connection may allocate or claim, and nothing bounds either. The
sender needs one nameplate (the one it announced) and two clients (itself and its receiver),
so the limits below are tens of times what a transfer uses and a tiny fraction of what a flood
would need:

* at most :data:`LanLimits.connections` WebSocket connections at once, and
  :data:`LanLimits.per_address` from one address (the sender's own counts as one);
* at most :data:`LanLimits.frames` frames on one connection, each at most
  :data:`LanLimits.frame_bytes`, and :data:`LanLimits.total_bytes` over the whole session;
* ``allocate`` and a ``claim`` of any other nameplate than the announced one are refused with
  an ``error`` message (a client of ours then exits with a clear line), as is everything once
  the session's budget is spent.

A connection over a limit is dropped, not answered: a flood gets no work out of us.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from twisted.internet import protocol
from twisted.protocols.policies import WrappingFactory

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LanLimits:
    connections: int = 16
    per_address: int = 4
    frames: int = 1000
    """A text transfer takes about 10 frames a side; a WebRTC one about 20."""
    frame_bytes: int = 8 * 1024 * 1024
    """What our own client accepts (``hilltop.rendezvous.messages.MAX_FRAME_CHARS``)."""
    total_bytes: int = 64 * 1024 * 1024


class Budget:
    """What the whole session may still receive, and the one nameplate it serves."""

    def __init__(self, limits: LanLimits) -> None:
        self.limits = limits
        self.bytes_left = limits.total_bytes
        self.nameplate: str | None = None

    def refusal(self, payload: bytes) -> str | None:
        """Why this frame is refused (None: serve it); spends the budget."""
        self.bytes_left -= len(payload)
        if self.bytes_left < 0:
            return "this LAN mailbox has received all it will take in one session"
        try:
            msg = json.loads(payload)
        except (ValueError, RecursionError):
            return None  # the server answers garbage with its own error
        if not isinstance(msg, dict):
            return None
        if msg.get("type") == "allocate":
            return "this LAN mailbox serves only the nameplate it announced"
        if msg.get("type") == "claim" and msg.get("nameplate") != self.nameplate:
            return "this LAN mailbox serves only the nameplate it announced"
        return None


def guarded_protocol(base: type, budget: Budget) -> type:
    """``base`` (the official server's WebSocket protocol) with the per-connection limits."""

    class Guarded(base):
        _frames = 0

        def onMessage(self, payload: bytes, isBinary: bool) -> None:
            self._frames += 1
            if self._frames > budget.limits.frames:
                log.info("LAN mailbox: dropping a connection after %d frames", self._frames - 1)
                self.dropConnection(abort=True)
                return
            why = budget.refusal(payload)
            if why is not None:
                self.send("error", error=why, orig=_orig(payload))
                return
            super().onMessage(payload, isBinary)

    return Guarded


def _orig(payload: bytes) -> Any:
    try:
        msg = json.loads(payload)
    except (ValueError, RecursionError):
        return {}
    return msg if isinstance(msg, dict) and len(payload) < 1024 else {}


class ConnectionGuard(WrappingFactory):
    """Refuses a connection beyond the total or per-address limit (it is closed at once)."""

    def __init__(self, wrapped: protocol.Factory, limits: LanLimits) -> None:
        super().__init__(wrapped)
        self.limits = limits
        self.by_address: dict[str, int] = {}
        self._hosts: dict[Any, str] = {}  # open connection -> its peer's address

    def buildProtocol(self, addr: Any) -> Any:
        host = getattr(addr, "host", str(addr))
        if (sum(self.by_address.values()) >= self.limits.connections
                or self.by_address.get(host, 0) >= self.limits.per_address):
            log.info("LAN mailbox: refusing a connection from %s (limit reached)", host)
            return None
        self.by_address[host] = self.by_address.get(host, 0) + 1
        wrapper = super().buildProtocol(addr)
        self._hosts[wrapper] = host
        return wrapper

    def unregisterProtocol(self, p: Any) -> None:
        super().unregisterProtocol(p)
        host = self._hosts.pop(p, "")
        left = self.by_address.get(host, 0) - 1
        if left > 0:
            self.by_address[host] = left
        else:
            self.by_address.pop(host, None)
