"""TCP client sockets that share their local port: the mailbox connection and the hole punch.

Why: a NAT that keeps source ports (Linux masquerade, most home routers) maps our mailbox
connection's port to the same public port, which the mailbox server reports in
``welcome["your-address"]``. A punch dialled *from that same local port* leaves the NAT from
the public port the peer was told, so the peer's simultaneous dial finds the hole. Linux lets
a second socket bind a port in use only if every socket on it set ``SO_REUSEPORT`` before its
bind (and the same user owns them), so both the mailbox socket and the punch socket set it.

The mailbox connection dials with :class:`SharedPortEndpoint` (asyncio's name resolution and
staggered attempts, the connected socket adopted by the reactor), not Twisted's
``HostnameEndpoint``: running ``twisted.internet.endpoints`` (its plugin, zip-path and systemd
modules and ``idna`` with it) cost a text receive ~11 ms of CPU for this one connection
(bench/README.md, "The mailbox dial without Twisted's endpoints"); the CLI defers that module,
which only a transit connection then runs. The hole punch, which binds a given port, keeps
Twisted's endpoints through :class:`SharedPortReactor`.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from typing import TYPE_CHECKING, Any, NoReturn

from twisted.internet import error, tcp
from twisted.internet.address import HostnameAddress
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import (
    IReactorCore,
    IReactorPluggableNameResolver,
    IReactorTCP,
    IReactorTime,
    IStreamClientEndpoint,
)
from zope.interface import implementer

if TYPE_CHECKING:
    from twisted.internet.interfaces import IProtocol, IProtocolFactory
    from twisted.python.failure import Failure


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


ATTEMPT_DELAY = 0.3
"""Seconds before the next address is tried while one is still connecting (happy eyeballs);
Twisted's ``HostnameEndpoint`` waited as long."""


@implementer(IStreamClientEndpoint)
class SharedPortEndpoint:
    """A TCP client endpoint for ``host``: every address it resolves to (IPv6 and IPv4, in the
    resolver's order), each attempt started ``ATTEMPT_DELAY`` after the one before unless
    that one failed sooner, the first to connect wins, and all of it within ``timeout``
    seconds. Each socket shares its port (:func:`share_port`).

    The resolution, the staggered race and the connects run on the reactor's asyncio loop
    (``loop.getaddrinfo`` and :func:`asyncio.staggered.staggered_race`, the machinery of
    ``loop.create_connection``, which cannot set a socket option before its connect); the
    winning socket is handed to Twisted with ``adoptStreamConnection``. Failures are Twisted's
    connection errors with the messages ``HostnameEndpoint`` gave (the engine shows them).
    """

    def __init__(self, reactor: Any, host: str, port: int, timeout: float = 30.0) -> None:
        self._reactor = reactor
        self._host = host
        self._port = port
        self._timeout = timeout

    def connect(self, factory: IProtocolFactory) -> Deferred[IProtocol]:
        loop: asyncio.AbstractEventLoop = self._reactor._asyncioEventloop
        connecting = Deferred.fromFuture(loop.create_task(self._connect(factory)))

        def cancelled(failure: Failure) -> NoReturn:
            failure.trap(asyncio.CancelledError)
            raise error.ConnectingCancelledError(
                HostnameAddress(self._host.encode("utf-8", "backslashreplace"), self._port))

        return connecting.addErrback(cancelled)

    async def _connect(self, factory: IProtocolFactory) -> IProtocol:
        try:
            async with asyncio.timeout(self._timeout):
                sock = await self._race()
        except TimeoutError:
            raise error.TimeoutError() from None
        with sock:  # the reactor takes a duplicate of it
            transport = self._reactor.adoptStreamConnection(sock.fileno(), sock.family, factory)
        if transport is None:
            raise error.ConnectError(string="the protocol factory made no protocol")
        protocol: IProtocol = transport.protocol
        return protocol

    async def _race(self) -> socket.socket:
        from asyncio.staggered import staggered_race

        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            infos = []
        addresses = [(family, address) for family, _, _, _, address in infos
                     if family in (socket.AF_INET, socket.AF_INET6)]
        if not addresses:
            raise error.DNSLookupError(f"no results for hostname lookup: {self._host}")
        attempts = [lambda family=family, address=address: _dial(loop, family, address)
                    for family, address in addresses]
        sock, _, failures = await staggered_race(attempts, ATTEMPT_DELAY)
        if sock is None:
            raise failures[-1] or error.ConnectError()
        return sock


async def _dial(loop: asyncio.AbstractEventLoop, family: int, address: Any) -> socket.socket:
    """A connected non-blocking socket that shares its port, or Twisted's error for why not.

    The connect is ``loop.sock_connect``'s, by hand: that one first checks whether the socket
    is an ``ssl.SSLSocket``, which loads the ``ssl`` module the CLI defers (~10 ms of CPU).
    """
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        share_port(sock)
        sock.setblocking(False)
        err = sock.connect_ex(address)
        if err == errno.EINPROGRESS:
            writable: asyncio.Future[None] = loop.create_future()

            def ready() -> None:
                if not writable.done():
                    writable.set_result(None)

            loop.add_writer(sock, ready)
            try:
                await writable
            finally:
                loop.remove_writer(sock)
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise error.getConnectError((err, os.strerror(err)))
    except BaseException:  # refused, or cancelled: another address won, or the time ran out
        sock.close()
        raise
    return sock
