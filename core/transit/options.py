"""What the user chose about transit, in a module of its own.

The CLI builds these options for every command, also for a text message, which needs none of
the transit machinery; keeping the dataclass here means that path never imports it.
:mod:`hilltop.transfer.session` re-exports it, where library users find it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from hilltop._values import value
from hilltop.transit.settings import TransportSettings

DEFAULT_IDLE_TIMEOUT = 120.0
"""Seconds of a peer's silence that end a transfer (:attr:`TransitOptions.idle_timeout`)."""
DEFAULT_RECONNECT_GRACE = 120.0
"""Seconds a durable transfer waits for a lost path to be replaced
(:attr:`TransitOptions.reconnect_grace`)."""


@value
class AttemptNote:
    """One step of one connection attempt in the race, for whoever watches (``--json``).

    ``state`` is ``dialling`` (we started it), ``inbound`` (the peer dialled us), ``failed``
    (``reason`` says why), ``cancelled`` (another won or the race ended) or ``won``.
    """

    transport: str  # the transport's name; "inbound" for a connection the peer made
    target: str  # the hint dialled, or the inbound stream's description
    state: str
    reason: str = ""


@value(frozen=False)
class TransitOptions:
    """What the user chose about transit (``--transit-helper``, ``--no-listen``, ...).

    * ``settings``: typed settings for the transports, one frozen dataclass per transport
      (e.g. :class:`hilltop.webrtc.settings.WebRTCSettings`); becomes
      ``TransitSession.settings``.
    * ``plugin_options``: free-form settings for third-party plugins, keyed by transport name;
      becomes ``TransitSession.options`` (plugin api 1). Built-in transports read none.
    * ``idle_timeout``: seconds the peer may stay silent where it owes us something (bytes
      mid-transfer, room in its receive window, the final ack, a sender's offer once the
      key is confirmed) before the transfer ends with
      :class:`~hilltop.errors.StalledError` or :class:`~hilltop.errors.SilentPeerError`
      (``--idle-timeout``). Why 120 s: the transit race's own limit, and long enough for a
      receiver's fsync of a big file on a slow disk; official 0.24 waits forever.
    * ``reconnect_grace``: between two hilltop peers that run the transfer over Dilation
      (``durable-v1``), seconds to wait for a new connection after the path is lost before
      the transfer fails (``--reconnect-grace``); the idle deadline is lengthened by as much.
      Why 120 s: a relay restart or a laptop changing networks takes seconds to a minute.
    * ``durable``: True (``--durable``): a sender runs the transfer over Dilation where both
      peers can; None: a sender uses transit, a receiver follows its sender's choice; False
      (``--no-durable``): transit only, and a receiver does not offer Dilation. Why a sender
      must ask: a dilated transfer still costs 1.8-2.4x transit's CPU and 1.7-2x its wall time
      (256 MiB and 1 GiB; Noise's ChaCha20-Poly1305 alone is ~0.55 s per GiB and side, and
      the reactor moves the bytes instead of the bulk pump: bench/README.md "The cost cut"),
      which would make a big transfer between two hilltops slower than between two official
      clients.
    """

    transit_helpers: Sequence[str] = ()
    no_listen: bool = False
    tor: bool = False  # every connection through Tor (the tor transport; no clear-net dials)
    transports: Sequence[str] | None = None  # None: every installed transport
    no_plugins: bool = False  # only the transports shipped with hilltop (--no-plugins)
    local_addresses: Sequence[str] | None = None
    settings: TransportSettings = field(default_factory=TransportSettings)
    plugin_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # told about each attempt as the race goes (the CLI's --json events); never changes it
    on_attempt: Callable[[AttemptNote], None] | None = None
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    reconnect_grace: float = DEFAULT_RECONNECT_GRACE
    durable: bool | None = None  # True: send over Dilation where both can; False: never

    def may_be_durable(self) -> bool:
        """This run allows a durable transfer (not ``--no-durable``). Every transport can
        carry it, ``--tor`` and ``webrtc`` too: Dilation's L2 races them as transit does
        (integration/test_tor_network.py and test_dilation_webrtc.py run a durable transfer
        across a forced reconnect over each)."""
        return self.durable is not False
