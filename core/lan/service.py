"""LAN mode I/O: an in-process mailbox server, and DNS-SD over mDNS with ``zeroconf``.

zeroconf's async API runs on the asyncio loop that Twisted's asyncio reactor also runs
(:mod:`hilltop._runtime.reactor`), so there are no threads: every coroutine here is an asyncio one
and
Twisted callers bridge with :func:`aio` (``Deferred.fromFuture``). What goes into the records
is decided by the pure :mod:`hilltop.lan.wire`.

The mailbox is the official ``magic-wormhole-mailbox-server`` run in-process with an in-memory
database, listening only on the chosen LAN addresses: the same server code every other client
already talks to, so official clients can join it with ``--relay-url``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import field
from typing import Any

from twisted.internet import defer
from twisted.internet.error import CannotListenError

from hilltop._values import value
from hilltop.errors import LocalError, NameTaken, NotFoundOnLan
from hilltop.hints._tcp import usable_address
from hilltop.lan import wire
from hilltop.lan.guard import Budget, ConnectionGuard, LanLimits, guarded_protocol

log = logging.getLogger(__name__)


def aio(coro: Coroutine[Any, Any, Any]) -> defer.Deferred[Any]:
    """Run an asyncio coroutine on the shared loop; a Deferred for Twisted code to await."""
    return defer.Deferred.fromFuture(asyncio.ensure_future(coro))


# --- interfaces -------------------------------------------------------------------------------
@value
class LanInterfaces:
    """Where to listen and announce: usable addresses, and zeroconf's interface list."""

    addresses: tuple[str, ...]
    """Addresses a LAN peer can reach (no loopback, no link-local), IPv4 first."""
    zeroconf: tuple[str | int, ...] = field(default=())
    """IPv4 addresses and IPv6 interface indexes for zeroconf's sockets."""
    names: tuple[str, ...] = ()


def lan_interfaces(name: str | None = None, adapters: Iterable[Any] | None = None
                   ) -> LanInterfaces:
    """The LAN addresses of this host, or of the interface called ``name`` only.

    Loopback-only adapters are skipped: mDNS and LAN peers never live there. IPv6 mDNS joins the
    group per interface index (it uses the link-local address), so any adapter with IPv6 adds
    its index.
    """
    if adapters is None:
        import ifaddr

        adapters = ifaddr.get_adapters()
    adapters = list(adapters)
    if name is not None:
        chosen = [a for a in adapters if name in (a.name, a.nice_name)]
        if not chosen:
            known = ", ".join(sorted({a.nice_name for a in adapters})) or "none"
            raise LocalError(f"no network interface named {name!r} (this host has: {known})")
    else:
        chosen = adapters
    addresses: list[str] = []
    zc: list[str | int] = []
    names: list[str] = []
    for adapter in chosen:
        ips = [(ip.ip[0] if isinstance(ip.ip, tuple) else ip.ip) for ip in adapter.ips]
        usable = [ip for ip in ips if usable_address(ip)]
        if not usable:
            continue
        names.append(adapter.nice_name)
        addresses += usable
        zc += [ip for ip in usable if ":" not in ip]
        if any(isinstance(ip.ip, tuple) for ip in adapter.ips) and adapter.index is not None:
            zc.append(int(adapter.index))
    if not addresses:
        where = f"interface {name!r}" if name else "this host"
        raise LocalError(f"{where} has no LAN address (only loopback or link-local ones)")
    return LanInterfaces(tuple(wire.order_addresses(addresses)), tuple(dict.fromkeys(zc)),
                         tuple(names))


