"""What a Wormhole made with ``dilation=True`` says in its ``version`` message, and the version
both peers share.

Facts from official 0.24's code (``wormhole.py``): the ``version`` message carries
``can-dilate`` (versions, best first; only ``"ged"`` exists) and ``dilation-abilities`` at its
top level, beside ``app_versions``.

Apart from :mod:`hilltop.dilation.wire` (the key and the ``dilate-N`` messages, each a frozen
dataclass): a receiver with the ``dilate`` extra says it can dilate in every ``version``, also
when a text or a small file then comes, and importing ``wire`` for it took ~3.6 ms of CPU
per receive (bench/README.md, "Sixth session: the text path's imports").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

VERSIONS: tuple[str, ...] = ("ged",)
"""Dilation versions we speak, best first (official names them after Earthsea wizards)."""
ABILITIES: tuple[dict[str, str], ...] = ({"type": "direct-tcp-v1"}, {"type": "relay-v1"})
"""What official advertises; hilltop's other transports are negotiated by their hints."""


def version_fields(versions: Sequence[str] = VERSIONS) -> dict[str, Any]:
    """The top-level fields our ``version`` message gains when Dilation is enabled."""
    return {"can-dilate": list(versions), "dilation-abilities": [dict(a) for a in ABILITIES]}


def shared_version(mine: Sequence[str], peer_versions: dict[str, Any]) -> str | None:
    """Our best version that the peer also lists in ``can-dilate``, or None."""
    theirs = peer_versions.get("can-dilate")
    if not isinstance(theirs, list):
        return None
    return next((v for v in mine if v in theirs), None)
