"""Runs hilltop's CLI under a Python audit hook that logs every socket the process makes,
binds, connects, sends to, or every name it resolves, as JSON lines in LOG.

Unlike sampling the kernel's socket tables, this sees attempts that fail at once (a connect to
an address the test namespace cannot route never shows up in /proc/net/tcp) and sockets that
live for a moment (a DNS query, an ICE candidate gathering round).

Usage: python socket_audit.py LOG CLI-ARGS...
"""

from __future__ import annotations

import json
import sys
from typing import Any

_EVENTS = {
    "socket.__new__": ("family", "type", "proto"),
    "socket.bind": ("address",),
    "socket.connect": ("address",),
    "socket.sendto": ("address",),
    "socket.sendmsg": ("address",),
    "socket.getaddrinfo": ("host", "port"),
    "socket.gethostbyname": ("host",),
    "socket.gethostbyaddr": ("host",),
}
_LOOKUPS = ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr")


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, int | str | float) or value is None:
        return int(value) if isinstance(value, int) else value
    return repr(value)


def install(path: str) -> None:
    out = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def hook(event: str, args: tuple[Any, ...]) -> None:
        names = _EVENTS.get(event)
        if names is None:
            return
        record: dict[str, Any] = {"event": event}
        if event not in _LOOKUPS:
            args = args[1:]  # the socket object itself
        record.update({name: _plain(value) for name, value in zip(names, args, strict=False)})
        if event == "socket.__new__":
            record["type"] = int(record.get("type") or 0) & 0xF  # without NONBLOCK/CLOEXEC
        out.write(json.dumps(record) + "\n")

    sys.addaudithook(hook)


if __name__ == "__main__":
    install(sys.argv[1])
    sys.argv = ["wormhole", *sys.argv[2:]]
    from hilltop.cli.main import main

    main()
