"""The public library facade: one ``Wormhole`` object per conversation with one peer.

Every method that waits returns a :class:`~hilltop.awaitable.DualDeferred`, so a Twisted
program adds callbacks (or awaits inside ``ensureDeferred``) and an asyncio program simply
``await``s, both on Twisted's asyncio reactor (:func:`hilltop.reactor.install_asyncio_reactor`).
The protocol itself lives in :mod:`hilltop.mailbox`; this class only routes its events to the
waiting callers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from hilltop import __version__, capabilities, key, mailbox
from hilltop.awaitable import DualDeferred, Queue, Watch
from hilltop.errors import HilltopError, LocalError
from hilltop.rendezvous import EndpointFactory, RendezvousClient, default_endpoint

APPID = key.APPID
RELAY_URL = "ws://relay.magic-wormhole.io:4000/v1"
TRANSIT_HELPER = "tcp:transit.magic-wormhole.io:4001"


class WormholeClosed(LocalError):
    """The wormhole was closed before the thing waited for arrived."""

    def __init__(self) -> None:
        super().__init__("the wormhole was closed")


class Wormhole:
    """A rendezvous with one peer: code, key, verifier, encrypted messages, close.

    ``app_versions`` defaults to our capability advertisement; pass ``{}`` to look exactly
    like the official CLI.
    """

    def __init__(
        self,
        appid: str = APPID,
        relay_url: str = RELAY_URL,
        *,
        reactor: Any = None,
        app_versions: dict[str, Any] | None = None,
        random_bytes: Callable[[int], bytes] = os.urandom,
        endpoint_factory: EndpointFactory = default_endpoint,
    ) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        if app_versions is None:
            app_versions = capabilities.advertisement(__version__, [], [])
        self.appid = appid
        self._engine = mailbox.Mailbox(
            appid,
            side=random_bytes(5).hex(),
            random_bytes=random_bytes,
            app_versions=app_versions,
            client_version=("hilltop", __version__),
        )
        self._code = Watch()
        self._verifier = Watch()
        self._versions = Watch()
        self._closed = Watch()
        self._welcome = Watch()
        self._nameplates: Queue = Queue()
        self._messages: Queue = Queue()
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

    def get_welcome(self) -> DualDeferred[mailbox.WelcomeEvent]:
        return self._welcome.when()

    # --- key -----------------------------------------------------------------------------
    def get_verifier(self) -> DualDeferred[bytes]:
        """32 bytes both sides share once SPAKE2 finishes; compare them out of band."""
        return self._verifier.when()

    def get_peer_versions(self) -> DualDeferred[dict[str, Any]]:
        """The peer's ``app_versions``; fires once the key is confirmed."""
        return self._versions.when()

    def derive_key(self, purpose: str, length: int = 32) -> bytes:
        if self._engine.shared_key is None:
            raise LocalError("no key yet: wait for get_verifier() first")
        return key.derive_key(self._engine.shared_key, purpose.encode("utf-8"), length)

    # --- messages ------------------------------------------------------------------------
    def send_message(self, data: bytes) -> None:
        """Queue one encrypted message; it is sent once the peer's key is confirmed."""
        self._input(lambda: self._engine.send(data))

    def get_message(self) -> DualDeferred[bytes]:
        """The peer's next message, in order."""
        return self._messages.get()

    # --- close ---------------------------------------------------------------------------
    def close(self, mood: str | None = None) -> DualDeferred[str]:
        """Close and wait until the server confirmed. Fires with the mood, or fails with
        the error that ended the wormhole (e.g. WrongCodeError)."""
        self._input(lambda: self._engine.close(mood))
        return self._closed.when()

    def when_closed(self) -> DualDeferred[str]:
        return self._closed.when()

    # --- internals -----------------------------------------------------------------------
    def _input(self, action: Callable[[], None]) -> None:
        if self._closed.done:
            raise WormholeClosed()
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
            case mailbox.KeyEstablished(verifier):
                self._verifier.fire(verifier)
            case mailbox.PeerVersions(app_versions):
                self._versions.fire(app_versions)
            case mailbox.Received(data):
                self._messages.put(data)
            case mailbox.ClosedEvent(mood, error):
                self._on_closed(mood, error)

    def _on_closed(self, mood: str, error: HilltopError | None) -> None:
        failure: BaseException = error if error is not None else WormholeClosed()
        for watch in (self._code, self._verifier, self._versions, self._welcome):
            watch.fail(failure)
        self._nameplates.fail(failure)
        self._messages.fail(failure)
        if error is not None:
            self._closed.fail(error)
        else:
            self._closed.fire(mood)
