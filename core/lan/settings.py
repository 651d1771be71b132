"""The ``lan`` transport's settings: which interface, and the two tags of this session.

The transport finds the peer's listener by a tag derived from the transit key
(:func:`hilltop.lan.wire.transit_tag`). It is handed the two tags, not the key: the tags go
out on the LAN in every announcement anyway, while the key also protects the records, and
``session.settings`` is readable by every plugin of the session.
"""

from __future__ import annotations

from typing import Any

from hilltop._values import value
from hilltop.lan import wire


@value
class LanTags:
    """Ours, to announce our listener under; theirs, to look for the peer's."""

    ours: str
    theirs: str

    @classmethod
    def from_services(cls, services: Any, role: str) -> LanTags:
        """The same tags as :meth:`derive`, from the session's derived keys
        (:class:`hilltop.hookspecs.SessionServices`): the transport never sees the key."""
        def tag(side: str) -> str:
            return services.derive(wire.TAG_PURPOSE + side, wire.TAG_BYTES).hex()

        return cls(tag(role), tag(wire.peer_role(role)))

    @classmethod
    def derive(cls, transit_key: bytes, role: str) -> LanTags:
        """The tags for our file-transfer ``role`` (the peer derives the mirror image)."""
        return cls(wire.transit_tag(transit_key, role),
                   wire.transit_tag(transit_key, wire.peer_role(role)))


@value
class LanSettings:
    """What the ``lan`` transport reads from ``session.settings``.

    * ``interface``: announce, listen and look only on this interface (``--interface``);
      None means every interface with a LAN address.
    * ``tags``: set per transfer by :func:`hilltop.transfer.session.make_runner`; without them
      the transport stays quiet (there is no peer to find).
    * ``mailbox_url``: the mailbox this transfer met at; on loopback both peers are on this
      host, where direct TCP needs no discovery, so the transport stays quiet too.
    """

    interface: str | None = None
    tags: LanTags | None = None
    mailbox_url: str | None = None
