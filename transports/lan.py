"""``lan``: find the peer's transit listener on the local network with mDNS (DNS-SD).

Direct hints only help when they carry addresses the peer can reach; behind a VPN, in a
container or with several interfaces they often do not. This transport needs no hints at all:
each side listens, announces the listener under a tag derived from the transit key and its own
role (:func:`hilltop.lan.wire.transit_tag`), and looks for the tag of the other role. A listener
it finds is dialled, and the stream is handed to the race as if it had come in on our own
listener; the transit handshake is the same either way, so the sender picks the first
connection to finish it, whatever its transport.

The tag is unlinkable to the code, and only the two peers can compute it; the transport gets
the two tags in :class:`hilltop.lan.settings.LanSettings`, never the key. It stays quiet (no
multicast) when there are no tags, under ``--tor``, when no interface has a LAN
address, and when the mailbox is on loopback: then both peers are on this very host and direct
TCP over loopback needs no discovery. Also under ``--no-listen``: with no listener there is
nothing to announce, and even a query goes out from our LAN address to every host on the
link, where users of that flag expect the relay and nothing that shows their address.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from typing import Any
from urllib.parse import urlparse

from twisted.internet import defer
from twisted.internet.error import CannotListenError

from hilltop.errors import HilltopError
from hilltop.hookspecs import TransitSession, TransportInfo, hookimpl
from hilltop.lan import wire
from hilltop.lan.settings import LanSettings, LanTags
from hilltop.streams import InboundFactory, dial_tcp

log = logging.getLogger(__name__)

NAME = "lan"
FIND_TIMEOUT = 120.0
"""Keep looking as long as the race itself may last (its overall timeout)."""


def _loopback_url(url: str | None) -> bool:
    if not url:
        return False
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Lan:
    """Built-in transport: LAN discovery of the peer's transit listener."""

    api = 1

    def __init__(self) -> None:
        self._run: _LanRun | None = None

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        return TransportInfo(
            name=NAME,
            hint_types=(),
            tier=0,
            description="find the peer's listener on the local network (mDNS), "
                        "even when its direct hints carry the wrong addresses",
        )

    @hookimpl
    def hilltop_transport_start(self, session: TransitSession) -> list[Any]:
        settings = session.settings.get(LanSettings) or LanSettings()
        services = session.services
        tags, mailbox_url = settings.tags, settings.mailbox_url
        if services is not None:  # a transfer: the tags come from its derived keys
            tags = tags or LanTags.from_services(services, session.role)
            mailbox_url = mailbox_url or services.mailbox_url
        if (session.tor or session.no_listen or tags is None
                or _loopback_url(mailbox_url)):
            return []
        from hilltop.lan.service import lan_interfaces

        try:
            interfaces = lan_interfaces(settings.interface)
        except HilltopError as err:
            log.debug("lan transport idle: %s", err)
            return []
        self._run = _LanRun(session, tags, interfaces)
        self._run.start()
        return []  # nothing for the mailbox: the peer finds us by mDNS

    @hookimpl
    def hilltop_transport_connect(self, hint: Any) -> Any:
        return None  # we contribute no hints, so none are ours to dial

    @hookimpl
    def hilltop_transport_stop(self) -> defer.Deferred[Any] | None:
        run, self._run = self._run, None
        return run.stop() if run is not None else None


class _LanRun:
    """One session: our listener and announcement, the search for the peer's, the dials."""

    def __init__(self, session: TransitSession, tags: LanTags, interfaces: Any) -> None:
        self.session = session
        self.interfaces = interfaces
        self.ours = tags.ours
        self.theirs = tags.theirs
        self.ports: list[Any] = []
        self.port = 0
        self.addresses: list[str] = []
        self.mdns: Any = None
        self.task: asyncio.Task[None] | None = None
        self.dials: list[defer.Deferred[Any]] = []
        self.stopped = False

    def start(self) -> None:
        self._listen()
        self.task = asyncio.ensure_future(self._discover())

    def _listen(self) -> None:
        factory = InboundFactory(NAME, self.session.offer_inbound)
        for address in self.interfaces.addresses:
            try:
                port = self.session.reactor.listenTCP(self.port, factory, interface=address)
            except CannotListenError as err:
                log.debug("lan: cannot listen on %s: %s", address, err)
                continue
            self.ports.append(port)
            self.port = port.getHost().port
            self.addresses.append(address)

    async def _discover(self) -> None:
        from hilltop.lan.service import Mdns, found_addresses

        try:
            self.mdns = Mdns(self.interfaces.zeroconf)
            if self.ports:
                await self.mdns.announce(wire.transit_service_name(self.ours), self.port,
                                         self.addresses, wire.transit_txt(), probe=False)
            info = await self.mdns.find(wire.transit_service_name(self.theirs),
                                        FIND_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - discovery is a bonus; never fail the race
            log.debug("lan discovery ended: %s", err)
            return
        for address in found_addresses(info):
            if self.stopped:
                return
            self._dial(address, info.port)

    def _dial(self, address: str, port: int) -> None:
        label = f"{NAME} {wire.mailbox_url(address, port, '')[5:]}"
        d = dial_tcp(self.session.reactor, address, port, label, timeout=10.0)
        self.dials.append(d)

        def connected(stream: Any) -> None:
            self.dials.remove(d)
            if self.stopped:
                stream.close()
            else:
                self.session.offer_inbound(stream)

        def failed(f: Any) -> None:
            if d in self.dials:
                self.dials.remove(d)
            log.debug("lan: dialling %s failed: %s", label, f.getErrorMessage())

        d.addCallbacks(connected, failed)

    def stop(self) -> defer.Deferred[Any]:
        """Stop listening, cancel dials, withdraw the announcement (mDNS goodbye)."""
        self.stopped = True
        for d in list(self.dials):
            d.cancel()
        ports, self.ports = self.ports, []
        waits = [defer.maybeDeferred(p.stopListening) for p in ports]
        if self.task is not None and not self.task.done():
            self.task.cancel()
        waits.append(defer.Deferred.fromFuture(asyncio.ensure_future(self._close())))
        return defer.gatherResults(waits, consumeErrors=True)

    async def _close(self) -> None:
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        if self.mdns is not None:
            with contextlib.suppress(Exception):
                await self.mdns.close()
