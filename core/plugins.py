"""Loading transport plugins from the ``hilltop.transports`` entry-point group.

Built-in transports are registered in hilltop's own pyproject exactly like a third-party one,
so the core has no private path a plugin lacks. A plugin that fails to import, instantiate,
declare the right ``api`` version or describe itself is reported once (a warning log line, and
an entry in :attr:`Transports.failures` for ``wormhole transports``) and skipped; the others
still work. Hooks are called one implementation at a time through :meth:`Transports.call_each`,
so one raising plugin cannot take down the call for everybody.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from hilltop import hookspecs
from hilltop.errors import LocalError
from hilltop.hookspecs import API_VERSION, TransportInfo

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "hilltop.transports"


@dataclass(frozen=True)
class LoadedTransport:
    name: str
    plugin: Any
    info: TransportInfo


@dataclass(frozen=True)
class PluginFailure:
    name: str
    reason: str


class Transports:
    """The loaded transport plugins: a pluggy manager plus what each plugin said about itself."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.loaded: list[LoadedTransport] = []
        self.failures: list[PluginFailure] = []

    def add(self, plugin: Any, name: str | None = None) -> LoadedTransport | None:
        """Register one plugin instance; returns None (after reporting) if it is unusable."""
        label = name or type(plugin).__name__
        api = getattr(plugin, "api", None)
        if api != API_VERSION:
            return self._fail(label, f"speaks plugin api {api!r}, hilltop needs {API_VERSION}")
        pm_name, n = label, 1
        while self.pm.has_plugin(pm_name):  # two instances of one class: the info name decides
            n += 1
            pm_name = f"{label}-{n}"
        try:
            self.pm.register(plugin, name=pm_name)
        except Exception as err:  # pluggy validation: unknown hook, wrong arguments
            return self._fail(label, f"cannot be registered: {err}")
        info = self._info_of(plugin)
        if not isinstance(info, TransportInfo):
            self.pm.unregister(plugin)
            return self._fail(label, f"hilltop_transport_info gave {info!r}")
        if any(t.info.name == info.name for t in self.loaded):
            self.pm.unregister(plugin)
            return self._fail(label, f"a transport named {info.name!r} is already loaded")
        loaded = LoadedTransport(info.name, plugin, info)
        self.loaded.append(loaded)
        return loaded

    def _info_of(self, plugin: Any) -> Any:
        impls = [i for i in self.pm.hook.hilltop_transport_info.get_hookimpls()
                 if i.plugin is plugin]
        if not impls:
            return None
        try:
            return impls[0].function()
        except Exception as err:
            return f"an error: {err}"

    def _fail(self, name: str, reason: str) -> None:
        log.warning("transport plugin %s skipped: %s", name, reason)
        self.failures.append(PluginFailure(name, reason))
        return None

    def names(self) -> list[str]:
        return [t.name for t in self.loaded]

    def select(self, wanted: Sequence[str]) -> Transports:
        """Keep only the named transports (``--transports``); unknown names are a LocalError."""
        unknown = [w for w in wanted if w not in self.names()]
        if unknown:
            raise LocalError(
                f"unknown transport(s) {', '.join(unknown)}; "
                f"available: {', '.join(self.names()) or 'none'}"
            )
        for t in list(self.loaded):
            if t.name not in wanted:
                self.pm.unregister(t.plugin)
                self.loaded.remove(t)
        return self

    def refresh_info(self) -> None:
        """Ask every plugin for its info again (usability can change, e.g. Tor started)."""
        fresh = []
        for t in self.loaded:
            info = self._info_of(t.plugin)
            fresh.append(LoadedTransport(t.name, t.plugin, info) if isinstance(
                info, TransportInfo) else t)
        self.loaded = fresh

    def for_hint_type(self, hint_type: str) -> list[LoadedTransport]:
        """Usable transports that can dial ``hint_type``, in load order."""
        return [t for t in self.loaded if t.info.usable and hint_type in t.info.hint_types]

    def call(self, transport: LoadedTransport, hook: str, **kwargs: Any) -> Any:
        """Call one plugin's implementation of ``hook``, passing only the arguments it takes.

        Returns None if the plugin does not implement the hook; exceptions propagate.
        """
        caller = getattr(self.pm.hook, hook)
        for impl in caller.get_hookimpls():
            if impl.plugin is transport.plugin:
                return impl.function(*[kwargs[a] for a in impl.argnames])
        return None

    def call_each(self, hook: str, **kwargs: Any) -> list[tuple[LoadedTransport, Any]]:
        """Call ``hook`` on every usable transport; a raising one is logged and gives None."""
        out = []
        for t in self.loaded:
            if not t.info.usable:
                continue
            try:
                out.append((t, self.call(t, hook, **kwargs)))
            except Exception:
                log.warning("transport %s failed in %s", t.name, hook, exc_info=True)
                out.append((t, None))
        return out


def load_transports(
    select: Sequence[str] | None = None,
    *,
    eps: Iterable[EntryPoint] | None = None,
    extra: Iterable[Any] = (),
) -> Transports:
    """Load every plugin in the entry-point group (or ``eps``), plus ``extra`` instances.

    ``select`` keeps only those transport names (the ``--transports`` option).
    """
    transports = Transports()
    for ep in entry_points(group=ENTRY_POINT_GROUP) if eps is None else eps:
        try:
            factory = ep.load()
            plugin = factory()
        except Exception as err:
            transports._fail(ep.name, f"failed to load: {type(err).__name__}: {err}")
            continue
        transports.add(plugin, ep.name)
    for plugin in extra:
        transports.add(plugin)
    if select is not None:
        transports.select(select)
    return transports
