"""How a transit relay is written: ``--transit-helper``'s syntax and a relay's WebSocket URL.

Kept apart from :mod:`hilltop.hints`, which builds the hints from it: the CLI checks every
relay it was given (flag, ``WORMHOLE_TRANSIT_HELPER``, the ``[relay]`` table) before the
rendezvous, so that a typo costs no code, and a text or a small file never uses the hints
themselves. Importing the hints package (each hint type a frozen dataclass) took ~6 ms of
CPU per command (bench/README.md, "Sixth session: the text path's imports"); this module
imports no dataclass.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from hilltop.errors import LocalError, MalformedHintError

HELPER_USAGE = ("expected tcp:HOST:PORT[:priority=F] (IPv6 host in brackets) or a "
                "ws:// or wss:// URL; several endpoints of one relay joined by commas")

TcpEndpoint = tuple[str, int, float]
"""``tcp:HOST:PORT[:priority=F]`` as (host, port, priority)."""

_HELPER = re.compile(
    r"^tcp:(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]+)):(?P<port>\d+)(?P<rest>(?::.*)?)$"
)


def check_websocket_url(url: Any) -> str:
    """``url`` if it is a ``ws://`` or ``wss://`` URL with a host and a valid port, else
    a :class:`MalformedHintError` saying what is wrong."""
    if not isinstance(url, str) or not url.strip():
        raise MalformedHintError(f"websocket hint needs a URL string, got {url!r}")
    text: str = url.strip()
    try:
        parts = urlsplit(text)
        _ = parts.port  # raises ValueError for a port outside 0-65535 or not a number
    except ValueError as err:
        raise MalformedHintError(f"bad websocket URL {text!r}: {err}") from None
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise MalformedHintError(f"websocket hint needs a ws:// or wss:// URL, got {text!r}")
    if parts.port == 0 or not all(0x21 <= ord(c) < 0x7F for c in text):
        raise MalformedHintError(f"bad websocket URL {text!r}: it must be printable ASCII "
                                 "without spaces, with a port above 0")
    return text


def helper_endpoints(text: str) -> tuple[str | TcpEndpoint, ...]:
    """The endpoints of one ``--transit-helper`` (one relay): each ``tcp:HOST:PORT[:priority=F]``
    (IPv6 hosts in brackets) as a :data:`TcpEndpoint`, each WebSocket URL ``ws://HOST[:PORT]/PATH``
    / ``wss://...`` as its text. Raises :class:`hilltop.errors.LocalError` naming the expected
    format."""
    parts = [p.strip() for p in text.split(",")]
    if not all(parts):
        raise LocalError(f"bad transit helper {text!r}: {HELPER_USAGE}")
    return tuple(_endpoint(p, text) for p in parts)


def _endpoint(part: str, text: str) -> str | TcpEndpoint:
    if part.startswith(("ws://", "wss://")):
        try:
            return check_websocket_url(part)
        except MalformedHintError as err:
            raise LocalError(f"bad transit helper {text!r}: {err}") from None
    m = _HELPER.match(part)
    if not m:
        raise LocalError(f"bad transit helper {text!r}: {HELPER_USAGE}")
    host = m.group("v6") or m.group("host")
    port = int(m.group("port"))
    if not 0 < port < 65536:
        raise LocalError(f"bad transit helper {text!r}: port {port} out of range")
    priority = 0.0
    for option in filter(None, m.group("rest").split(":")):
        key, _, value = option.partition("=")
        if key != "priority":
            raise LocalError(
                f"bad transit helper {text!r}: unknown option {key!r}; {HELPER_USAGE}")
        try:
            priority = float(value)
        except ValueError:
            raise LocalError(
                f"bad transit helper {text!r}: priority must be a number, got {value!r}"
            ) from None
    return host, port, priority
