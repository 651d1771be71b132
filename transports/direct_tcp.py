"""``direct-tcp``: listen (everywhere, or on chosen addresses); dial ``direct-tcp-v1`` hints.

Its one setting, :class:`DirectTCPSettings`, lives here with the transport, as a third-party
plugin's would: it needs no heavy import, and only LAN mode sets it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from twisted.internet import defer
from twisted.internet.error import CannotListenError

from hilltop._values import value
from hilltop.hints import direct_tcp_v1
from hilltop.hints._tcp import usable_address
from hilltop.hookspecs import TransitSession, TransportInfo, hookimpl
from hilltop.streams import InboundFactory, dial_tcp

log = logging.getLogger(__name__)

NAME = "direct-tcp"


@value
class DirectTCPSettings:
    """What ``direct-tcp`` reads from ``session.settings``.

    * ``listen_on``: listen on exactly these local addresses instead of every interface
      (LAN mode's ``--interface`` sets it, so no other network can reach the listener).
      ``TransitSession.local_addresses`` stays what is *advertised*, which may differ (tests
      and library users advertise addresses on purpose).
    """

    listen_on: tuple[str, ...] | None = None


def discover_addresses(adapters: Iterable[Any] | None = None) -> list[str]:
    """Every non-loopback, non-link-local IPv4 and IPv6 address of this machine.

    Link-local IPv6 is skipped because it needs a scope id the peer cannot know. Falls back to
    ``127.0.0.1`` only when nothing else exists, as the official client does.
    """
    if adapters is None:
        import ifaddr

        adapters = ifaddr.get_adapters()
    found: list[str] = []
    for adapter in adapters:
        for ip in adapter.ips:
            text = ip.ip[0] if isinstance(ip.ip, tuple) else ip.ip
            if usable_address(text) and text not in found:
                found.append(text)
    return found or ["127.0.0.1"]


class DirectTCP:
    """Built-in transport for ``direct-tcp-v1`` hints."""

    api = 1

    def __init__(self) -> None:
        self._ports: list[Any] = []

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        return TransportInfo(
            name=NAME,
            hint_types=(direct_tcp_v1.TYPE,),
            tier=0,
            description="listen on all interfaces and dial the peer's addresses directly",
        )

    @hookimpl
    def hilltop_transport_start(self, session: TransitSession) -> list[direct_tcp_v1.Hint]:
        if session.no_listen or session.tor:
            return []  # listening would reveal our address / the user said no
        factory = InboundFactory(NAME, session.offer_inbound)
        settings = session.settings.get(DirectTCPSettings) or DirectTCPSettings()
        chosen: list[str] | None = None
        if settings.listen_on is None:
            number = self._listen_everywhere(session.reactor, factory)
        else:  # LAN mode with --interface: only that interface's addresses
            number, chosen = self._listen_on(session.reactor, factory, settings.listen_on)
        if number is None:
            return []
        addresses = session.local_addresses
        if addresses is None:
            addresses = discover_addresses() if chosen is None else chosen
        return [direct_tcp_v1.Hint(a, number, 0.0) for a in addresses]

    def _listen_everywhere(self, reactor: Any, factory: InboundFactory) -> int | None:
        """Listen on ``::`` (dual-stack on most systems) and on ``0.0.0.0`` with the same port."""
        first = None
        try:
            first = reactor.listenTCP(0, factory, interface="::")
            self._ports.append(first)
        except CannotListenError:
            log.debug("no IPv6 listener", exc_info=True)
        try:
            number = first.getHost().port if first is not None else 0
            self._ports.append(reactor.listenTCP(number, factory, interface="0.0.0.0"))
        except CannotListenError:
            if first is None:
                log.warning("direct-tcp: cannot listen on any interface", exc_info=True)
            # otherwise the IPv6 socket is dual-stack and already holds the IPv4 port
        return self._ports[0].getHost().port if self._ports else None

    def _listen_on(self, reactor: Any, factory: InboundFactory,
                   addresses: Iterable[str]) -> tuple[int | None, list[str]]:
        """Listen on exactly these addresses, sharing one port; returns it and where it worked."""
        number: int | None = None
        bound: list[str] = []
        for address in addresses:
            try:
                port = reactor.listenTCP(number or 0, factory, interface=address)
            except CannotListenError:
                log.warning("direct-tcp: cannot listen on %s", address, exc_info=True)
                continue
            self._ports.append(port)
            number = port.getHost().port
            bound.append(address)
        return number, bound

    @hookimpl
    def hilltop_transport_connect(self, hint: Any, session: TransitSession) -> Any:
        if hint.type != direct_tcp_v1.TYPE or session.tor:
            return None
        return dial_tcp(session.reactor, hint.hostname, hint.port, f"{NAME} {hint}")

    @hookimpl
    def hilltop_transport_stop(self) -> defer.Deferred[Any]:
        ports, self._ports = self._ports, []
        return defer.gatherResults([defer.maybeDeferred(p.stopListening) for p in ports])
