"""The session services of one Dilation generation: side channels scoped to that generation.

Each generation races its own :class:`hilltop.transit.runner.TransitRunner`, so a transport
that signals through the mailbox (``webrtc``'s SDP offer and answer) would, with the
wormhole's plain side channel, read an answer that belonged to an abandoned generation: the
queue is shared and a late message stays in it. So every side channel a generation's
transports open carries the generation in its name on the wire (``hilltop-dilate-3.webrtc``
for generation 3 of channel ``webrtc``) and reads only its own queue. The transport sees its
usual channel: :meth:`ScopedSideChannel.send` takes ``{"hilltop-webrtc": ...}`` and
:meth:`ScopedSideChannel.receive` gives it back in that form, so ``webrtc`` and a third-party
plugin need no change to carry Dilation. Both peers count generations alike (each
``reconnect``/``reconnecting`` pair starts the next one, :mod:`hilltop.dilation.manager`).
"""

from __future__ import annotations

import json
from typing import Any

from hilltop.errors import ProtocolError
from hilltop.transit.services import SIDE_PREFIX, MailboxSideChannel, WormholeServices


def scoped_name(generation: int, name: str) -> str:
    """The side channel's name on the wire for ``name`` in ``generation``."""
    return f"dilate-{generation}.{name}"


def _rekey(message: bytes, old: str, new: str) -> bytes:
    """``{old: body}`` as ``{new: body}``; anything else is refused."""
    try:
        msg = json.loads(message)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ValueError("a side-channel message must be a JSON object") from None
    if not isinstance(msg, dict) or set(msg) != {old}:
        raise ValueError(f"a side-channel message has the one key {old!r}")
    return json.dumps({new: msg[old]}, separators=(",", ":")).encode("utf-8")


class ScopedSideChannel:
    """Side channel ``name`` as its transport knows it, carried under the generation's name."""

    def __init__(self, w: Any, name: str, generation: int) -> None:
        self.name = name
        self._key = SIDE_PREFIX + name
        self._wire = MailboxSideChannel(w, scoped_name(generation, name))

    def send(self, message: bytes) -> None:
        self._wire.send(_rekey(message, self._key, SIDE_PREFIX + self._wire.name))

    async def receive(self) -> bytes:
        data = await self._wire.receive()
        try:
            return _rekey(data, SIDE_PREFIX + self._wire.name, self._key)
        except ValueError as err:  # the peer's message, routed here by its key: hostile input
            raise ProtocolError(f"a side-channel message is malformed: {err}") from None


class GenerationServices(WormholeServices):
    """:class:`~hilltop.hookspecs.SessionServices` for the race of one Dilation generation:
    the wormhole's, keyed by the Dilation key, with :attr:`generation` set and side channels
    scoped to it."""

    def __init__(self, w: Any, dilation_key: bytes, generation: int) -> None:
        super().__init__(w, dilation_key)
        self.generation = generation

    def side_channel(self, name: str) -> ScopedSideChannel:
        assert self.generation is not None
        return ScopedSideChannel(self._w, name, self.generation)
