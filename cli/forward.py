"""``wormhole forward``: forward TCP ports to the peer and back over a dilated wormhole,
speaking fowl's protocol (:mod:`hilltop.dilation.fowl`) so either side may be fowl.

``--service NAME:PORT`` says a server runs here on 127.0.0.1:PORT; the peer (which must
allow NAME with ``--client``, or fowl's ``--client``/``--local``) listens on a port of its own
and every connection there reaches our server. ``--client NAME[:PORT]`` allows the peer's
service NAME and listens for it on 127.0.0.1:PORT (any free port without one). Connections
ride Dilation subchannels, so they survive a reconnect of the L2 connection.
"""

from __future__ import annotations

from typing import Any

import click
from twisted.internet import defer
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint
from twisted.internet.protocol import Factory, Protocol

from hilltop import api
from hilltop.cli.common import GlobalOptions, run
from hilltop.cli.tor import start_tor, tor_chosen, tor_flags
from hilltop.cli.transitopts import app_versions, transit_flags, transit_options, watch_mailbox
from hilltop.dilation import fowl
from hilltop.errors import LocalError, ProtocolError


def say(text: str) -> None:
    click.echo(text)


class Splice(Protocol):
    """One end of a forwarded connection; ``other`` is the protocol at the other end."""

    other: Any = None
    queued: list[bytes]

    def __init__(self) -> None:
        self.queued = []

    def dataReceived(self, data: bytes) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.write(data)
        else:
            self.queued.append(data)

    def connectionLost(self, reason: Any = None) -> None:
        other, self.other = self.other, None
        if other is not None and other.transport is not None:
            other.other = None
            other.transport.loseConnection()

    def join(self, other: Splice) -> None:
        self.other, other.other = other, self
        # each end's transport paces the other's reading: a local reader that stops reading
        # pauses the subchannel, which pauses reading the L2 connection (and the other way
        # round, the peer's slow acks pause our local socket), so nothing buffers without end
        for consumer, producer in ((self, other), (other, self)):
            sink: Any = consumer.transport  # a TCP or subchannel transport: both are IConsumers
            if sink is not None and producer.transport is not None:
                sink.registerProducer(producer.transport, True)
        for side in (self, other):
            queued, side.queued = side.queued, []
            for data in queued:
                side.dataReceived(data)


class ServiceSide(Splice):
    """A ``fowl`` subchannel the peer opened toward a service of ours."""

    def __init__(self, services: dict[str, int], reactor: Any) -> None:
        super().__init__()
        self._services = services
        self._reactor = reactor
        self._reader: fowl.MessageReader | None = fowl.MessageReader()

    def dataReceived(self, data: bytes) -> None:
        if self._reader is None:
            super().dataReceived(data)
            return
        try:
            got = self._reader.feed(data)
        except ProtocolError as err:
            self._refuse(str(err))
            return
        if got is None:
            return
        self._reader = None
        message, rest = got
        if rest:
            self.queued.append(rest)
        name = message.get("unique-name")
        port = self._services.get(name) if isinstance(name, str) else None
        if port is None:
            self._refuse(f"no service named {name!r} here")
            return
        d = TCP4ClientEndpoint(self._reactor, "127.0.0.1", port).connect(
            Factory.forProtocol(Splice))
        d.addCallbacks(self._connected, lambda f: self._refuse(f.getErrorMessage()))

    def _connected(self, local: Splice) -> None:
        assert self.transport is not None
        self.transport.write(fowl.pack(fowl.connect_reply(True)))
        self.join(local)

    def _refuse(self, reason: str) -> None:
        say(f"refused a forwarded connection: {reason}")
        if self.transport is not None:
            self.transport.write(fowl.pack(fowl.connect_reply(False, reason)))
            self.transport.loseConnection()


