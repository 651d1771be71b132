"""``tor-tcp-v1``: a host (usually ``.onion``) and port reachable only through Tor.

Official 0.24 parses these but never sends one; we keep the type so a Tor transport can claim it.
"""

from __future__ import annotations

from typing import ClassVar

from hilltop.hints import _tcp

TYPE = "tor-tcp-v1"


class Hint(_tcp.EndpointHint):
    type: ClassVar[str] = TYPE


parse = Hint.parse
