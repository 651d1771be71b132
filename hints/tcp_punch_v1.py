"""``tcp-punch-v1``: hilltop's hole-punch hint: our public address as a NAT maps it, to be
dialled at the same moment as we dial the peer's (TCP simultaneous open).

A hint of its own, not a ``direct-tcp-v1``: nothing listens there, and a dial works only from
the dialler's own punch port while we dial back, so only a peer that punches should try it.
Official 0.24 logs "unknown hint type" and skips it (``transit.py`` ``add_connection_hints``);
wormhole-william reads only ``direct-tcp-v1`` and ``relay-v1`` hints. The fields are those
of ``direct-tcp-v1``, so a lenient parser reads it with the same checks.
"""

from __future__ import annotations

from typing import ClassVar

from hilltop.hints import _tcp

TYPE = "tcp-punch-v1"


class Hint(_tcp.EndpointHint):
    type: ClassVar[str] = TYPE


parse = Hint.parse
