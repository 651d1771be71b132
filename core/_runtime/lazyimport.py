"""Standard-library modules a dependency imports but no ``wormhole`` command uses, loaded
at their first use instead of at start-up.

Why a module of its own: it must run before Twisted is first imported, so it imports nothing
but the standard library.
"""

from __future__ import annotations

import sys


def defer_module(name: str) -> None:
    """Make the not yet imported submodule ``name`` load at its first use, not its import
    (:class:`importlib.util.LazyLoader`), and bind it on its package, so that
    ``from package import module`` takes the lazy module without touching it.

    For ``http.cookiejar``, which ``twisted.python.compat`` imports only to re-export it as
    a deprecated name: it pulls in ``urllib.request``, ``http.client``, ``email`` and ``ssl``,
    21 modules and 1.3 MB of peak RSS that no ``wormhole`` command uses (bench/README.md,
    "Time budget"). Whoever does use it gets the real module at the first attribute.
    """
    import importlib
    import importlib.util

    if name in sys.modules:
        return
    parent, _, child = name.rpartition(".")
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    if parent:
        setattr(importlib.import_module(parent), child, module)
