"""Loading transport plugins from the ``hilltop.transports`` entry-point group, and keeping
one misbehaving plugin from spoiling a transfer.

Built-in transports are registered in hilltop's own pyproject exactly like a third-party one,
so the core has no private path a plugin lacks; "built-in" only means "an entry point shipped
by the hilltop distribution" (what ``--no-plugins`` keeps).

Isolation. A plugin that fails to import, instantiate, declare the right ``api`` version or
describe itself is reported once (a warning, and an entry in :attr:`Transports.failures` for
``wormhole transports``) and skipped. During a session the same goes for a plugin that raises
in a hook, returns hints that are not hints, hands back something that is not a stream, or
hangs: start, connect and stop each run under a timeout (:class:`HookTimeouts`). Such a plugin
is reported once, left out for the rest of the session (its ``stop`` hook is still called) and
the others carry on. Hooks are called one implementation at a time, never through pluggy's
fan-out, so one raising plugin cannot take the call down for everybody.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Sequence
from importlib.metadata import (
    EntryPoint,
    EntryPoints,
    PackageNotFoundError,
    distribution,
    entry_points,
)
from pathlib import Path
from typing import Any

import pluggy
from twisted.internet import defer

from hilltop import hookspecs
from hilltop._values import value
from hilltop.config import config_path, read_table
from hilltop.errors import DialError, LocalError
from hilltop.hookspecs import API_VERSION, TransitSession, TransportInfo
from hilltop.streams import ByteStream

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "hilltop.transports"
BUILTIN_DISTRIBUTION = "hilltop"


@value
class HookTimeouts:
    """Seconds a hook's Deferred may take before the plugin counts as hung and is skipped.

    ``connect`` is longer than direct-tcp's own 30 s dial timeout, so only a plugin that
    ignores its own deadlines trips it; an onion service may need most of ``start``.
    """

    start: float = 20.0
    connect: float = 45.0
    stop: float = 10.0


@value
class LoadedTransport:
    """A transport plugin that loaded, registered under ``name``, with what it says it can do."""

    name: str
    plugin: Any
    info: TransportInfo
    builtin: bool = False


@value
class PluginFailure:
    """One plugin that was skipped, and the sentence that says why (shown to the user)."""

    name: str
    reason: str


@value
class PluginConfig:
    """The ``[transports]`` table of the config file."""

    disabled: tuple[str, ...] = ()
    path: str | None = None


def read_config(path: Path | None = None) -> PluginConfig:
    """Read the transport settings; a missing file means defaults, a broken one a LocalError.

    Format::

        [transports]
        disabled = ["some-plugin", "relay"]
    """
    path = config_path() if path is None else path
    table = read_table("transports", path)
    if table is None:
        return PluginConfig()
    disabled = table.get("disabled", [])
    if not isinstance(disabled, list) or not all(isinstance(n, str) for n in disabled):
        raise LocalError(f"config file {path}: [transports] disabled must be a list of "
                         "transport names, e.g. disabled = [\"relay\"]")
    return PluginConfig(tuple(disabled), str(path))


class _BuiltinCheck:
    """Whether an entry point was shipped by hilltop itself: one of those hilltop's own
    distribution declares (its ``entry_points.txt``, the distribution found by its directory's
    name), compared by group, name and target.

    Why not ``ep.dist.name``: that parses the distribution's whole METADATA file with the
    ``email`` package, which costs a file transfer ~8 ms per side with its import, on the
    critical path (bench/README.md, "Fourth session"); the CLI leaves it unimported.
    """

    def __init__(self) -> None:
        self._ours: frozenset[tuple[str, str, str]] | None = None

    def __call__(self, ep: EntryPoint) -> bool:
        if self._ours is None:
            try:
                shipped = distribution(BUILTIN_DISTRIBUTION).entry_points
            except PackageNotFoundError:  # running from a source tree: nothing is shipped
                shipped = EntryPoints(())
            self._ours = frozenset((e.group, e.name, e.value) for e in shipped)
        return (ep.group, ep.name, ep.value) in self._ours


def api_mismatch(api: Any) -> str | None:
    """The user-facing reason a plugin's ``api`` attribute is refused, or None if it is fine."""
    if api == API_VERSION and not isinstance(api, bool):
        return None
    if api is None:
        return (f"declares no plugin api version (a transport class needs `api = "
                f"{API_VERSION}`)")
    return (f"is written for plugin api {api!r}, but this hilltop provides api {API_VERSION}; "
            f"install a release of the plugin made for api {API_VERSION}, or a hilltop that "
            f"provides api {api!r}")


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager, not looking for hook implementations among dunder attributes.

    Why: ``register`` reads every name in ``dir(plugin)`` with ``inspect.getattr_static``,
    and two thirds of a transport's names are ``object``'s dunders; skipping them took
    ``load_configured`` from 12.2 to 9.4 ms of CPU for the 7 built-in transports, on a file
    transfer's warm-up (bench/README.md, "Fourth session"). A hook implementation is named
    after its hook (``hilltop_...``) or marked with a ``specname``; a dunder method is neither.
    """

    def parse_hookimpl_opts(self, plugin: object, name: str) -> pluggy.HookimplOpts | None:
        if name.startswith("__") and name.endswith("__"):
            return None
        return super().parse_hookimpl_opts(plugin, name)


class Transports:
    """The loaded transport plugins: a pluggy manager plus what each plugin said about itself."""

    def __init__(self) -> None:
        self.pm = _PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.loaded: list[LoadedTransport] = []
        self.failures: list[PluginFailure] = []
        self.disabled: list[PluginFailure] = []  # switched off by the user, with where
        self.broken: dict[str, str] = {}  # failed during this session: name -> reason

    # -- loading ---------------------------------------------------------------------------------
    def add(self, plugin: Any, name: str | None = None,
            builtin: bool = False) -> LoadedTransport | None:
        """Register one plugin instance; returns None (after reporting) if it is unusable."""
        label = name or type(plugin).__name__
        problem = api_mismatch(getattr(plugin, "api", None))
        if problem:
            self._fail(label, problem)
            return None
        pm_name, n = label, 1
        while self.pm.has_plugin(pm_name):  # two instances of one class: the info name decides
            n += 1
            pm_name = f"{label}-{n}"
        try:
            self.pm.register(plugin, name=pm_name)
        except Exception as err:  # pluggy validation: unknown hook, wrong arguments
            self._fail(label, f"cannot be registered: {err}")
            return None
        info = self._info_of(plugin)
        if not isinstance(info, TransportInfo) or not _valid_info(info):
            self.pm.unregister(plugin)
            self._fail(label, f"hilltop_transport_info gave {info!r}")
            return None
        if any(t.info.name == info.name for t in self.loaded):
            self.pm.unregister(plugin)
            self._fail(label, f"a transport named {info.name!r} is already loaded")
            return None
        loaded = LoadedTransport(info.name, plugin, info, builtin)
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

    def _disable(self, name: str, why: str) -> None:
        log.debug("transport %s disabled: %s", name, why)
        self.disabled.append(PluginFailure(name, why))

    def names(self) -> list[str]:
        return [t.name for t in self.loaded]

    def select(self, wanted: Sequence[str]) -> Transports:
        """Keep only the named transports (``--transports``); unknown names are a LocalError."""
        unknown = [w for w in wanted if w not in self.names()]
        if unknown:
            off = {d.name: d.reason for d in self.disabled}
            hints = "".join(f" ({u} is {off[u]})" for u in unknown if u in off)
            raise LocalError(
                f"unknown transport(s) {', '.join(unknown)}; "
                f"available: {', '.join(self.names()) or 'none'}{hints}"
            )
        for t in list(self.loaded):
            if t.name not in wanted:
                self.pm.unregister(t.plugin)
                self.loaded.remove(t)
        return self

    # -- what is usable --------------------------------------------------------------------------
    def active(self) -> list[LoadedTransport]:
        """Transports that are usable and have not failed during this session."""
        return [t for t in self.loaded if t.info.usable and t.name not in self.broken]

    def for_hint_type(self, hint_type: str) -> list[LoadedTransport]:
        """Active transports that can dial ``hint_type``, in load order."""
        return [t for t in self.active() if hint_type in t.info.hint_types]

    def hint_types(self) -> list[str]:
        """Every hint type an active transport claims (for :func:`hilltop.hints.parse_hints`)."""
        return list(dict.fromkeys(h for t in self.active() for h in t.info.hint_types))

    def report(self, transport: LoadedTransport, hook: str, reason: str) -> None:
        """A plugin misbehaved in ``hook``: say so once, and leave it out from now on."""
        if transport.name in self.broken:
            log.debug("transport %s failed again in %s: %s", transport.name, hook, reason)
            return
        text = f"{hook} {reason}"
        self.broken[transport.name] = text
        log.warning("transport plugin %s skipped: %s", transport.name, text)
        self.failures.append(PluginFailure(transport.name, text))

    # -- calling hooks ---------------------------------------------------------------------------
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
        """Call ``hook`` on every active transport; a raising one is reported and gives None."""
        out = []
        for t in self.active():
            try:
                out.append((t, self.call(t, hook, **kwargs)))
            except Exception as err:
                log.debug("transport %s raised in %s", t.name, hook, exc_info=True)
                self.report(t, hook, f"raised {_describe(err)}")
                out.append((t, None))
        return out

    def _guarded(self, transport: LoadedTransport, hook: str, reactor: Any, timeout: float,
                 **kwargs: Any) -> defer.Deferred[Any]:
        """Call ``hook`` on one plugin; always a Deferred, failing after ``timeout`` seconds."""
        try:
            d = defer.maybeDeferred(self.call, transport, hook, **kwargs)
        except Exception as err:  # maybeDeferred catches everything; belt and braces
            d = defer.fail(err)
        if not d.called:
            d.addTimeout(timeout, reactor)
        return d

    async def start_all(self, session: TransitSession, reactor: Any,
                        timeout: float) -> list[tuple[LoadedTransport, list[Any]]]:
        """Run every active transport's start hook side by side; returns (transport, hints).

        A plugin that raises, hangs past ``timeout`` or returns something other than a list of
        hints of its declared types is reported and contributes nothing.
        """
        running = [(t, self._guarded(t, "hilltop_transport_start", reactor, timeout,
                                     session=session)) for t in self.active()]
        out: list[tuple[LoadedTransport, list[Any]]] = []
        for t, d in running:
            try:
                got = await d
            except defer.TimeoutError:
                self.report(t, "hilltop_transport_start", f"did not finish within {timeout:g} s")
                continue
            except Exception as err:
                log.debug("transport %s failed to start", t.name, exc_info=True)
                self.report(t, "hilltop_transport_start", f"failed: {_describe(err)}")
                continue
            problem = check_hints(got, t.info)
            if problem:
                self.report(t, "hilltop_transport_start", f"returned bad hints: {problem}")
                continue
            out.append((t, list(got or [])))
        return out

    async def stop_all(self, session: TransitSession, reactor: Any, timeout: float) -> None:
        """Run the stop hook of every usable transport (failed ones too), each under a timeout."""
        running = [(t, self._guarded(t, "hilltop_transport_stop", reactor, timeout,
                                     session=session))
                   for t in self.loaded if t.info.usable]
        for t, d in running:
            try:
                await d
            except defer.TimeoutError:
                self.report(t, "hilltop_transport_stop", f"did not finish within {timeout:g} s")
            except Exception as err:
                log.debug("transport %s failed to stop", t.name, exc_info=True)
                self.report(t, "hilltop_transport_stop", f"failed: {_describe(err)}")

    async def dial(self, hint: Any, session: TransitSession, reactor: Any, timeout: float,
                   owners: Sequence[LoadedTransport] | None = None,
                   ) -> tuple[LoadedTransport, ByteStream]:
        """Ask the transports that claim ``hint.type`` to dial it, first taker wins.

        A plugin fault (raising, hanging past ``timeout``, returning something that is not a
        stream) is reported and the next claimant gets the hint; a dial that fails for a
        network reason fails the attempt. Cancelling the returned Deferred cancels the
        plugin's Deferred, which must abort the attempt.
        """
        errors: list[str] = []
        for t in self.for_hint_type(hint.type) if owners is None else owners:
            hook = "hilltop_transport_connect"
            try:
                result = self.call(t, hook, hint=hint, session=session)
            except Exception as err:
                log.debug("transport %s raised dialling %s", t.name, hint, exc_info=True)
                self.report(t, hook, f"raised {_describe(err)}")
                errors.append(f"{t.name} failed: {_describe(err)}")
                continue
            if result is None:
                continue  # not this plugin's hint
            if not isinstance(result, defer.Deferred):
                result = defer.succeed(result)
            if not result.called:
                result.addTimeout(timeout, reactor)
            try:
                stream = await result
            except defer.TimeoutError:
                self.report(t, hook, f"did not connect or fail within {timeout:g} s")
                errors.append(f"{t.name} hung")
                continue
            if not isinstance(stream, ByteStream):
                _close_quietly(stream)
                self.report(t, hook, f"gave {_short(stream)} instead of a ByteStream")
                errors.append(f"{t.name} gave no stream")
                continue
            return t, stream
        raise DialError("; ".join(errors) or "no transport took it")

    async def probe(self, reactor: Any, timeouts: HookTimeouts) -> dict[str, list[str]]:
        """Exercise every active transport once on loopback, for ``wormhole transports --check``.

        Starts each in a throwaway session, dials the first hint of each non-relay transport
        that contributed one (with that same transport), closes what came back and stops
        everything. Returns the hints each transport gave; failures land in
        :attr:`failures` as in a real session.
        """
        inbound: list[Any] = []
        session = TransitSession(reactor=reactor, role="sender", local_addresses=["127.0.0.1"],
                                 offer_inbound=inbound.append)
        seen: dict[str, list[str]] = {}
        try:
            for t, hints in await self.start_all(session, reactor, timeouts.start):
                seen[t.name] = [f"{h.type} {h}" for h in hints]
                if not hints or t.info.relay or t.name in self.broken:
                    continue
                try:
                    _, stream = await self.dial(hints[0], session, reactor, timeouts.connect,
                                                owners=[t])
                except Exception as err:
                    if t.name not in self.broken:
                        self.report(t, "hilltop_transport_connect",
                                    f"could not dial its own hint {hints[0]}: {_describe(err)}")
                    continue
                stream.close()
                await stream.when_closed()
        finally:
            for stream in inbound:
                stream.close()
            await self.stop_all(session, reactor, timeouts.stop)
        return seen


def _valid_info(info: TransportInfo) -> bool:
    return (isinstance(info.name, str) and bool(info.name)
            and isinstance(info.hint_types, tuple)
            and all(isinstance(h, str) for h in info.hint_types))


def check_hints(got: Any, info: TransportInfo) -> str | None:
    """Why ``got`` is not an acceptable start result for ``info``'s transport, or None.

    Acceptable: None or a list/tuple of hint objects whose ``type`` the transport declared,
    with a numeric ``priority`` and a ``to_wire()`` giving a JSON object of the same type.
    """
    if got is None:
        return None
    if not isinstance(got, list | tuple):
        return f"expected a list of hints, got {_short(got)}"
    for hint in got:
        kind = getattr(hint, "type", None)
        if not isinstance(kind, str) or kind not in info.hint_types:
            return (f"{_short(hint)} has type {kind!r}, not one of the declared hint types "
                    f"{list(info.hint_types)}")
        priority = getattr(hint, "priority", None)
        if isinstance(priority, bool) or not isinstance(priority, int | float):
            return f"{_short(hint)} has priority {priority!r}, not a number"
        try:
            wire = hint.to_wire()
            json.dumps(wire)
            str(hint)
        except Exception as err:
            return f"{_short(hint)} cannot be sent: {_describe(err)}"
        if not isinstance(wire, dict) or wire.get("type") != kind:
            return f"{_short(hint)}.to_wire() gave {_short(wire)}, not a {kind} object"
    return None


def _describe(err: BaseException) -> str:
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _short(obj: Any, limit: int = 60) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _close_quietly(obj: Any) -> None:
    close = getattr(obj, "close", None)
    if callable(close):
        try:
            close()
        except Exception:
            log.debug("closing %r failed", obj, exc_info=True)


def load_transports(
    select: Sequence[str] | None = None,
    *,
    eps: Iterable[EntryPoint] | None = None,
    extra: Iterable[Any] = (),
    builtins_only: bool = False,
    disabled: Collection[str] = (),
    disabled_by: str = "the config file",
) -> Transports:
    """Load every plugin in the entry-point group (or ``eps``), plus ``extra`` instances.

    * ``select`` keeps only those transport names (the ``--transports`` option). Naming a
      transport there overrides ``disabled``: an explicit choice beats a standing one.
    * ``builtins_only`` skips entry points not shipped by hilltop itself (``--no-plugins``);
      they are never imported. ``extra`` instances still load (tests use them).
    * ``disabled`` names entry points or transports to leave out (the config file); a
      disabled entry point is not even imported, so a plugin that breaks on import can be
      switched off. ``disabled_by`` says where the list came from, for the listing.
    """
    keep = set(select or ())
    off = set(disabled) - keep
    transports = Transports()
    is_builtin = _BuiltinCheck()
    for ep in entry_points(group=ENTRY_POINT_GROUP) if eps is None else eps:
        builtin = is_builtin(ep)
        if builtins_only and not builtin:
            transports._disable(ep.name, "disabled by --no-plugins")
            continue
        if ep.name in off:
            transports._disable(ep.name, f"disabled by {disabled_by}")
            continue
        try:
            factory = ep.load()
            plugin = factory()
        except Exception as err:
            transports._fail(ep.name, f"failed to load: {_describe(err)}")
            continue
        loaded = transports.add(plugin, ep.name, builtin=builtin)
        if loaded is not None and loaded.name in off:  # disabled under its transport name
            transports.pm.unregister(loaded.plugin)
            transports.loaded.remove(loaded)
            transports._disable(loaded.name, f"disabled by {disabled_by}")
    for plugin in extra:
        transports.add(plugin)
    if select is not None:
        transports.select(select)
    return transports


def load_configured(select: Sequence[str] | None = None, *,
                    no_plugins: bool = False) -> Transports:
    """What the CLI and the file-transfer layer use: entry points, the config file, flags."""
    config = read_config()
    return load_transports(select, builtins_only=no_plugins, disabled=config.disabled,
                           disabled_by=f"config file {config.path}" if config.path else "config")

