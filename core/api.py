"""The public library facade: one ``Wormhole`` object per conversation with one peer.

Every method that waits returns a :class:`~hilltop._runtime.awaitable.DualDeferred`, so a Twisted
program adds callbacks (or awaits inside ``ensureDeferred``) and an asyncio program simply
``await``s, both on Twisted's asyncio reactor
(:func:`hilltop._runtime.reactor.install_asyncio_reactor`).
The protocol itself lives in :mod:`hilltop.rendezvous.mailbox`; this class only routes its events
to the
waiting callers.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hilltop import __version__
from hilltop._runtime.awaitable import DualDeferred, Queue, Watch
from hilltop.errors import HilltopError, LocalError, WormholeClosed
from hilltop.rendezvous import capabilities, key, mailbox
from hilltop.rendezvous.client import EndpointFactory, RendezvousClient, default_endpoint
from hilltop.rendezvous.messages import SeenAddress
from hilltop.transfer.offers import StreamOffer

if TYPE_CHECKING:  # a text message imports no transit code
    from typing import BinaryIO

    from twisted.internet.interfaces import IReactorTime

    from hilltop.dilation.shell import DilatedWormhole
    from hilltop.transfer.offers import DirectoryOffer, FileOffer, FilesOffer
    from hilltop.transfer.source import Source
    from hilltop.transit.options import TransitOptions

    Accept = Callable[[FileOffer | DirectoryOffer | StreamOffer | FilesOffer], bool]
    """Asked with the peer's offer; False refuses it."""

APPID = key.APPID
RELAY_URL = "ws://relay.magic-wormhole.io:4000/v1"
TRANSIT_HELPER = "tcp:transit.magic-wormhole.io:4001"
DILATION_FLUSH = 4.0
"""Seconds :meth:`Wormhole.close` lets Dilation's connection flush before the mailbox closes:
a margin above the Dilator's own deadlines (``STOP_ACK_WAIT`` and ``STOP_CLOSE_WAIT`` in
:mod:`hilltop.dilation.shell`, 3 s together), which end its stop first."""


