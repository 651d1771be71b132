"""Finding Tor and talking through it: one :class:`TorManager` per ``--tor`` run.

The manager is shared by the mailbox connection (its :meth:`TorManager.endpoint_factory` is the
``endpoint_factory`` of :class:`hilltop.api.Wormhole`) and by the ``tor`` transport plugin
(handed over in :class:`hilltop.tor.settings.TorTransitSettings`), so one control connection
serves both.

Tor is found the way the official client finds it: ``--launch-tor`` starts a private tor;
``--tor-control-port ENDPOINT`` connects to that control port; otherwise the usual control ports
(9051, 9151) are tried; failing that we use a SOCKS port only (``--tor-socks HOST:PORT``, or
9050 / 9150). With SOCKS only, no onion service can be made: we can still dial the peer's onion
service or a transit relay through Tor.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from typing import Any, cast

from twisted.internet import defer, endpoints, task
from twisted.internet.error import ConnectError
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.python.failure import Failure
from zope.interface import implementer

from hilltop.errors import LocalError
from hilltop.tor.settings import TorSettings, parse_socks

log = logging.getLogger(__name__)

DEFAULT_CONTROL_PORTS = ("tcp:127.0.0.1:9051", "tcp:127.0.0.1:9151")
DEFAULT_SOCKS_PORTS = (("127.0.0.1", 9050), ("127.0.0.1", 9150))
LAUNCH_CONTROL_WAIT = 30.0  # seconds a launched tor may take to open its control socket


class TorManager:
    """One way into Tor: a control connection (``tor``) and/or a SOCKS port (``socks``)."""

    def __init__(self, reactor: Any, settings: TorSettings | None = None) -> None:
        self.reactor = reactor
        self.settings = settings or TorSettings()
        self.tor: Any = None  # txtorcon.Tor when we have a control connection
        self.socks: tuple[str, int] | None = None
        self.control_endpoint: str | None = None
        self._outcome: Any = None
        self._finding = False
        self._waiting: list[defer.Deferred[None]] = []
        self._closed = False
        self._control_dir: str | None = None  # --launch-tor: holds our tor's control socket

    @property
    def socks_only(self) -> bool:
        return self.tor is None

    def ready(self) -> defer.Deferred[None]:
        """Fires once Tor is found (idempotent); fails with :class:`LocalError` if it is not."""
        if self._outcome is None and not self._finding:
            self._finding = True
            d = defer.ensureDeferred(self._find())
            d.addBoth(self._found)
        if self._outcome is not None:
            if isinstance(self._outcome, Failure):
                return defer.fail(self._outcome)
            return defer.succeed(None)
        waiter: defer.Deferred[None] = defer.Deferred()
        self._waiting.append(waiter)
        return waiter

    def _found(self, result: Any) -> None:
        self._outcome = result if isinstance(result, Failure) else True
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            if isinstance(result, Failure):
                d.errback(result)
            else:
                d.callback(None)

    async def _find(self) -> None:
        s = self.settings
        if s.socks:
            self.socks = parse_socks(s.socks)
            log.info("tor: SOCKS only at %s:%d", *self.socks)
            return
        if s.launch:
            self.tor = await self._launch()
            self.control_endpoint = "launched"
        elif s.control_port:
            self.tor = await self._connect_control(s.control_port)
            if self.tor is None:
                raise LocalError(f"cannot connect to the Tor control port {s.control_port}")
        else:
            for ep in DEFAULT_CONTROL_PORTS:
                self.tor = await self._connect_control(ep)
                if self.tor is not None:
                    break
        if self.tor is not None:
            self.socks = await self._socks_of(self.tor)
            return
        for host, port in DEFAULT_SOCKS_PORTS:
            if await self._probe(host, port):
                self.socks = (host, port)
                return
        raise LocalError("Tor is not running: no control port (9051, 9151) and no SOCKS port "
                         "(9050, 9150) answers; use --launch-tor, --tor-control-port or "
                         "--tor-socks")

    async def _launch(self) -> Any:
        """Start a tor of our own (``--launch-tor``) and connect to its control socket.

        txtorcon connects once, as soon as tor *prints* "Opening Control listener", which can
        come before the socket exists; a refused first try then leaves the launch waiting
        forever (seen on a loaded machine). So we name the socket ourselves, in a private
        directory, and give txtorcon a connector that retries for a while.
        """
        import txtorcon

        self._control_dir = tempfile.mkdtemp(prefix="hilltop-tor-")  # mode 0700, as tor wants
        path = os.path.join(self._control_dir, "control.socket")
        try:
            return await txtorcon.launch(self.reactor, progress_updates=None,
                                         control_port=f"unix:{path}",
                                         connection_creator=lambda: defer.ensureDeferred(
                                             connect_retrying(
                                                 self.reactor,
                                                 endpoints.UNIXClientEndpoint(self.reactor,
                                                                              path),
                                                 txtorcon.TorProtocolFactory())))
        except BaseException:
            shutil.rmtree(self._control_dir, ignore_errors=True)
            self._control_dir = None
            raise

    async def _connect_control(self, description: str) -> Any:
        import txtorcon

        try:
            ep = endpoints.clientFromString(self.reactor, description)
        except Exception as exc:
            raise LocalError(f"bad Tor control endpoint {description!r}: {exc}") from None
        try:
            tor = await txtorcon.connect(self.reactor, ep)
        except Exception as exc:
            log.debug("tor control port %s: %s", description, exc)
            return None
        self.control_endpoint = description
        return tor

    async def _socks_of(self, tor: Any) -> tuple[str, int]:
        info = await tor.protocol.get_info("net/listeners/socks")
        text = str(info.get("net/listeners/socks", "")).split()
        for item in text:
            item = item.strip('"')
            if item.startswith("unix:"):
                continue
            host, _, port = item.rpartition(":")
            if port.isdigit():
                return host.strip("[]"), int(port)
        raise LocalError("the Tor we are connected to has no SOCKS port")

    async def _probe(self, host: str, port: int) -> bool:
        from twisted.internet.protocol import Factory, Protocol

        ep = endpoints.TCP4ClientEndpoint(self.reactor, host, port, timeout=2)
        try:
            proto = await ep.connect(Factory.forProtocol(Protocol))
        except Exception:
            return False
        connected = cast(Protocol, proto)  # Factory.forProtocol(Protocol) built exactly that
        if connected.transport is not None:
            connected.transport.loseConnection()
        return True

    # -- dialling ----------------------------------------------------------------------------
    def client_endpoint(self, host: str, port: int) -> Any:
        """An endpoint reaching ``host:port`` through Tor's SOCKS port (call after ready)."""
        import txtorcon

        assert self.socks is not None
        socks = endpoints.TCP4ClientEndpoint(self.reactor, self.socks[0], self.socks[1],
                                             timeout=30)
        return txtorcon.TorClientEndpoint(host, port, socks_endpoint=socks,
                                          reactor=self.reactor)

    def when_ready_endpoint(self, host: str, port: int) -> IStreamClientEndpoint:
        """An endpoint reaching ``host:port`` through Tor once it is found (callable before
        :meth:`ready` fires; cancelling a connect cancels the wait too)."""
        return _LazyTorEndpoint(self, host, port)

    def endpoint_factory(self, reactor: Any, host: str, port: int,
                         tls: bool) -> IStreamClientEndpoint:
        """For :class:`hilltop.api.Wormhole`: the mailbox WebSocket through Tor."""
        ep: Any = self.when_ready_endpoint(host, port)
        if tls:
            from hilltop._runtime.lazytls import wrap_client_tls

            return wrap_client_tls(host, ep)
        return ep

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        tor, self.tor = self.tor, None
        try:
            if tor is None:
                return
            if self.settings.launch:
                await tor.quit()
            else:
                tor.protocol.transport.loseConnection()
        except Exception:
            log.debug("closing tor", exc_info=True)
        finally:
            if self._control_dir is not None:
                shutil.rmtree(self._control_dir, ignore_errors=True)


