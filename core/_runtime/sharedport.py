"""TCP client sockets that share their local port: the mailbox connection and the hole punch.

Why: a NAT that keeps source ports (Linux masquerade, most home routers) maps our mailbox
connection's port to the same public port, which the mailbox server reports in
``welcome["your-address"]``. A punch dialled *from that same local port* leaves the NAT from
the public port the peer was told, so the peer's simultaneous dial finds the hole. Linux lets
a second socket bind a port in use only if every socket on it set ``SO_REUSEPORT`` before its
bind (and the same user owns them), so both the mailbox socket and the punch socket set it.
"""

from __future__ import annotations

import socket
from typing import Any

from twisted.internet import tcp
from twisted.internet.interfaces import (
    IReactorCore,
    IReactorPluggableNameResolver,
    IReactorTCP,
    IReactorTime,
)
from zope.interface import implementer


def share_port(sock: socket.socket) -> None:
    """Let later sockets of this user bind the port ``sock`` gets (set before its bind)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):  # not on Windows: the punch then fails to bind
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)


class _SharedPortClient(tcp.Client):
    def createInternetSocket(self) -> socket.socket:  # noqa: N802 - Twisted's name
        sock: socket.socket = super().createInternetSocket()
        share_port(sock)
        return sock


class _SharedPortConnector(tcp.Connector):
    def _makeTransport(self) -> tcp.Client:  # noqa: N802 - Twisted's name
        return _SharedPortClient(self.host, self.port, self.bindAddress, self, self.reactor)


def connect_shared(reactor: Any, host: str, port: int, factory: Any, timeout: float = 30.0,
                   bindAddress: Any = None) -> Any:  # noqa: N803 - IReactorTCP's name
    """``reactor.connectTCP`` with a socket whose port later sockets may share."""
    connector = _SharedPortConnector(host, port, factory, timeout, bindAddress, reactor)
    connector.connect()
    return connector


@implementer(IReactorTCP, IReactorTime, IReactorCore, IReactorPluggableNameResolver)
class SharedPortReactor:
    """The reactor, except that ``connectTCP`` makes port-sharing sockets.

    Handed to Twisted's endpoints (``HostnameEndpoint`` keeps its name resolution and happy
    eyeballs), so only the socket option differs from an ordinary connection.
    """

    def __init__(self, reactor: Any) -> None:
        self._reactor = reactor

    def connectTCP(self, host: str, port: int, factory: Any, timeout: float = 30.0,  # noqa: N802
                   bindAddress: Any = None) -> Any:  # noqa: N803
        return connect_shared(self._reactor, host, port, factory, timeout, bindAddress)

    @property
    def nameResolver(self) -> Any:  # noqa: N802 - IReactorPluggableNameResolver's name
        return self._reactor.nameResolver

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reactor, name)