class Wormhole:
    """A rendezvous with one peer: code, key, verifier, encrypted messages, close.

    ``timeouts``: how long the mailbox server may take to answer (default 30 s, 10 s for the
    goodbye). ``app_versions`` defaults to our capability advertisement; pass ``{}`` to look exactly
    like the official CLI. ``reactor`` defaults to the installed one; file transfers need the
    asyncio reactor (:func:`hilltop.install_asyncio_reactor`), which provides every interface
    hilltop uses, of which the mailbox itself needs only ``IReactorTime``.
    """

    def __init__(
        self,
        appid: str = APPID,
        relay_url: str = RELAY_URL,
        *,
        reactor: IReactorTime | None = None,
        app_versions: dict[str, Any] | None = None,
        random_bytes: Callable[[int], bytes] = os.urandom,
        endpoint_factory: EndpointFactory = default_endpoint,
        timeouts: mailbox.Timeouts | None = None,
        dilation: bool = False,
    ) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        if app_versions is None:
            app_versions = capabilities.default_advertisement(__version__)
        self.appid = appid
        self.app_versions = app_versions
        """What our ``version`` message carries (extensions are used only if listed here)."""
        self.relay_url = relay_url
        self._reactor = reactor
        self._engine = mailbox.Mailbox(
            appid,
            side=random_bytes(5).hex(),
            random_bytes=random_bytes,
            app_versions=app_versions,
            client_version=("hilltop", __version__),
            timeouts=timeouts or _timeouts_from_env(),
            version_extras=_dilation_version_fields() if dilation else None,
        )
        self._dilation_enabled = dilation
        self._dilator: Any = None
        self._dilate_inbox: list[bytes] = []
        self._peer_versions_full = Watch()
        self._code = Watch()
        self._consumed = Watch()
        self._verifier = Watch()
        self._versions = Watch()
        self._closed = Watch()
        self._welcome = Watch()
        self._reconnect_watchers: list[Callable[[mailbox.Reconnecting], None]] = []
        self._close_error: HilltopError | None = None
        self._nameplates: Queue = Queue()
        self._messages: Queue = Queue()
        self._side: dict[str, Queue] = {}
        self._client = RendezvousClient(
            reactor, relay_url, self._engine, self._on_event, endpoint_factory
        )
        self._client.start()

    # --- code ----------------------------------------------------------------------------
    def allocate_code(self, length: int = 2) -> DualDeferred[str]:
        """Ask the server for a nameplate and make a code with ``length`` random words."""
        self._input(lambda: self._engine.allocate(length))
        return self._code.when()

    def set_code(self, code: str) -> None:
        """Use a code the user typed or chose (``--code``). Raises CodeFormatError."""
        self._input(lambda: self._engine.set_code(code))

    def list_nameplates(self) -> DualDeferred[tuple[str, ...]]:
        """The nameplates in use now, for tab completion."""
        self._input(self._engine.list_nameplates)
        return self._nameplates.get()

    def claim_nameplate(self, nameplate: str) -> None:
        """Claim while the words are still being typed (completion does this)."""
        self._input(lambda: self._engine.claim_nameplate(nameplate))

    def get_code(self) -> DualDeferred[str]:
        return self._code.when()

    def when_code_consumed(self) -> DualDeferred[None]:
        """Fires once the peer came and the server freed the nameplate: the code is spent.

        Never fires if the wormhole closes first (then it fails as ``get_code`` would).
        """
        return self._consumed.when()

    def get_welcome(self) -> DualDeferred[mailbox.WelcomeEvent]:
        return self._welcome.when()

    @property
    def your_address(self) -> SeenAddress | None:
        """Where the mailbox server saw our current connection come from (server 0.8 and
        later; None before its welcome or from an older server)."""
        return self._engine.your_address

    @property
    def mailbox_local_address(self) -> tuple[str, int] | None:
        """The local (host, port) of the current mailbox connection, if a hole punch may
        dial from that port too (the default endpoint only; None through Tor)."""
        return self._client.local_address

    # --- key -----------------------------------------------------------------------------
    def get_verifier(self) -> DualDeferred[bytes]:
        """32 bytes both sides share once SPAKE2 finishes; compare them out of band."""
        return self._verifier.when()

    def get_peer_versions(self) -> DualDeferred[dict[str, Any]]:
        """The peer's ``app_versions``; fires once the key is confirmed."""
        return self._versions.when()

    def derive_key(self, purpose: str, length: int = 32) -> bytes:
        return key.derive_key(self._shared_key(), purpose.encode("utf-8"), length)

    def transit_key(self) -> bytes:
        """The key of this wormhole's transit connections: :func:`key.transit_key` with our
        appid (the file-transfer story derives it here, never by hand)."""
        return key.transit_key(self._shared_key(), self.appid)

    def _shared_key(self) -> bytes:
        if self._engine.shared_key is None:
            raise LocalError("no key yet: wait for get_verifier() first")
        return self._engine.shared_key

    # --- messages ------------------------------------------------------------------------
    def send_message(self, data: bytes) -> None:
        """Queue one encrypted message; it is sent once the peer's key is confirmed."""
        self._input(lambda: self._engine.send(data))

    def get_message(self) -> DualDeferred[bytes]:
        """The peer's next message, in order."""
        return self._messages.get()

    def side_messages(self, name: str) -> Queue:
        """Messages of the hilltop side channel ``name`` (JSON objects whose only key is
        ``hilltop-<name>``), kept out of :meth:`get_message`. Send them only to a peer that
        advertised the extension: official peers know nothing of side channels."""
        queue = self._side.get(name)
        if queue is None:
            queue = self._side[name] = Queue()
        return queue

    # --- Dilation ------------------------------------------------------------------------------
    def dilate(self, *, transit: TransitOptions | None = None,
               ping_interval: float = 30.0) -> DilatedWormhole:
        """A durable channel to the peer (official 0.24's Dilation); needs ``dilation=True``.

        Returns at once; subchannels opened through the result wait until the first L2
        connection is up, and every later one is re-established by itself. L2 connections race
        over the same transports as file transfers (``transit`` picks them and the relays).
        Fails (through ``when_dilated``) if the peer's ``version`` lacks ``can-dilate``.
        """
        from hilltop.dilation.shell import DilatedWormhole

        if not self._dilation_enabled:
            raise LocalError("create the Wormhole with dilation=True to dilate it")
        if self._dilator is not None or getattr(self, "_dilating", False):
            raise LocalError("a wormhole can be dilated only once")
        self._dilating = True
        return DilatedWormhole(_dual(self._start_dilation(transit, ping_interval)))

    def peer_can_dilate(self) -> DualDeferred[bool]:
        """Whether :meth:`dilate` can work: this Wormhole was made with ``dilation=True`` and
        the peer's ``version`` lists a Dilation version we share (fires once it came)."""

        async def check() -> bool:
            from hilltop.dilation.versions import VERSIONS, shared_version

            versions = await self._peer_versions_full.when()
            return self._dilation_enabled and shared_version(VERSIONS, versions) is not None

        result: DualDeferred[bool] = _dual(check())
        return result

    async def _start_dilation(self, transit: TransitOptions | None,
                              ping_interval: float) -> Any:
        from hilltop.dilation.punchover import punchover_for
        from hilltop.dilation.shell import Dilator, direct_prober, runner_factory
        from hilltop.dilation.versions import VERSIONS, shared_version
        from hilltop.transit.options import TransitOptions

        versions = await self._peer_versions_full.when()
        version = shared_version(VERSIONS, versions)
        if version is None:
            raise LocalError("the peer cannot dilate (its version message has no can-dilate "
                             "we share; official peers need dilation=True)")
        options = transit or TransitOptions()
        dilator = Dilator(self._reactor, lambda data: self._input(
            lambda: self._engine.send_dilate(data)), self._shared_key(), version,
            runner_factory(self._reactor, self, options),
            ping_interval=ping_interval, prober=direct_prober(self._reactor, options),
            punchover=punchover_for(self._reactor, self, options, await self._versions.when()))
        self._dilator = dilator
        inbox, self._dilate_inbox = self._dilate_inbox, []
        for data in inbox:
            dilator.got_message(data)
        return dilator

    # --- files and streams (transit) --------------------------------------------------------
    def send_file(self, path: str, *, transit: TransitOptions | None = None,
                  progress: Callable[[int], None] | None = None) -> DualDeferred[str | None]:
        """Offer a file or directory and stream it once the peer accepts.

        Fires with the SHA-256 hex both sides agreed on, or None between two hilltop peers,
        which skip it (their records already authenticate every byte). ``transit`` is a
        :class:`hilltop.TransitOptions` (relay helper, transports, no-listen).
        """
        from hilltop.transfer.source import open_source

        async def go() -> str | None:
            source = open_source(path)
            with source:
                return await self._send_source(source, transit, progress)

        return _dual(go())

    def send_files(self, paths: list[str], *, transit: TransitOptions | None = None,
                   progress: Callable[[int], None] | None = None) -> DualDeferred[str | None]:
        """Offer several files and folders under one code (result as for :meth:`send_file`).

        A hilltop peer listing ``files-v1`` gets them as they are (each under its own name);
        any other peer gets one folder (a zip) holding them, named after their common parent
        folder (``wormhole-N-items`` if none). Two paths with one name are refused.
        """
        from hilltop.transfer.manysource import open_bundle

        async def go() -> str | None:
            bundle = open_bundle(list(paths))
            peer = capabilities.from_app_versions(await self.get_peer_versions())
            ours = capabilities.from_app_versions(self.app_versions).features
            with bundle.source_for(ours, peer) as source:
                return await self._send_source(source, transit, progress)

        return _dual(go())

    def send_stream(self, fileobj: BinaryIO, name: str, size: int, *,
                    transit: TransitOptions | None = None,
                    progress: Callable[[int], None] | None = None) -> DualDeferred[str | None]:
        """Offer ``size`` bytes read from ``fileobj`` as a file called ``name`` (result as for
        :meth:`send_file`)."""
        from hilltop.transfer.offers import FileOffer
        from hilltop.transfer.source import FileSource

        source = FileSource(FileOffer(name, size), name, fileobj)
        return _dual(self._send_source(source, transit, progress))

    async def _send_source(self, source: Source, transit: TransitOptions | None,
                           progress: Callable[[int], None] | None) -> str | None:
        from hilltop.transfer import session
        from hilltop.transit.options import TransitOptions

        await self.get_peer_versions()
        result: str | None = await session.send(
            self._reactor, self, source, transit or TransitOptions(),
            listener=session.Listener(progress=progress or (lambda _n: None)))
        return result

    def receive_file(self, directory: str, *, accept: Accept = lambda _o: True,
                     transit: TransitOptions | None = None,
                     progress: Callable[[int], None] | None = None) -> DualDeferred[str]:
        """Wait for a file or directory offer and save it inside ``directory``.

        ``accept(offer)`` may refuse it. Fires with the saved path (several files, a
        ``FilesOffer``: ``directory``, each first-level item inside under its own name). The
        same safety rules as the CLI apply: no overwriting, no names outside ``directory``,
        free space checked.
        """
        from hilltop.transfer import session

        choices = session.ReceiveChoices(directory)

        async def go() -> str:
            prepared = await self._receive(choices, accept, transit, progress)
            assert prepared.where is not None
            return prepared.where

        return _dual(go())

    def receive_stream(self, fileobj: BinaryIO, *, accept: Accept = lambda _o: True,
                       transit: TransitOptions | None = None,
                       progress: Callable[[int], None] | None = None
                       ) -> DualDeferred[str | None]:
        """Write an offered *file*'s bytes to ``fileobj``; fires with their SHA-256 (None from
        a hilltop sender, as for :meth:`send_file`)."""
        from hilltop.transfer import session
        from hilltop.transfer.filesink import StreamSink

        choices = session.ReceiveChoices("", output="-", to_stdout=True,
                                         single_stream_only=True)

        async def go() -> str | None:
            prepared = await self._receive(choices, accept, transit, progress,
                                           stdout_sink=lambda size: StreamSink(fileobj, size))
            result = prepared.result
            return result.sha256 if isinstance(result, session.Trailer) else result

        return _dual(go())

    async def _receive(self, choices: Any, accept: Accept, transit: TransitOptions | None,
                       progress: Callable[[int], None] | None,
                       stdout_sink: Callable[[int], Any] | None = None) -> Any:
        """The offer, checked by the session's rules and ``accept``, received."""
        from hilltop.transfer import session
        from hilltop.transit.options import TransitOptions

        await self.get_peer_versions()
        incoming = await session.receive_offer(self._reactor, self)
        offer = incoming.offer
        if isinstance(offer, session.TextOffer) or not accept(offer):
            incoming.reject(LocalError("the offer was refused"))
            raise LocalError("the offer was refused")
        try:
            prepared = session.prepare(offer, choices, stdout_sink=stdout_sink)
            sink = prepared.open_sink()
        except HilltopError as err:
            incoming.reject(err)
            raise
        prepared.result = await incoming.receive(
            sink, transit or TransitOptions(),
            listener=session.Listener(progress=progress or (lambda _n: None)))
        return prepared

    # --- close ---------------------------------------------------------------------------
    def close(self, mood: str | None = None) -> DualDeferred[str]:
        """Close and wait until the server confirmed. Fires with the mood, or fails with
        the error that ended the wormhole (e.g. WrongCodeError)."""
        if self._dilator is not None:
            return _dual(self._close_dilated(mood))
        self._input(lambda: self._engine.close(mood))
        return self._closed.when()

    async def _close_dilated(self, mood: str | None) -> str:
        """Stop Dilation first (a connection lost now must not try to reconnect through a
        mailbox that is closing) and let its L2 connection flush, at most
        :data:`DILATION_FLUSH` seconds: a transfer that gave up sent the peer its
        subchannel's CLOSE, and the peer then ends at once instead of after its grace."""
        stopping = self._dilator.stop()
        stopping.addTimeout(DILATION_FLUSH, self._reactor)
        with contextlib.suppress(Exception):
            await stopping
        self._input(lambda: self._engine.close(mood))
        result: str = await self._closed.when()
        return result

    def when_closed(self) -> DualDeferred[str]:
        return self._closed.when()

    # --- the connection to the mailbox server --------------------------------------------
    def on_reconnecting(self, watcher: Callable[[mailbox.Reconnecting], None]) -> None:
        """Call ``watcher`` each time the connection to the mailbox server is lost and a
        new attempt is scheduled (when, and when the wormhole will give up)."""
        self._reconnect_watchers.append(watcher)

    def give_up_reconnecting_after(self, seconds: float) -> None:
        """How long the mailbox server may stay lost before the wormhole fails
        (:attr:`hilltop.rendezvous.mailbox.Timeouts.reconnect`, 120 s by default)."""
        from dataclasses import replace

        self._engine.timeouts = replace(self._engine.timeouts, reconnect=seconds)
        self._client.poke()

    # --- internals -----------------------------------------------------------------------
    def _input(self, action: Callable[[], None]) -> None:
        if self._closed.done:
            raise self._close_error or WormholeClosed()  # what ended it, if it failed
        action()
        self._client.poke()

    def _on_event(self, event: mailbox.Event) -> None:
        match event:
            case mailbox.WelcomeEvent():
                self._welcome.fire(event)
            case mailbox.NameplatesEvent(nameplates):
                self._nameplates.put(nameplates)
            case mailbox.CodeReady(code):
                self._code.fire(code)
            case mailbox.CodeConsumed():
                self._consumed.fire(None)
            case mailbox.KeyEstablished(verifier):
                self._verifier.fire(verifier)
            case mailbox.PeerVersions(app_versions, versions):
                self._versions.fire(app_versions)
                self._peer_versions_full.fire(versions)
            case mailbox.DilateReceived(data):
                if self._dilator is None:
                    self._dilate_inbox.append(data)
                else:
                    self._dilator.got_message(data)
            case mailbox.Received(data):
                name = _side_channel(data)
                if name is None:
                    self._messages.put(data)
                else:
                    self.side_messages(name).put(data)
            case mailbox.Refused(error):
                self._messages.fail(error)  # the reader answers the peer with error.reply
            case mailbox.Reconnecting():
                for watcher in self._reconnect_watchers:
                    watcher(event)
            case mailbox.ClosedEvent(mood, error):
                self._on_closed(mood, error)

    def _on_closed(self, mood: str, error: HilltopError | None) -> None:
        self._close_error = error
        failure: BaseException = error if error is not None else WormholeClosed()
        if self._dilator is not None:
            self._dilator.stop()
        for watch in (self._code, self._consumed, self._verifier, self._versions,
                      self._welcome, self._peer_versions_full):
            watch.fail(failure)
        self._nameplates.fail(failure)
        self._messages.fail(failure)
        for queue in self._side.values():
            queue.fail(failure)
        if error is not None:
            self._closed.fail(error)
        else:
            self._closed.fire(mood)


