"""``tor``: an ephemeral onion service (``tor-tcp-v1`` hints) and dialling through Tor.

Under ``--tor`` (``TransitSession.tor``) the side that has a Tor control connection listens on
127.0.0.1 behind an ephemeral v3 onion service (``ADD_ONION ... Flags=DiscardPK``: the key never
leaves Tor, let alone reaches a disk) and offers it as a ``tor-tcp-v1`` hint; the service is
removed when the session stops. It dials the peer's ``tor-tcp-v1`` hints and, as fallbacks, the
peer's ``direct-tcp-v1`` hints with public addresses (both through Tor's SOCKS port).
:class:`TorRelay` dials ``relay-v1`` hints through Tor (``relay=True``, so the runner writes the
relay line first). Without ``--tor`` both decline everything.

Tor is found by a :class:`hilltop.tor.manager.TorManager`, shared through
:class:`hilltop.tor.settings.TorTransitSettings` in ``session.settings`` (the CLI shares its
manager with the mailbox connection); without one the transports make their own from the
settings' ``find`` and close it when the session stops.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import logging
from typing import Any

from twisted.internet import defer
from twisted.internet.protocol import Factory
from twisted.python.failure import Failure

from hilltop._values import value
from hilltop.hints import direct_tcp_v1, relay_v1, tor_tcp_v1
from hilltop.hookspecs import TransitSession, TransportInfo, hookimpl
from hilltop.streams import InboundFactory, TCPStream
from hilltop.tor.settings import TorTransitSettings

log = logging.getLogger(__name__)

NAME = "tor"
RELAY_NAME = "tor-relay"


def _txtorcon_missing() -> str:
    # find_spec, not import: every transfer asks, and importing txtorcon costs ~40 ms of CPU
    # in each process that never uses Tor
    if importlib.util.find_spec("txtorcon") is None:
        return "txtorcon is not installed (pip install txtorcon)"
    return ""


def public_address(host: str) -> bool:
    """A direct hint worth dialling through Tor: a public IP literal (never a name or LAN)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_global


class _Sessions:
    """Per-session state: the manager, and whether we made it (then we close it)."""

    def __init__(self) -> None:
        self.managers: dict[int, tuple[Any, bool]] = {}

    def manager(self, session: TransitSession) -> Any:
        got = self.managers.get(id(session))
        if got is not None:
            return got[0]
        from hilltop.tor.manager import TorManager

        settings = session.settings.get(TorTransitSettings) or TorTransitSettings()
        manager = settings.manager
        owned = manager is None
        if manager is None:
            manager = TorManager(session.reactor, settings.find)
        self.managers[id(session)] = (manager, owned)
        return manager

    async def release(self, session: TransitSession) -> None:
        got = self.managers.pop(id(session), None)
        if got is not None and got[1]:
            await got[0].close()


def _dial(session: TransitSession, sessions: _Sessions, host: str, port: int,
          description: str) -> defer.Deferred[Any]:
    factory = Factory.forProtocol(lambda: TCPStream(description))
    return sessions.manager(session).when_ready_endpoint(host, port).connect(factory)


class _OnionInbound(TCPStream):
    def __init__(self, factory: _OnionInboundFactory) -> None:
        super().__init__(f"{factory.label} (inbound)")
        self._factory = factory

    def connectionMade(self) -> None:  # noqa: N802
        # the peer address is always Tor's own end on 127.0.0.1: only the onion says anything
        self.description = f"{self._factory.label} (inbound)"
        self._factory.on_stream(self)


class _OnionInboundFactory(InboundFactory):
    def buildProtocol(self, addr: Any) -> TCPStream:  # noqa: N802
        return _OnionInbound(self)