async def connect_retrying(reactor: Any, endpoint: Any, factory: Any,
                           wait: float = LAUNCH_CONTROL_WAIT) -> Any:
    """``endpoint.connect(factory)``, tried again every 0.25 s while it is refused (or the
    socket file is missing) for up to ``wait`` seconds."""
    deadline = reactor.seconds() + wait
    while True:
        try:
            return await endpoint.connect(factory)
        except ConnectError:
            if reactor.seconds() > deadline:
                raise
            await task.deferLater(reactor, 0.25, lambda: None)


@implementer(IStreamClientEndpoint)
class _LazyTorEndpoint:
    """Waits for Tor to be found, then connects through its SOCKS port."""

    def __init__(self, manager: TorManager, host: str, port: int) -> None:
        self._m = manager
        self._host = host
        self._port = port

    def connect(self, factory: Any) -> defer.Deferred[Any]:
        inner: list[defer.Deferred[Any]] = []

        def cancel(d: defer.Deferred[Any]) -> None:
            for i in inner:
                i.cancel()

        result: defer.Deferred[Any] = defer.Deferred(cancel)

        def go(_: Any) -> None:
            if result.called:
                return
            d = self._m.client_endpoint(self._host, self._port).connect(factory)
            inner.append(d)
            d.chainDeferred(result)

        ready = self._m.ready()
        inner.append(ready)
        ready.addCallbacks(go, lambda f: None if result.called else result.errback(f))
        return result
