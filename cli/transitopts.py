"""Transit flags shared by send and receive."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from hilltop.cli import events
from hilltop.errors import HilltopError
from hilltop.transit.options import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_RECONNECT_GRACE,
    TransitOptions,
)
from hilltop.transit.settings import TransportSettings

if TYPE_CHECKING:
    from hilltop.api import Wormhole
    from hilltop.transit.relayconfig import RelaySettings
    from hilltop.webrtc.settings import WebRTCSettings


def transit_flags(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--listen/--no-listen", default=True,
                     help="open a listening socket for direct connections (default: yes); "
                          "--no-listen also sends no local address (direct hints, LAN, "
                          "WebRTC host candidates), so the peer is met at the relay")(f)
    f = click.option("--transports", metavar="LIST", default=None,
                     help="comma-separated transports that may take part, e.g. 'relay' (a small "
                          "file then takes them too, not the offer); see 'wormhole transports'"
                     )(f)
    f = no_plugins_flag(f)
    f = idle_timeout_flag(f)
    f = reconnect_grace_flag(f)
    f = click.option("--durable/--no-durable", default=None, expose_value=False,
                     callback=_remember_durable,
                     help="send: between two hilltop peers with the 'dilate' extra, run the "
                          "transfer over Dilation, which reconnects when the path breaks "
                          "(costs CPU: off unless asked); receive: a receiver follows its "
                          "sender unless --no-durable")(f)
    f = webrtc_flags(f)
    return f


_RECONNECT_GRACE = "hilltop.reconnect_grace"


def _remember_grace(ctx: click.Context, _param: click.Parameter, value: float) -> float:
    ctx.meta[_RECONNECT_GRACE] = value
    return value


def reconnect_grace_flag(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--reconnect-grace SECONDS``; kept in the click context like ``--idle-timeout``."""
    return click.option("--reconnect-grace", type=click.FloatRange(min=0.1), metavar="SECONDS",
                        default=DEFAULT_RECONNECT_GRACE, show_default=True, expose_value=False,
                        callback=_remember_grace,
                        help="between two hilltop peers with Dilation (the 'dilate' extra): "
                             "how long a transfer whose connection broke waits for a new one "
                             "before it fails")(f)


_DURABLE = "hilltop.durable"


def _remember_durable(ctx: click.Context, _param: click.Parameter,
                      value: bool | None) -> bool | None:
    ctx.meta[_DURABLE] = value
    return value


def durable_chosen() -> bool | None:
    """``--durable`` (True), ``--no-durable`` (False) or neither (None)."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_DURABLE)


def reconnect_grace_chosen() -> float:
    ctx = click.get_current_context(silent=True)
    chosen = ctx.meta.get(_RECONNECT_GRACE) if ctx is not None else None
    return float(chosen) if chosen is not None else DEFAULT_RECONNECT_GRACE


def dilation_wanted(options: TransitOptions) -> bool:
    """Make the Wormhole able to dilate (``durable-v1``) when the ``dilate`` extra is here
    and this run may use it (:meth:`TransitOptions.may_be_durable`): the ``version``
    message then says so, and both sides agree before either chooses."""
    from hilltop.rendezvous import capabilities

    return options.may_be_durable() and capabilities.dilation_available()


_IDLE_TIMEOUT = "hilltop.idle_timeout"


def _remember_idle_timeout(ctx: click.Context, _param: click.Parameter, value: float) -> float:
    ctx.meta[_IDLE_TIMEOUT] = value
    return value


def idle_timeout_flag(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--idle-timeout SECONDS``; kept in the click context like ``--no-plugins``."""
    return click.option("--idle-timeout", type=click.FloatRange(min=0.1), metavar="SECONDS",
                        default=DEFAULT_IDLE_TIMEOUT, show_default=True, expose_value=False,
                        callback=_remember_idle_timeout,
                        help="give up when the peer stays silent this long while it owes "
                             "us something (data, its acknowledgement, a sender's offer), "
                             "or the mailbox server stays lost this long")(f)


def idle_timeout_chosen() -> float:
    ctx = click.get_current_context(silent=True)
    chosen = ctx.meta.get(_IDLE_TIMEOUT) if ctx is not None else None
    return float(chosen) if chosen is not None else DEFAULT_IDLE_TIMEOUT


def watch_mailbox(w: Wormhole) -> None:
    """Say when the mailbox server is lost and when we try again, and give up on it after
    ``--idle-timeout`` (a wormhole without its mailbox cannot tell the peer anything)."""
    w.give_up_reconnecting_after(idle_timeout_chosen())
    w.on_reconnecting(events.reconnecting)


_WEBRTC = "hilltop.webrtc"


def _remember(key: str) -> Callable[..., Any]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        ctx.meta.setdefault(_WEBRTC, {})[key] = value
        return value
    return callback


