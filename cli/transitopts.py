"""Transit flags shared by send and receive."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from hilltop.filetransfer import TransitOptions


def transit_flags(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--listen/--no-listen", default=True,
                     help="open a listening socket for direct connections (default: yes)")(f)
    f = click.option("--transports", metavar="LIST", default=None,
                     help="comma-separated transports that may take part, e.g. 'relay'; "
                          "see 'wormhole transports'")(f)
    f = no_plugins_flag(f)
    return f


_NO_PLUGINS = "hilltop.no_plugins"


def _remember_no_plugins(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    ctx.meta[_NO_PLUGINS] = value
    return value


def no_plugins_flag(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--no-plugins``; kept in the click context so commands need no extra parameter."""
    return click.option("--no-plugins", is_flag=True, expose_value=False,
                        callback=_remember_no_plugins,
                        help="use only the transports shipped with hilltop, "
                             "ignoring installed plugins")(f)


def no_plugins_chosen() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(_NO_PLUGINS))


def transit_options(transit_helper: str, listen: bool, transports: str | None) -> TransitOptions:
    names = [t.strip() for t in transports.split(",") if t.strip()] if transports else None
    return TransitOptions(transit_helpers=[transit_helper] if transit_helper else [],
                          no_listen=not listen, transports=names,
                          no_plugins=no_plugins_chosen())


def check_transport_names(options: TransitOptions) -> None:
    """Fail on a misspelt ``--transports`` name before the code is even announced.

    The transit layer loads the plugins again when the peer is known; doing it once here (the
    reactor must be installed, as plugins may import it) means a typo costs the user nothing
    instead of a wasted rendezvous.
    """
    if options.transports:
        from hilltop.plugins import load_configured

        load_configured(list(options.transports), no_plugins=options.no_plugins)


def lan_flags(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--interface", metavar="NAME", default=None,
                     help="with --lan: announce, listen and look only on this network "
                          "interface (implies --lan)")(f)
    f = click.option("--lan", is_flag=True,
                     help="no server at all: find the other side on the local network "
                          "(mDNS); both sides must use --lan")(f)
    return f
