"""A mailbox server that misbehaves on purpose, one way per run, for test_hostile_mailbox.py.

Usage: hostile_mailbox.py MODE. It listens on 127.0.0.1 (a free port), prints ``PORT <n>``
on stdout, and serves every client the way MODE says:

* ``text-garbage``: a text frame that is not JSON.
* ``bad-utf8``: a text frame that is not UTF-8 (a WebSocket protocol violation).
* ``binary-garbage``: a binary frame of random-looking bytes.
* ``big``: a welcome, and a 60 MB JSON frame after its answer to our claim (over our 48 MiB
  message limit, under the frame limit).
* ``huge``: a 110 MB frame (over the frame limit: cut off before it is read).
* ``unwelcome``: a welcome carrying an ``error`` with terminal escapes in it.
* ``error``: welcome, then an ``error`` message with terminal escapes instead of answers.
* ``silent``: completes the WebSocket handshake, then never says anything.
* ``no-answer``: welcome and acks, but never ``claimed`` or ``allocated``.
* ``out-of-order``: replies nobody asked for (``closed``, ``released``, ``claimed``,
  ``allocated``), then a peer's garbage PAKE before we opened any mailbox.
* ``no-close``: a working server for one client (allocate, claim, open, add with echoes),
  which never confirms ``release`` or ``close``.
* ``flap``: a welcome, then it closes the connection at once, every time.
* ``no-handshake``: a TCP server that never answers the WebSocket handshake.
* ``not-websocket``: a TCP server that answers the handshake with an HTTP 200 and garbage.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from autobahn.twisted.websocket import WebSocketServerFactory, WebSocketServerProtocol
from twisted.internet import protocol, reactor

HOSTILE_TEXT = "go away\x1b[2J\x1b]0;owned\x07\rbye"


class Hostile(WebSocketServerProtocol):
    mode = ""
    side: str | None = None
    stored: list[dict[str, Any]] = []  # no-close: the one mailbox, shared by both clients
    listeners: list[Hostile] = []
    connections = 0  # flap: how many were accepted (and closed)

    def send(self, obj: dict[str, Any]) -> None:
        self.sendMessage(json.dumps({**obj, "server_tx": 0.0}).encode(), isBinary=False)

    def onOpen(self) -> None:
        mode = self.mode
        if mode == "text-garbage":
            self.sendMessage(b"this is not json {", isBinary=False)
        elif mode == "bad-utf8":
            self.sendMessage(b'{"type": "welcome", "x": "\xff\xfe"}', isBinary=False)
        elif mode == "binary-garbage":
            self.sendMessage(bytes(range(256)) * 4, isBinary=True)
        elif mode == "big":
            self.send({"type": "welcome", "welcome": {}})  # the big frame answers the claim
        elif mode == "huge":
            self.sendMessage(b"x" * 110_000_000, isBinary=False)
        elif mode == "unwelcome":
            self.send({"type": "welcome", "welcome": {"error": HOSTILE_TEXT}})
        elif mode in ("error", "no-answer", "out-of-order", "no-close"):
            self.send({"type": "welcome", "welcome": {}})
        elif mode == "flap":
            Hostile.connections += 1
            self.send({"type": "welcome", "welcome": {}})
            self.sendClose()
            print(f"CONNECTION {Hostile.connections}", flush=True)
        if mode == "out-of-order":
            for stray in ({"type": "closed"}, {"type": "released"},
                          {"type": "claimed", "mailbox": "stray"},
                          {"type": "allocated", "nameplate": "4"},
                          {"type": "message", "side": "abcdefabcd", "phase": "7",
                           "body": "00" * 40, "id": "0000"},
                          {"type": "message", "side": "abcdefabcd", "phase": "pake",
                           "body": b'{"pake_v1": "53"}'.hex(), "id": "0001"}):
                self.send(stray)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        msg = json.loads(payload)
        kind = msg.get("type")
        if self.mode in ("error", "no-answer", "out-of-order", "no-close"):
            self.send({"type": "ack", "id": msg.get("id")})
        if self.mode == "big" and kind == "claim":  # answered first: the big one takes seconds
            self.send({"type": "claimed", "mailbox": "mbx4"})
            self.send({"type": "ack", "id": "x" * 60_000_000})
        if self.mode == "error" and kind == "bind":
            self.send({"type": "error", "error": HOSTILE_TEXT, "orig": msg})
        if self.mode != "no-close":
            return
        if kind == "allocate":
            self.send({"type": "allocated", "nameplate": "4"})
        elif kind == "claim":
            self.send({"type": "claimed", "mailbox": "mbx4"})
        elif kind == "open":
            Hostile.listeners.append(self)
            for stored in Hostile.stored:
                self.send(stored)
        elif kind == "add":
            out = {"type": "message", "side": self.side, "phase": msg["phase"],
                   "body": msg["body"], "id": msg.get("id")}
            Hostile.stored.append(out)
            for listener in Hostile.listeners:
                listener.send(out)
        elif kind == "bind":
            self.side = msg.get("side")

    def onClose(self, wasClean: bool, code: Any, reason: Any) -> None:
        if self in Hostile.listeners:
            Hostile.listeners.remove(self)


class Mute(protocol.Protocol):
    """Accepts TCP and never answers (no-handshake), or answers nonsense (not-websocket)."""

    answer = b""

    def connectionMade(self) -> None:
        if self.answer:
            self.transport.write(self.answer)


def main(mode: str) -> None:
    if mode in ("no-handshake", "not-websocket"):
        factory: Any = protocol.Factory.forProtocol(Mute)
        Mute.answer = (b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\ngarbage"
                       if mode == "not-websocket" else b"")
    else:
        Hostile.mode = mode
        factory = WebSocketServerFactory()
        factory.protocol = Hostile
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")  # type: ignore[attr-defined]
    print(f"PORT {port.getHost().port}", flush=True)
    reactor.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main(sys.argv[1])