def webrtc_flags(f: Callable[..., Any]) -> Callable[..., Any]:
    """ICE servers for the webrtc transport; no server is contacted unless one is given here
    or in the ``[webrtc]`` table of the config file."""
    flags: list[tuple[str, str, dict[str, Any]]] = [
        ("--stun", "stun", dict(multiple=True, metavar="URL",
                               help="STUN server for webrtc and, when the mailbox server does "
                                    "not say our public address, for TCP hole punching "
                                    "(none by default), e.g. stun:stun.example.org:3478")),
        ("--turn", "turn", dict(multiple=True, metavar="URL",
                               help="webrtc: TURN server, e.g. turn:turn.example.org:3478")),
        ("--turn-user", "turn_user", dict(metavar="NAME", help="webrtc: TURN user name")),
        ("--turn-password", "turn_password", dict(metavar="PASSWORD",
                                                   help="webrtc: TURN password")),
        ("--webrtc-relay-only", "relay_only",
         dict(is_flag=True, help="webrtc: use only TURN relay candidates")),
    ]
    for name, key, kw in flags:
        f = click.option(name, expose_value=False, callback=_remember(key), **kw)(f)
    return f


def webrtc_settings() -> WebRTCSettings:
    from hilltop.webrtc import settings

    ctx = click.get_current_context(silent=True)
    got = ctx.meta.get(_WEBRTC, {}) if ctx is not None else {}
    try:
        return settings.from_flags(list(got.get("stun") or ()), list(got.get("turn") or ()),
                                   got.get("turn_user"), got.get("turn_password"),
                                   bool(got.get("relay_only")), settings.config_servers())
    except HilltopError as err:
        raise click.UsageError(str(err)) from None


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


def app_versions(options: TransitOptions, *, transit_follows: bool = False) -> dict[str, Any]:
    """Our advertisement for this run: an extension transport is offered only if this run may
    use it (``--transports``); none under ``--tor``, and webrtc not under ``--no-listen``
    without a TURN server (it would decline, and the peer would gather for nothing). A
    sender whose offer needs transit says so (``capabilities.TRANSIT_FOLLOWS``). A run whose
    transit the user restricted (``--transports``, ``--durable``) does not offer to take a
    small file in its offer (``capabilities.INLINE``): it gets the transport asked for."""
    from hilltop import __version__
    from hilltop.rendezvous import capabilities
    from hilltop.transfer import session
    from hilltop.webrtc.settings import WebRTCSettings

    allowed = options.transports
    webrtc = options.settings.get(WebRTCSettings) or WebRTCSettings()
    if options.tor or webrtc.under_no_listen(options.no_listen) is None:
        allowed = ()  # webrtc, the one extension transport, stays off: do not offer it
    return capabilities.default_advertisement(__version__, allowed,
                                              transit_follows=transit_follows,
                                              inline=session.inline_allowed(options))


def transit_options(transit_helpers: Sequence[str], listen: bool,
                    transports: str | None) -> TransitOptions:
    names = [t.strip() for t in transports.split(",") if t.strip()] if transports else None
    helpers, relay = relay_choices(transit_helpers)
    return TransitOptions(transit_helpers=helpers,
                          no_listen=not listen, transports=names,
                          no_plugins=no_plugins_chosen(),
                          settings=TransportSettings(webrtc_settings(), relay),
                          on_attempt=events.attempt, idle_timeout=idle_timeout_chosen(),
                          reconnect_grace=reconnect_grace_chosen(), durable=durable_chosen())


def relay_choices(given: Sequence[str]) -> tuple[list[str], RelaySettings]:
    """Our relays and the relay transport's settings: the ``--transit-helper`` flags (or
    ``WORMHOLE_TRANSIT_HELPER``) when given, else the ``[relay]`` table's ``helpers``, else
    the public relay; an empty value means none. Each is checked now, so a typo costs no
    rendezvous."""
    from hilltop.api import TRANSIT_HELPER
    from hilltop.transit.relayaddress import helper_endpoints
    from hilltop.transit.relayconfig import read_relay_config

    try:
        config = read_relay_config()
        chosen = given or config.helpers
        helpers = [h for h in (chosen if chosen is not None else [TRANSIT_HELPER]) if h]
        for helper in helpers:  # its syntax only: the hints are built if transit runs
            helper_endpoints(helper)
    except HilltopError as err:
        raise click.UsageError(str(err)) from None
    return helpers, config.settings


def check_transport_names(options: TransitOptions) -> None:
    """Fail on a misspelt ``--transports`` name before the code is even announced.

    The transit layer loads the plugins again when the peer is known; doing it once here (the
    reactor must be installed, as plugins may import it) means a typo costs the user nothing
    instead of a wasted rendezvous.
    """
    if options.transports:
        from hilltop.transit.plugins import load_configured

        load_configured(list(options.transports), no_plugins=options.no_plugins)


def lan_flags(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--interface", metavar="NAME", default=None,
                     help="with --lan: announce, listen and look only on this network "
                          "interface (implies --lan)")(f)
    f = click.option("--lan", is_flag=True,
                     help="no server at all: find the other side on the local network "
                          "(mDNS); both sides must use --lan")(f)
    return f
