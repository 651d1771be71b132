"""When a file rides in its offer through the mailbox (``inline-file-v1``) instead of transit.

Between two hilltop peers a small file needs none of transit's fixed cost (the warm-up,
listening, hints both ways, the race and the handshake: ~130 ms of a 3-byte receive against
~12 ms for a text after the key, bench/README.md): its bytes go in the offer, encrypted as
a text message is (:class:`hilltop.transfer.offers.InlineFileOffer`), and the receiver
answers once the file is on disk (:class:`hilltop.transfer.offers.InlineAck`). The decision
is made twice, both times here: before our ``version`` leaves (:func:`eligible`: whether to
announce ``transit-follows`` and warm up transit) and once the peer's arrived (:func:`chosen`).
"""

from __future__ import annotations

from hilltop.rendezvous.capabilities import INLINE
from hilltop.transfer.offers import INLINE_LIMIT, FileOffer
from hilltop.transit.options import TransitOptions

MAILBOX_PATH = "mailbox"
"""What the transfer's path is called where a transit one names its connection
(``Received 3 bytes ... via mailbox``; ``--json``'s ``via``)."""


def allowed_by(options: TransitOptions) -> bool:
    """The user left the path to us. An explicit transport list (``--transports``: a test of
    a transport, or a user who wants one path) or ``--durable`` (a transfer over Dilation)
    gets that path even for 3 bytes. ``--tor`` keeps inline: the mailbox already goes through
    Tor, so the bytes take the path the code took. ``--no-listen``, ``--transit-helper`` and
    ``--lan`` keep it too: they tune a transit connection this file does not need."""
    return not options.transports and options.durable is not True


def eligible(offer: object, size: int | None, options: TransitOptions) -> bool:
    """Before the peer's ``version``: a single file of at most :data:`INLINE_LIMIT` bytes
    that the options allow may go inline; the sender then neither announces
    ``transit-follows`` nor warms up transit."""
    return (isinstance(offer, FileOffer) and size is not None and 0 <= size <= INLINE_LIMIT
            and allowed_by(options))


def chosen(offer: object, size: int | None, options: TransitOptions,
           shared: frozenset[str]) -> bool:
    """With the peer's ``version``: inline when :func:`eligible` and both peers list
    ``inline-file-v1`` (an official or older peer gets transit exactly as before)."""
    return INLINE in shared and eligible(offer, size, options)
