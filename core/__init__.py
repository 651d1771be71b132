"""hilltop: Magic Wormhole, wire-compatible, with transports as plugins.

The public API is the four names below; everything else is reached through its domain
package (``hilltop.rendezvous``, ``hilltop.transit``, ``hilltop.transfer``, ...), and plugins
use ``hilltop.hookspecs``, ``hilltop.streams``, ``hilltop.hints`` and ``hilltop.testing``.
Importing this package stays cheap and I/O-free (pure modules import it too), so each name is
loaded only when first asked for: a text message never imports the transit machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["TransitOptions", "TransportSettings", "Wormhole", "__version__",
           "install_asyncio_reactor"]

if TYPE_CHECKING:
    from hilltop._runtime.reactor import install_asyncio_reactor
    from hilltop.api import Wormhole
    from hilltop.transit.options import TransitOptions
    from hilltop.transit.settings import TransportSettings

# The I/O shells at the top level; every other module here is pure (tests/test_layers.py).
IO_MODULES = frozenset({"api", "config", "streams", "testing", "wsstream"})

_LAZY = {
    "Wormhole": "hilltop.api",
    "TransitOptions": "hilltop.transit.options",
    "TransportSettings": "hilltop.transit.settings",
    "install_asyncio_reactor": "hilltop._runtime.reactor",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(module), name)
