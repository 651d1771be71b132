"""Modules a dependency imports but no ``wormhole`` command uses, loaded at their first use
instead of at start-up.

Why a module of its own: it must run before Twisted and autobahn are first imported, so it
imports nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

_running = threading.RLock()
"""Held while a deferred module's code runs: another thread's first use waits for it."""

_loading: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {}
"""For a deferred module that must run inside a context (``defer_module(loading=...)``)."""


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
        with _running:
            if type(self) is _Deferred:
                namespace = super().__getattribute__("__dict__")
                if namespace.get("__deferred_running__"):  # its own code, or a module it
                    return super().__getattribute__(name)  # imports: as a circular import
                namespace["__deferred_running__"] = True
                try:
                    spec = namespace["__spec__"]
                    with _loading.pop(spec.name, contextlib.nullcontext)():
                        spec.loader.exec_module(self)
                finally:
                    del namespace["__deferred_running__"]
                    object.__setattr__(self, "__class__", types.ModuleType)
        return getattr(self, name)


def defer_module(name: str, *, import_parent: bool = True,
                 loading: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
                 ) -> None:
    """Make the not yet imported module ``name`` run at its first use, not its import, and
    bind it on its package, so that ``from package import module`` takes the deferred
    module without touching it; a plain ``import name`` takes it too (:class:`_Deferred`).
    With ``import_parent=False`` the package is not imported now and the module is not bound
    on it: for a private submodule that only its package imports (``from . import child``
    finds it in ``sys.modules``), when the package itself may never be needed. ``loading``
    makes the context its code runs in, when it runs (the imports it makes then see what
    they would have seen at start-up: ``lazytls.openssl_deferred``).

    For ``http.cookiejar``, which ``twisted.python.compat`` imports only to re-export it as
    a deprecated name: it pulls in ``urllib.request``, ``http.client``, ``email`` and ``ssl``,
    21 modules and 1.3 MB of peak RSS that no ``wormhole`` command uses (bench/README.md,
    "Time budget"). For ``hyperlink``, which autobahn's WebSocket protocol imports for a
    server's redirect: ~5 ms of CPU at every first mailbox connection (bench/README.md,
    "Fourth session"). Whoever does use one gets the real module at the first attribute.
    """
    import importlib
    import importlib.machinery
    import importlib.util

    if name in sys.modules:
        return
    parent, _, child = name.rpartition(".")
    where = None
    if parent:  # found without importing the parent, which may import the module itself
        parent_spec = importlib.util.find_spec(parent)
        if parent_spec is None or not parent_spec.submodule_search_locations:
            return
        where = list(parent_spec.submodule_search_locations)
    spec = importlib.machinery.PathFinder.find_spec(name, where)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    if loading is not None:
        _loading[name] = loading
    object.__setattr__(module, "__class__", _Deferred)
    sys.modules[name] = module
    if parent and (import_parent or parent in sys.modules):
        setattr(importlib.import_module(parent), child, module)
