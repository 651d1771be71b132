"""hilltop: Magic Wormhole, wire-compatible, with transports as plugins.

The public API is :class:`hilltop.api.Wormhole` (also importable as ``hilltop.Wormhole``).
Importing this package stays cheap and I/O-free: the pure protocol modules import it too, so
the Twisted-based facade is only loaded when it is first asked for.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Wormhole", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Wormhole":
        from hilltop.api import Wormhole

        return Wormhole
    raise AttributeError(name)
