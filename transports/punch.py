"""``tcp-punch``: TCP hole punching from the mailbox connection's port (``tcp-punch-v1`` hints).

What it does and why is in :mod:`hilltop.transit.punch`; this module only does the I/O: asks a
configured STUN server when the mailbox did not say our address, and dials the peer's punch
hint from our punch port, again while the peer's NAT still refuses us (a host with no NAT
answers a SYN nobody waits for with a reset; a NAT that drops it makes the kernel retry).
Nothing listens: the peer's simultaneous dial becomes the same connection as ours.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from twisted.internet import defer, error
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater

from hilltop._runtime.sharedport import SharedPortReactor
from hilltop.hints import tcp_punch_v1
from hilltop.hookspecs import TransitSession, TransportInfo, hookimpl
from hilltop.streams import TCPStream
from hilltop.transit import stun
from hilltop.transit.punch import (
    Endpoint,
    PunchSettings,
    advertised,
    may_punch,
    same_family,
    stun_endpoint,
)

log = logging.getLogger(__name__)

NAME = "tcp-punch"
PUNCH_WINDOW = 20.0
"""Seconds to keep re-dialling a peer whose host refuses us (its side has not dialled yet)."""
REDIAL_PAUSE = 0.25
STUN_TIMEOUT = 3.0


def _endpoint(reactor: Any, host: str, port: int, timeout: float, origin: Endpoint) -> Any:
    kind = TCP6ClientEndpoint if ":" in host else TCP4ClientEndpoint
    return kind(SharedPortReactor(reactor), host, port, timeout=timeout, bindAddress=origin)



def punch_settings(session: Any) -> PunchSettings:
    """Where the punch dials from and what it advertises, from the session's services: the
    mailbox connection's local address and what the server saw of it, or the STUN servers
    configured for WebRTC (one list of STUN servers for both, from ``--stun`` or
    ``[webrtc] stun``)."""
    from hilltop.webrtc.settings import WebRTCSettings

    services = session.services
    webrtc = session.settings.get(WebRTCSettings) or WebRTCSettings()
    stun = tuple(stun_endpoint(s.urls) for s in webrtc.ice_servers if s.urls.startswith("stun:"))
    return PunchSettings(public=services.seen_address, local=services.mailbox_local_address,
                         stun=stun)


class _StunQuery(Protocol):
    """One Binding request; fires ``result`` with the mapped address or None."""

    def __init__(self, result: defer.Deferred[Endpoint | None]) -> None:
        self._result = result
        self._tid = os.urandom(12)
        self._got = b""

    def connectionMade(self) -> None:  # noqa: N802 - Twisted's name
        self.transport.write(stun.binding_request(self._tid))  # type: ignore[union-attr]

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self._got += data
        size = stun.message_length(self._got)
        if size is None or len(self._got) < size:
            if len(self._got) > stun.MAX_MESSAGE:
                self._finish(None)
            return
        self._finish(stun.mapped_address(self._got[:size], self._tid))

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self._finish(None)

    def _finish(self, found: Endpoint | None) -> None:
        if not self._result.called:
            self._result.callback(found)
        if self.transport is not None:
            self.transport.loseConnection()


async def ask_stun(reactor: Any, server: Endpoint, origin: Endpoint) -> Endpoint | None:
    """Our public address as ``server`` sees a TCP connection from ``origin``."""
    result: defer.Deferred[Endpoint | None] = defer.Deferred()
    endpoint = _endpoint(reactor, server[0], server[1], STUN_TIMEOUT, origin)
    try:
        protocol = await endpoint.connect(Factory.forProtocol(lambda: _StunQuery(result)))
    except Exception as err:  # noqa: BLE001 - any failure only costs the punch
        log.info("STUN server %s:%s: %s", server[0], server[1], err)
        return None
    result.addTimeout(STUN_TIMEOUT, reactor, onTimeoutCancel=lambda *_: None)
    found = await result
    protocol.transport.loseConnection()
    return found


async def punch_dial(reactor: Any, hint: tcp_punch_v1.Hint, origin: Endpoint,
                     window: float) -> TCPStream:
    """Dial ``hint`` from ``origin`` until it connects or ``window`` seconds passed, again
    after each refusal (the peer's host refuses us until its own dial opened its NAT). Also
    the Dilation takeover's punch probe (:mod:`hilltop.dilation.punchover`)."""
    description = f"{NAME} {hint}"
    factory = Factory.forProtocol(lambda: TCPStream(description))
    give_up = reactor.seconds() + window
    while True:
        left = give_up - reactor.seconds()
        endpoint = _endpoint(reactor, hint.hostname, hint.port, max(left, 1.0), origin)
        try:
            stream: TCPStream = await endpoint.connect(factory)
            return stream
        except error.ConnectionRefusedError:
            if reactor.seconds() + REDIAL_PAUSE >= give_up:
                raise
        await deferLater(reactor, REDIAL_PAUSE)


class TcpPunch:
    """Built-in transport for ``tcp-punch-v1`` hints."""

    api = 1

    def __init__(self) -> None:
        self._origin: Endpoint | None = None

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        return TransportInfo(
            name=NAME,
            hint_types=(tcp_punch_v1.TYPE,),
            tier=0,
            inbound=False,
            description="TCP hole punching: both sides dial each other's public address "
                        "(told by the mailbox server, or a configured STUN server)",
            tor_note="off under --tor",
        )

    @hookimpl
    def hilltop_transport_start(self, session: TransitSession
                                ) -> defer.Deferred[list[tcp_punch_v1.Hint]]:
        return defer.ensureDeferred(self._start(session))

    async def _start(self, session: TransitSession) -> list[tcp_punch_v1.Hint]:
        settings = session.settings.get(PunchSettings)
        if settings is None and session.services is not None:
            settings = punch_settings(session)
        self._origin = None
        if settings is None or settings.local is None:
            return []
        if not may_punch(session.no_listen, session.tor):
            return []
        public = advertised(settings.public)
        for server in settings.stun if public is None else ():
            public = advertised(await ask_stun(session.reactor, server, settings.local))
            if public is not None:
                break
        if public is None or not same_family(public[0], settings.local[0]):
            return []
        self._origin = settings.local
        return [tcp_punch_v1.Hint(public[0], public[1], 0.0)]

    @hookimpl
    def hilltop_transport_connect(self, hint: Any, session: TransitSession) -> Any:
        origin = self._origin
        if (hint.type != tcp_punch_v1.TYPE or origin is None
                or not may_punch(session.no_listen, session.tor)
                or not same_family(hint.hostname, origin[0])):
            return None  # we did not punch this session: the peer's hint cannot work alone
        return defer.ensureDeferred(self._punch(session.reactor, hint, origin))

    async def _punch(self, reactor: Any, hint: tcp_punch_v1.Hint, origin: Endpoint
                     ) -> TCPStream:
        return await punch_dial(reactor, hint, origin, PUNCH_WINDOW)

    @hookimpl
    def hilltop_transport_stop(self) -> None:
        self._origin = None