# --- the mailbox server -----------------------------------------------------------------------
class LanMailbox:
    """The official mailbox server, in this process, on the given addresses and one port."""

    def __init__(self, reactor: Any, addresses: Sequence[str],
                 limits: LanLimits | None = None,
                 notice: Callable[[str], None] | None = None) -> None:
        """``notice`` is handed one line when a client is refused or the mailbox is flooded
        (at most once each), for the sender to show: it would otherwise wait in silence."""
        self._reactor = reactor
        self._addresses = list(addresses)
        self._budget = Budget(limits or LanLimits(), notice)
        self._ports: list[Any] = []
        self._server: Any = None
        self.port = 0
        self.addresses: list[str] = []

    def start(self) -> list[str]:
        """Listen; returns the ``ws://`` URLs, IPv4 first. Raises LocalError if none works."""
        from wormhole_mailbox_server.database import create_or_upgrade_channel_db
        from wormhole_mailbox_server.server import make_server

        # allow_list=False: nobody on the LAN may list the nameplates in use
        self._server = make_server(create_or_upgrade_channel_db(":memory:"), allow_list=False)
        self._server.startService()
        site = self._guarded_site()
        for address in self._addresses:
            try:
                port = self._reactor.listenTCP(self.port, site, interface=address)
            except CannotListenError as err:
                log.debug("LAN mailbox cannot listen on %s: %s", address, err)
                continue
            self._ports.append(port)
            self.port = port.getHost().port
            self.addresses.append(address)
        if not self._ports:
            self._server.stopService()
            raise LocalError("the LAN mailbox could not listen on any LAN address")
        return wire.mailbox_urls(self.addresses, self.port)

    def serve_only(self, nameplate: str) -> None:
        """From now on the one nameplate any client may claim: call it *before* announcing
        the nameplate, since a receiver already looking claims it the moment the first
        announcement reaches it (issue 27, item 1)."""
        self._budget.nameplate = nameplate

    def _guarded_site(self) -> Any:
        """The official server's web site (``/v1``, no request log), inside the limits of
        :mod:`hilltop.lan.guard`."""
        from autobahn.twisted.resource import WebSocketResource
        from wormhole_mailbox_server.server_websocket import WebSocketServerFactory
        from wormhole_mailbox_server.web import PrivacyEnhancedSite, Root

        from hilltop._runtime.httpguard import BodilessChannel

        limits = self._budget.limits
        factory = WebSocketServerFactory(None, self._server)
        factory.protocol = guarded_protocol(factory.protocol, self._budget)
        factory.setProtocolOptions(maxMessagePayloadSize=limits.frame_bytes,
                                   maxFramePayloadSize=limits.frame_bytes)
        root = Root()
        root.putChild(b"v1", WebSocketResource(factory))
        site = PrivacyEnhancedSite(root)
        site.logRequests = False
        site.protocol = BodilessChannel  # a mailbox takes no request bodies
        return ConnectionGuard(site, limits, self._reactor, self._budget)

    def stop(self) -> defer.Deferred[Any]:
        ports, self._ports = self._ports, []
        waits = [defer.maybeDeferred(p.stopListening) for p in ports]
        if self._server is not None:
            server, self._server = self._server, None
            waits.append(defer.maybeDeferred(server.stopService))
        return defer.gatherResults(waits, consumeErrors=True)


# --- mDNS -------------------------------------------------------------------------------------
class Mdns:
    """One zeroconf instance on the chosen interfaces: announce, look up, withdraw, close."""

    def __init__(self, interfaces: Sequence[str | int]) -> None:
        from zeroconf import IPVersion
        from zeroconf.asyncio import AsyncZeroconf

        has4 = any(isinstance(i, str) for i in interfaces)
        has6 = any(isinstance(i, int) for i in interfaces)
        version = (IPVersion.All if has4 and has6 else
                   IPVersion.V6Only if has6 else IPVersion.V4Only)
        self.azc = AsyncZeroconf(interfaces=list(interfaces), ip_version=version)
        self._registered: list[Any] = []
        self._host = f"hilltop-{os.urandom(4).hex()}.local."

    @classmethod
    async def open(cls, interfaces: Sequence[str | int]) -> Mdns:
        """Create it from inside the running loop (zeroconf starts its own thread otherwise)."""
        return cls(interfaces)

    async def announce(self, name: str, port: int, addresses: Sequence[str],
                       txt: dict[str, str], *, probe: bool) -> Any:
        """Register ``name``; with ``probe`` first check nobody else holds it (about 1-2 s).

        Raises :class:`NameTaken` if the probe found another holder.
        """
        from zeroconf import NonUniqueNameException
        from zeroconf.asyncio import AsyncServiceInfo

        info = AsyncServiceInfo(wire.SERVICE_TYPE, name, port=port, properties=txt,
                                server=self._host, parsed_addresses=list(addresses))
        try:
            done = await self.azc.async_register_service(
                info, cooperating_responders=not probe)
        except NonUniqueNameException:
            raise NameTaken(f"{name} is already announced on this LAN") from None
        self._registered.append(info)
        await done
        return info

    async def withdraw(self, info: Any) -> None:
        """Send the goodbye packets for ``info`` (peers drop it from their caches at once)."""
        if info in self._registered:
            self._registered.remove(info)
            done = await self.azc.async_unregister_service(info)
            await done

    async def find(self, name: str, timeout: float, *, query_every: float = 1.0) -> Any:
        """Query for ``name`` until it answers with an address and port or ``timeout`` passes."""
        from zeroconf.asyncio import AsyncServiceInfo

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise NotFoundOnLan(f"nothing on the LAN answered for {name} "
                                    f"within {timeout:g} s")
            info = AsyncServiceInfo(wire.SERVICE_TYPE, name)
            wait_ms = int(1000 * min(query_every, left)) or 1
            if await info.async_request(self.azc.zeroconf, wait_ms) and info.port \
                    and info.parsed_scoped_addresses():
                return info

    async def close(self) -> None:
        """Withdraw everything still announced, then close the sockets."""
        for info in list(self._registered):
            with contextlib.suppress(Exception):
                await self.withdraw(info)
        await self.azc.async_close()


def found_addresses(info: Any) -> list[str]:
    """A found service's addresses a LAN peer can dial, IPv4 first."""
    return wire.order_addresses(info.parsed_addresses())