_SIDE_PREFIX = b'{"hilltop-'


def _side_channel(data: bytes) -> str | None:
    """The side channel a message belongs to, or None for an ordinary app message."""
    if not data.startswith(_SIDE_PREFIX):
        return None
    import json

    try:
        msg = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(msg, dict) or len(msg) != 1:
        return None
    (key,) = msg
    return key[len("hilltop-"):] or None


TIMEOUT_SCALE_ENV = "HILLTOP_MAILBOX_TIMEOUT_SCALE"
"""Multiplies the mailbox server's answer timeouts (:class:`hilltop.rendezvous.mailbox.Timeouts`):
integration tests of a silent server wait 0.1 of them instead of 30 s."""


def _dilation_version_fields() -> dict[str, Any]:
    """What a Wormhole made with ``dilation=True`` adds to its ``version`` message; imported
    here so that a transfer without Dilation never loads :mod:`hilltop.dilation` (issue 31)."""
    from hilltop.dilation.versions import version_fields

    return version_fields()


def _timeouts_from_env() -> mailbox.Timeouts:
    try:
        scale = float(os.environ.get(TIMEOUT_SCALE_ENV, "1"))
    except ValueError:
        scale = 1.0
    return mailbox.Timeouts().scaled(scale if scale > 0 else 1.0)


def _dual(coro: Any) -> DualDeferred[Any]:
    """Run a coroutine as a Deferred that asyncio code can await too."""
    from twisted.internet.defer import ensureDeferred

    d: DualDeferred[Any] = DualDeferred()
    ensureDeferred(coro).chainDeferred(d)
    return d
