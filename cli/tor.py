"""``--tor`` and friends, shared by send and receive.

The flags are kept in the click context (like ``--no-plugins``) so the commands need no extra
parameters; :func:`start_tor` finds Tor and gives back the manager and the transit options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from hilltop.cli import output

if TYPE_CHECKING:  # loaded only when a Tor flag was given (bench/README.md, "Sixth session:
    # the text path's imports")
    from hilltop.tor.manager import TorManager
    from hilltop.tor.settings import TorSettings
    from hilltop.transit.options import TransitOptions

_KEY = "hilltop.tor.manager"


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    ctx.meta.setdefault(_KEY, {})[param.name] = value
    return value


def tor_flags(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--tor-socks", metavar="HOST:PORT", default=None, expose_value=False,
                     callback=_remember,
                     help="use a Tor that only has this SOCKS port (implies --tor); no onion "
                          "service can be made then")(f)
    f = click.option("--tor-control-port", metavar="ENDPOINT", default=None,
                     expose_value=False, callback=_remember,
                     help="Tor's control port as an endpoint, e.g. tcp:127.0.0.1:9051 "
                          "(implies --tor)")(f)
    f = click.option("--launch-tor", is_flag=True, expose_value=False, callback=_remember,
                     help="start a private tor for this transfer (implies --tor)")(f)
    f = click.option("--tor", is_flag=True, expose_value=False, callback=_remember,
                     help="everything through Tor: mailbox, and transit over an onion service "
                          "or through Tor; never a clear-net connection")(f)
    return f


def tor_chosen() -> TorSettings | None:
    """The settings if any Tor flag was given, else None."""
    ctx = click.get_current_context(silent=True)
    got = ctx.meta.get(_KEY, {}) if ctx is not None else {}
    if not (got.get("tor") or got.get("launch_tor") or got.get("tor_control_port")
            or got.get("tor_socks")):
        return None
    if sum(bool(got.get(k)) for k in ("launch_tor", "tor_control_port", "tor_socks")) > 1:
        raise click.UsageError("give only one of --launch-tor, --tor-control-port, --tor-socks")
    from hilltop.tor.settings import TorSettings

    return TorSettings(launch=bool(got.get("launch_tor")),
                       control_port=got.get("tor_control_port"),
                       socks=got.get("tor_socks"))


async def start_tor(reactor: Any, settings: TorSettings,
                    options: TransitOptions) -> tuple[TorManager, TransitOptions]:
    from hilltop.tor.manager import TorManager
    from hilltop.tor.settings import TorTransitSettings

    manager = TorManager(reactor, settings)
    await manager.ready()
    if manager.socks_only:
        host, port = manager.socks or ("?", 0)
        output.status(f"Tor: only a SOCKS port ({host}:{port}), so no onion service can be "
                      "made; the peer's onion service or the transit relay will be used")
    shared = TorTransitSettings(manager=manager, find=settings)
    return manager, dataclasses.replace(options, tor=True,
                                        settings=options.settings.with_(shared))
