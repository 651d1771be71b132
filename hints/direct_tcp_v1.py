"""``direct-tcp-v1``: a host and port the peer listens on, dialled directly."""

from __future__ import annotations

from typing import ClassVar

from hilltop.hints import _tcp

TYPE = "direct-tcp-v1"


class Hint(_tcp.EndpointHint):
    type: ClassVar[str] = TYPE


parse = Hint.parse
