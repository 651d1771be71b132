"""The signalling channel of the ``webrtc`` transport: what it needs, and the mailbox one.

The transport only needs :class:`Signalling` (three methods), so its tests run two peers over
an in-memory pair of queues; the transfer hands it a :class:`MailboxSignalling` over the
:class:`hilltop.api.Wormhole`, whose encrypted side channel carries the messages of
:mod:`hilltop.webrtc.signals`.
"""

from __future__ import annotations

from typing import Any, Protocol

from hilltop.errors import HilltopError
from hilltop.rendezvous import capabilities
from hilltop.webrtc.signals import CHANNEL, Signal, decode, encode


class Signalling(Protocol):
    """Where the ``webrtc`` transport sends its offer/answer and reads the peer's."""

    async def both_speak_webrtc(self) -> bool:
        """Whether we and the peer both advertised the ``webrtc`` transport."""
        ...

    def send(self, kind: str, sdp: str = "", wide: bool = False) -> None: ...

    async def receive(self) -> Signal: ...


class MailboxSignalling:
    """Signalling through one :class:`hilltop.api.Wormhole`, for one transit session."""

    def __init__(self, w: Any) -> None:
        self._w = w
        self._peer_ok: bool | None = None

    async def both_speak_webrtc(self) -> bool:
        """Whether we and the peer both advertised the ``webrtc`` transport."""
        if self._peer_ok is None:
            ours = capabilities.from_app_versions(getattr(self._w, "app_versions", {}))
            theirs = capabilities.from_app_versions(await self._w.get_peer_versions())
            self._peer_ok = (capabilities.WEBRTC in ours.transports
                             and capabilities.WEBRTC in theirs.transports)
        return self._peer_ok

    def send(self, kind: str, sdp: str = "", wide: bool = False) -> None:
        if not self._peer_ok:
            raise HilltopError("webrtc signalling to a peer that did not advertise webrtc")
        self._w.send_message(encode(kind, sdp, wide))

    async def receive(self) -> Signal:
        return decode(await self._w.side_messages(CHANNEL).get())


class ServicesSignalling:
    """Signalling through the session's side channel (:class:`hilltop.hookspecs.SessionServices`),
    the service every transport gets; :class:`MailboxSignalling` is the same over a
    wormhole given by hand."""

    def __init__(self, services: Any) -> None:
        self._services = services
        self._channel = services.side_channel(CHANNEL)
        self._peer_ok: bool | None = None

    async def both_speak_webrtc(self) -> bool:
        if self._peer_ok is None:
            self._peer_ok = bool(await self._services.peer_uses(capabilities.WEBRTC))
        return self._peer_ok

    def send(self, kind: str, sdp: str = "", wide: bool = False) -> None:
        if not self._peer_ok:
            raise HilltopError("webrtc signalling to a peer that did not advertise webrtc")
        self._channel.send(encode(kind, sdp, wide))

    async def receive(self) -> Signal:
        return decode(await self._channel.receive())