class Tor:
    """Built-in transport: onion service listener plus dials through Tor."""

    api = 1

    def __init__(self) -> None:
        self._sessions = _Sessions()
        self._services: dict[int, _Service] = {}  # by id(session)

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        why = _txtorcon_missing()
        return TransportInfo(
            name=NAME,
            hint_types=(tor_tcp_v1.TYPE, direct_tcp_v1.TYPE),
            tier=0,
            usable=not why,
            why_not=why,
            description="with --tor: an ephemeral onion service, and dials through Tor",
        )

    @hookimpl
    def hilltop_transport_start(self, session: TransitSession) -> Any:
        if not session.tor or session.no_listen:
            return []
        return defer.ensureDeferred(self._start(session))

    async def _start(self, session: TransitSession) -> list[tor_tcp_v1.Hint]:
        manager = self._sessions.manager(session)
        await manager.ready()
        if manager.socks_only:
            log.warning("tor: only a SOCKS port, so no onion service can be made; "
                        "the peer's onion service or the relay will carry the transfer")
            return []
        import txtorcon

        factory = _OnionInboundFactory(NAME, session.offer_inbound)
        port = session.reactor.listenTCP(0, factory, interface="127.0.0.1")
        local = port.getHost().port
        creating = defer.maybeDeferred(manager.tor.create_onion_service,
                                       ports=[(local, local)], private_key=txtorcon.DISCARD,
                                       version=3)
        # registered before we wait: whatever happens to this hook (a start timeout cancels
        # it), the stop hook finds the service and removes it, even once Tor finishes late
        self._services[id(session)] = _Service(port, creating)
        onion = await _wait_without_cancelling(creating)
        host = onion.hostname
        factory.label = f"{NAME} {host}:{local}"
        log.info("tor: onion service %s:%d is up", host, local)
        return [tor_tcp_v1.Hint(host, local, 0.0)]

    @hookimpl
    def hilltop_transport_connect(self, hint: Any, session: TransitSession) -> Any:
        if not session.tor:
            return None
        if hint.type == tor_tcp_v1.TYPE:
            pass
        elif hint.type == direct_tcp_v1.TYPE:
            if not public_address(hint.hostname):
                return None
        else:
            return None
        return _dial(session, self._sessions, hint.hostname, hint.port, f"{NAME} {hint}")

    @hookimpl
    def hilltop_transport_stop(self, session: TransitSession) -> Any:
        return defer.ensureDeferred(self._stop(session))

    async def _stop(self, session: TransitSession) -> None:
        service = self._services.pop(id(session), None)
        try:
            if service is not None:
                await defer.maybeDeferred(service.port.stopListening)
                await _remove_when_made(service.creating)
        finally:
            await self._sessions.release(session)


@value(frozen=False)
class _Service:
    """One session's onion service: the local listener and Tor's (maybe unfinished) making."""

    port: Any
    creating: defer.Deferred[Any]  # fires with the txtorcon onion once its descriptor is up


def _wait_without_cancelling(d: defer.Deferred[Any]) -> defer.Deferred[Any]:
    """A Deferred with ``d``'s result whose cancellation leaves ``d`` running.

    Cancelling txtorcon's ``create_onion_service`` after ``ADD_ONION`` was answered would lose
    the only handle on a service Tor keeps running; so a timed-out start abandons the wait and
    the stop hook removes the service when it arrives.
    """
    waiter: defer.Deferred[Any] = defer.Deferred()

    def settle(result: Any) -> Any:
        if not waiter.called:
            if isinstance(result, Failure):
                waiter.errback(result)
            else:
                waiter.callback(result)
        return result  # ``d`` keeps its result for the stop hook

    d.addBoth(settle)
    return waiter


def _remove_when_made(creating: defer.Deferred[Any]) -> defer.Deferred[None]:
    """Remove the onion service now, or as soon as Tor has made it; fires once asked (or
    at once if Tor is still making it: the removal then follows by itself)."""

    def remove(onion: Any) -> defer.Deferred[Any]:
        d = defer.maybeDeferred(onion.remove)
        d.addCallback(lambda _: log.info("tor: onion service %s removed", onion.hostname))
        return d

    creating.addCallback(remove)
    # a service that never came about needs no removal; a failed DEL_ONION leaves it to Tor,
    # which drops it with our control connection
    creating.addErrback(lambda f: log.debug("tor: onion service not removed: %s", f.value))
    if not creating.called:
        return defer.succeed(None)
    done: defer.Deferred[None] = defer.Deferred()
    creating.addBoth(lambda _: done.callback(None))
    return done


class TorRelay:
    """Built-in transport: ``relay-v1`` hints dialled through Tor (only under ``--tor``)."""

    api = 1

    def __init__(self) -> None:
        self._sessions = _Sessions()

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        why = _txtorcon_missing()
        return TransportInfo(
            name=RELAY_NAME,
            hint_types=(relay_v1.TYPE,),
            tier=1,
            start_delay=3.0,  # an onion service takes a few seconds to answer: give it them
            relay=True,
            usable=not why,
            why_not=why,
            description="with --tor: meet the peer at a transit relay, through Tor",
        )

    @hookimpl
    def hilltop_transport_connect(self, hint: Any, session: TransitSession) -> Any:
        if not session.tor or hint.type != relay_v1.TYPE or not hint.endpoints:
            return None
        ep = hint.endpoints[0]
        if not isinstance(ep, direct_tcp_v1.Hint):
            return None  # a WebSocket relay endpoint: only its TCP endpoints go through Tor
        if not ep.hostname.endswith(".onion") and not public_address(ep.hostname) \
                and _is_ip(ep.hostname):
            return None  # a private relay address is unreachable through Tor
        return _dial(session, self._sessions, ep.hostname, ep.port, f"{RELAY_NAME} {ep}")

    @hookimpl
    def hilltop_transport_stop(self, session: TransitSession) -> Any:
        return defer.ensureDeferred(self._sessions.release(session))


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
