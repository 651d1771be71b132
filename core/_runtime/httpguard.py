"""Guards for the small HTTP servers hilltop opens to its network: no bodies, few connections.

The ``send --browser`` page server (and the ``--lan`` mailbox, which answers only a WebSocket
upgrade) take no request body, and anyone on the network can connect to them. Twisted's
``Site`` as it comes accepts connections until the process runs out of file descriptors (300
idle ones under ``ulimit -n 256`` killed the sender mid-transfer), keeps an idle one for a
minute, and spools any body to a temporary file (a 1.5 GB ``POST`` filled a 200 MiB tmpfs in
0.2 s). :func:`guard_site` turns a ``Site`` into a factory that refuses a body from its headers
alone and holds at most so many connections, per address and in all, each only while it is busy.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from twisted.internet.interfaces import IAddress
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.web.http import HTTPChannel
from twisted.web.server import Site

from hilltop._values import value

REFUSE_BODY = (b"HTTP/1.1 413 Content Too Large\r\n"
               b"Content-Length: 0\r\nConnection: close\r\n\r\n")


@value
class ConnectionLimits:
    """How many connections a guarded server holds, and how long an idle one may stay."""

    per_address: int
    total: int
    idle_seconds: float


class BodilessChannel(HTTPChannel):
    """An HTTP channel that answers 413 to any request announcing a body, before reading it.

    ``Content-Length`` above 0 or ``Transfer-Encoding: chunked`` (Twisted's length ``None``)
    is refused once the headers end: the request never reaches ``gotLength``, where Twisted
    would open the spool file, and the rest of the connection's input is dropped unread.
    """

    abortTimeout = 5  # seconds a closing client that does not read may keep its socket (15)

    def allHeadersReceived(self) -> None:  # noqa: N802 - Twisted's name
        if self.length != 0:
            assert self.transport is not None
            self.transport.write(REFUSE_BODY)
            self.dataReceived = lambda data: None  # type: ignore[method-assign]
            self.loseConnection()  # the caller sees the transport disconnecting and stops
            return
        super().allHeadersReceived()


class _CappedFactory(WrappingFactory):
    """Builds no protocol (so the listening port closes the socket at once) past a limit."""

    def __init__(self, wrapped: Any, limits: ConnectionLimits) -> None:
        super().__init__(wrapped)
        self.limits = limits
        self.by_address: Counter[str] = Counter()
        self.refused = 0
        self._address_of: dict[ProtocolWrapper, str] = {}

    def buildProtocol(  # type: ignore[override]  # None refuses: Twisted's ports allow it
            self, addr: IAddress | None) -> ProtocolWrapper | None:  # noqa: N802
        host = str(getattr(addr, "host", addr))
        if (len(self._address_of) >= self.limits.total
                or self.by_address[host] >= self.limits.per_address):
            self.refused += 1
            return None
        protocol = super().buildProtocol(addr)
        if protocol is not None:
            self._address_of[protocol] = host
            self.by_address[host] += 1
        return protocol

    def unregisterProtocol(self, p: ProtocolWrapper) -> None:  # noqa: N802
        super().unregisterProtocol(p)
        host = self._address_of.pop(p, None)
        if host is not None:
            self.by_address[host] -= 1
            if not self.by_address[host]:
                del self.by_address[host]


def guard_site(site: Site, limits: ConnectionLimits) -> _CappedFactory:
    """What to listen with instead of ``site``: bodies refused (:class:`BodilessChannel`), an
    idle connection closed after ``limits.idle_seconds``, connections capped by ``limits``."""
    site.protocol = BodilessChannel  # type: ignore[assignment]
    site.timeOut = limits.idle_seconds
    return _CappedFactory(site, limits)
