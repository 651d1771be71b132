"""The services a transfer gives its transports (:class:`hilltop.hookspecs.SessionServices`).

Built over one :class:`hilltop.api.Wormhole` (duck-typed: ``send_message``, ``side_messages``,
``app_versions``, ``get_peer_versions``) and the transit key, which stays here: a transport
gets keys derived for its own purposes, never the key. The ``lan`` and ``webrtc`` transports
use exactly these, as a third-party transport would (docs/plugins.md).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hilltop.rendezvous import capabilities, key

if TYPE_CHECKING:
    from hilltop.hookspecs import SideChannel

SIDE_PREFIX = "hilltop-"


class MailboxSideChannel:
    """One named side channel of the wormhole's encrypted mailbox."""

    def __init__(self, w: Any, name: str) -> None:
        self._w = w
        self.name = name
        self._key = SIDE_PREFIX + name

    def send(self, message: bytes) -> None:
        try:
            msg = json.loads(message)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise ValueError("a side-channel message must be a JSON object") from None
        if not isinstance(msg, dict) or set(msg) != {self._key}:
            raise ValueError(f"a side-channel message has the one key {self._key!r}")
        self._w.send_message(message)

    async def receive(self) -> bytes:
        data: bytes = await self._w.side_messages(self.name).get()
        return data


class WormholeServices:
    """:class:`hilltop.hookspecs.SessionServices` for one transfer over one wormhole."""

    def __init__(self, w: Any, transit_key: bytes) -> None:
        self._w = w
        self._tk = transit_key
        self.mailbox_url: str | None = getattr(w, "relay_url", None)
        self.mailbox_local_address: tuple[str, int] | None = getattr(
            w, "mailbox_local_address", None)
        seen = getattr(w, "your_address", None)
        self.seen_address: tuple[str, int] | None = (
            (seen.host, seen.port) if seen is not None else None)
        self.generation: int | None = None  # a file transfer; Dilation's races set it

    def derive(self, purpose: str, length: int = 32) -> bytes:
        return key.hkdf(self._tk, length, purpose.encode("utf-8"))

    def side_channel(self, name: str) -> SideChannel:
        return MailboxSideChannel(self._w, name)

    async def peer_uses(self, transport: str) -> bool:
        ours = capabilities.from_app_versions(getattr(self._w, "app_versions", {}))
        theirs = capabilities.from_app_versions(await self._w.get_peer_versions())
        return transport in ours.transports and transport in theirs.transports
