"""Install Twisted's asyncio reactor once, so aiortc and zeroconf share the loop with Twisted."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any, Literal, cast

from twisted.internet.interfaces import IHostnameResolver, IHostResolution
from zope.interface import implementer

if TYPE_CHECKING:
    from twisted.internet.asyncioreactor import AsyncioSelectorReactor
    from twisted.internet.interfaces import IResolutionReceiver


def install_asyncio_reactor(
    loop: asyncio.AbstractEventLoop | None = None,
) -> AsyncioSelectorReactor:
    """Return the running Twisted reactor, installing the asyncio one first if none is.

    Idempotent. A program that already installed another reactor gets a clear error instead
    of a half-working mix, because the WebRTC and LAN transports need asyncio futures.
    """
    if "twisted.internet.reactor" not in sys.modules:
        from hilltop._runtime.lazytls import openssl_deferred
        from hilltop._runtime.memory import importing

        with openssl_deferred(), importing():  # the CLI's: Twisted's TCP, reactor without TLS
            from twisted.internet import asyncioreactor

        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
        asyncioreactor.install(loop)
    from twisted.internet import reactor as installed

    if type(installed).__name__ != "AsyncioSelectorReactor":
        raise RuntimeError(
            f"hilltop needs Twisted's asyncio reactor, but {type(installed).__name__} is installed"
        )
    reactor = cast("AsyncioSelectorReactor", installed)
    if not isinstance(reactor.nameResolver, _LoopResolver):
        reactor.installNameResolver(_LoopResolver(reactor._asyncioEventloop))
    return reactor


@implementer(IHostnameResolver)
class _LoopResolver:
    """Hostname resolution through the asyncio loop's ``getaddrinfo``.

    Twisted's default resolver uses the reactor's thread pool, which only starts when
    ``reactor.run()`` is called. An asyncio program drives the loop itself and never calls it,
    so lookups would wait forever (and starting the pool would leave threads that block
    interpreter exit). asyncio's executor has neither problem, so both kinds of program use it.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def resolveHostName(  # noqa: N802 - Twisted's IHostnameResolver
        self, receiver: IResolutionReceiver, hostName: str, portNumber: int = 0,  # noqa: N803
        addressTypes: Any = None, transportSemantics: str = "TCP",  # noqa: N803
    ) -> IHostResolution:
        import socket

        from twisted.internet.address import IPv4Address, IPv6Address
        from twisted.internet.defer import Deferred

        families = {IPv4Address: socket.AF_INET, IPv6Address: socket.AF_INET6}
        wanted = {families[t] for t in addressTypes} if addressTypes else set(families.values())
        family = wanted.pop() if len(wanted) == 1 else socket.AF_UNSPEC
        kind = socket.SOCK_DGRAM if transportSemantics == "UDP" else socket.SOCK_STREAM
        future = asyncio.ensure_future(
            self._loop.getaddrinfo(hostName, portNumber, family=family, type=kind),
            loop=self._loop)
        resolution = _Resolution(hostName, future)
        receiver.resolutionBegan(resolution)

        def resolved(infos: list[Any]) -> None:
            for fam, _type, _proto, _name, sockaddr in infos:
                proto: Literal["TCP", "UDP"] = "UDP" if transportSemantics == "UDP" else "TCP"
                if fam == socket.AF_INET:
                    receiver.addressResolved(IPv4Address(proto, *sockaddr[:2]))
                elif fam == socket.AF_INET6:
                    receiver.addressResolved(IPv6Address(proto, *sockaddr))
            receiver.resolutionComplete()

        d = Deferred.fromFuture(future)
        d.addCallbacks(resolved, lambda _f: receiver.resolutionComplete())
        return resolution


@implementer(IHostResolution)
class _Resolution:
    """Twisted's IHostResolution: the name being resolved, and a way to give up."""

    def __init__(self, name: str, future: asyncio.Future[Any]) -> None:
        self.name = name
        self._future = future

    def cancel(self) -> None:
        self._future.cancel()