class ClientSide(Splice):
    """Our ``fowl`` subchannel for one accepted local connection: name the service, wait for
    the peer's answer, then splice."""

    def __init__(self, name: str, local: Splice) -> None:
        super().__init__()
        self._name = name
        self._local = local
        self._reader: fowl.MessageReader | None = fowl.MessageReader()

    def connectionMade(self) -> None:
        assert self.transport is not None
        self.transport.write(fowl.pack(fowl.open_connection(self._name)))

    def dataReceived(self, data: bytes) -> None:
        if self._reader is None:
            super().dataReceived(data)
            return
        try:
            got = self._reader.feed(data)
        except ProtocolError:
            got = ({"connected": False}, b"")
        if got is None:
            return
        self._reader = None
        message, rest = got
        if not message.get("connected"):
            say(f"the peer refused a connection to {self._name}: "
                f"{message.get('reason', 'no reason given')}")
            self._local.transport.loseConnection()  # type: ignore[union-attr]
            assert self.transport is not None
            self.transport.loseConnection()
            return
        if rest:
            self.queued.append(rest)
        self.join(self._local)
        self._local.transport.resumeProducing()  # type: ignore[union-attr]


class LocalAccepted(Splice):
    """A TCP connection accepted on a ``--client`` port: opens a subchannel for it."""

    def connectionMade(self) -> None:
        f: Any = self.factory
        transport: Any = self.transport
        transport.pauseProducing()  # nothing goes to the peer before it says connected
        proto = ClientSide(f.name, self)
        d = f.dilated.connector_for(fowl.CONNECT).connect(Factory.forProtocol(lambda: proto))
        d.addErrback(lambda _f: transport.loseConnection())


class Commands(Protocol):
    """The peer's ``fowl-commands`` subchannel: it asks us to listen for its services."""

    def __init__(self, forwarder: Forwarder) -> None:
        self._fw = forwarder
        self._reader = fowl.MessageReader()

    def dataReceived(self, data: bytes) -> None:
        try:
            got = self._reader.feed(data)
        except ProtocolError as err:
            say(f"ignoring a bad command from the peer: {err}")
            return
        while got is not None:
            message, rest = got
            defer.ensureDeferred(self._fw.on_request(message, self.transport))
            self._reader = fowl.MessageReader()
            got = self._reader.feed(rest) if rest else None


class Forwarder:
    def __init__(self, reactor: Any, dilated: Any, services: dict[str, int],
                 clients: dict[str, int | None]) -> None:
        self.reactor = reactor
        self.dilated = dilated
        self.services = services
        self.clients = clients

    async def on_request(self, message: dict[str, Any], transport: Any) -> None:
        name = message.get("unique-name")
        if message.get("kind") != "request-listener" or not isinstance(name, str):
            return
        if name not in self.clients:
            transport.write(fowl.pack(fowl.listener_response(
                name, False, f"service {name!r} is not allowed here (use --client {name})")))
            return
        wanted = message.get("listen-port")
        port = self.clients[name]
        if isinstance(wanted, int) and port is not None and wanted != port:
            transport.write(fowl.pack(fowl.listener_response(
                name, False, f"the peer wants port {wanted}, we were told {port}")))
            return
        port = port or (wanted if isinstance(wanted, int) else 0)
        factory: Any = Factory.forProtocol(LocalAccepted)
        factory.name, factory.dilated = name, self.dilated
        try:
            listening = await TCP4ServerEndpoint(
                self.reactor, port, interface="127.0.0.1").listen(factory)
        except Exception as err:  # noqa: BLE001 - told to the peer and the user
            transport.write(fowl.pack(fowl.listener_response(name, False, str(err))))
            say(f"could not listen for {name}: {err}")
            return
        got = listening.getHost().port
        transport.write(fowl.pack(fowl.listener_response(name, True)))
        say(f"listening on 127.0.0.1:{got} for {name}")

    async def request(self, name: str) -> None:
        answer: defer.Deferred[dict[str, Any]] = defer.Deferred()

        class Ask(Protocol):
            def connectionMade(self) -> None:
                assert self.transport is not None
                self.transport.write(fowl.pack(fowl.request_listener(name)))
                self._reader = fowl.MessageReader()

            def dataReceived(self, data: bytes) -> None:
                got = self._reader.feed(data)
                if got is not None and not answer.called:
                    # kept open: fowl stops the listeners a commands subchannel asked for
                    # when that subchannel closes
                    answer.callback(got[0])

        await self.dilated.connector_for(fowl.COMMANDS).connect(Factory.forProtocol(Ask))
        reply = await answer
        if reply.get("listening"):
            say(f"the peer listens for {name} (to 127.0.0.1:{self.services[name]} here)")
        else:
            say(f"the peer refused {name}: {reply.get('reason', 'no reason given')}")


