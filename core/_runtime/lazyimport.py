"""Modules a dependency imports but no ``wormhole`` command uses, loaded at their first use
instead of at start-up.

Why a module of its own: it must run before Twisted and autobahn are first imported, so it
imports nothing but the standard library.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _Deferred(types.ModuleType):
    """A module whose code has not run yet: it runs at the first read of any attribute but
    ``__spec__``.

    Why not :class:`importlib.util.LazyLoader`: its modules load at any attribute read, and
    the import statement itself reads ``__spec__`` of a module it finds in ``sys.modules``
    (CPython 3.11, to see whether it is still initialising), so a dependency's plain
    ``import x`` loaded a deferred ``x`` at once (tried on ``hyperlink``, bench/README.md,
    "Third session"). Answering ``__spec__`` without loading makes ``import x`` bind the
    module as it is; its code runs when ``x.something`` is first read.
    """

    def __getattribute__(self, name: str) -> Any:
        if name == "__spec__":
            return super().__getattribute__(name)
        _run(self)
        return getattr(self, name)


def _run(module: types.ModuleType) -> None:
    object.__setattr__(module, "__class__", types.ModuleType)  # from now on a plain module
    spec = module.__spec__
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(module)


def defer_module(name: str) -> None:
    """Make the not yet imported module ``name`` run at its first use, not its import, and
    bind it on its package, so that ``from package import module`` takes the deferred
    module without touching it; a plain ``import name`` takes it too (:class:`_Deferred`).

    For ``http.cookiejar``, which ``twisted.python.compat`` imports only to re-export it as
    a deprecated name: it pulls in ``urllib.request``, ``http.client``, ``email`` and ``ssl``,
    21 modules and 1.3 MB of peak RSS that no ``wormhole`` command uses (bench/README.md,
    "Time budget"). For ``hyperlink``, which autobahn's WebSocket protocol imports for a
    server's redirect: ~5 ms of CPU at every first mailbox connection (bench/README.md,
    "Fourth session"). Whoever does use one gets the real module at the first attribute.
    """
    import importlib
    import importlib.util

    if name in sys.modules:
        return
    parent, _, child = name.rpartition(".")
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    object.__setattr__(module, "__class__", _Deferred)
    sys.modules[name] = module
    if parent:
        setattr(importlib.import_module(parent), child, module)