@click.command()
@click.argument("code", required=False)
@click.option("--service", "services", multiple=True, metavar="NAME:PORT",
              help="a server runs here on 127.0.0.1:PORT; the peer forwards a port to it")
@click.option("--client", "clients", multiple=True, metavar="NAME[:PORT]",
              help="allow the peer's service NAME and listen for it on 127.0.0.1:PORT "
                   "(any free port if none)")
@click.option("-c", "--code-length", default=2, show_default=True, metavar="NUMWORDS",
              type=click.IntRange(1, 32), help="number of words in the code")
@transit_flags
@tor_flags
@click.pass_context
def forward(ctx: click.Context, code: str | None, services: tuple[str, ...],
            clients: tuple[str, ...], code_length: int, listen: bool,
            transports: str | None, **_ignored: Any) -> None:
    """Forward TCP ports to the peer and back (fowl-compatible, over Dilation)."""
    opts: GlobalOptions = ctx.obj
    root = ctx.find_root()
    explicit = root.get_parameter_source("appid") not in (
        click.core.ParameterSource.DEFAULT, None)
    appid = opts.appid if explicit else fowl.APPID
    service_ports: dict[str, int] = {}
    for text in services:
        spec = fowl.parse_spec(text, port_required=True)
        assert spec.port is not None
        service_ports[spec.name] = spec.port
    client_ports = {s.name: s.port for s in (fowl.parse_spec(t, port_required=False)
                                              for t in clients)}
    if not service_ports and not client_ports:
        raise LocalError("nothing to forward: give --service NAME:PORT or --client NAME")
    options = transit_options(opts.transit_helpers, listen, transports)
    tor = tor_chosen()

    async def main(reactor: Any) -> int:
        manager, chosen = None, options
        extra_args: dict[str, Any] = {}
        if tor is not None:  # the mailbox and every L2 connection through Tor
            manager, chosen = await start_tor(reactor, tor, options)
            extra_args["endpoint_factory"] = manager.endpoint_factory
        # fowl's advertisement, and ours so that two hilltop peers may use webrtc (fowl and
        # official read only their own key)
        w = api.Wormhole(appid, opts.relay_url, reactor=reactor, dilation=True,
                         app_versions={**app_versions(chosen), **fowl.APP_VERSIONS},
                         **extra_args)
        try:
            return await forward_over(reactor, w, chosen)
        finally:
            if manager is not None:
                await manager.close()

    async def forward_over(reactor: Any, w: api.Wormhole, chosen: Any) -> int:
        watch_mailbox(w)
        if code:
            w.set_code(code)
        else:
            say(f"Wormhole code is: {await w.allocate_code(code_length)}")
        dilated = w.dilate(transit=chosen)
        fw = Forwarder(reactor, dilated, service_ports, client_ports)
        dilator = await dilated.dilator()
        dilator.on_status = lambda text: say(f"dilation: {text}")
        await dilated.listener_for(fowl.COMMANDS).listen(
            Factory.forProtocol(lambda: Commands(fw)))
        await dilated.listener_for(fowl.CONNECT).listen(
            Factory.forProtocol(lambda: ServiceSide(service_ports, reactor)))
        await dilated.when_dilated()
        say("connected to the peer")
        for name in service_ports:
            await fw.request(name)
        await w.when_closed()
        return 0

    run(main)
