"""The transport plugin contract: the only pluggy hook specification in hilltop.

A transport is a class registered in the ``hilltop.transports`` entry-point group (the built-in
direct-tcp and relay transports register exactly as a third party would).
:mod:`hilltop.transit.plugins`
instantiates it, checks its ``api`` attribute equals :data:`API_VERSION`, and registers the
instance. Hooks are called in the order listed here:

1. :func:`hilltop_transport_info` whenever hilltop needs to know what the transport is;
2. :func:`hilltop_transport_start` once per transit session, before hints are sent to the peer;
3. :func:`hilltop_transport_connect` once per peer hint the race decides to dial;
4. :func:`hilltop_transport_stop` once per session, always, even if start failed.

A transport does I/O only. It never touches JSON, crypto, the transit handshake or the choice
of winner: it hands back :class:`hilltop.streams.ByteStream` objects, and the runner runs the
same handshake over every stream. Implementations may accept fewer arguments than the spec
(pluggy's opt-in arguments), so specs can gain arguments without breaking plugins.

The user-facing guide, with the rules for failures, timeouts and cancellation, is
``docs/plugins.md``; ``tests/test_docs.py`` keeps it in step with this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pluggy

from hilltop._values import value
from hilltop.transit.settings import TransportSettings  # plugin API: TransitSession.settings

if TYPE_CHECKING:
    from hilltop.hints import Hint
    from hilltop.hints.relay_v1 import Hint as RelayHint
    from hilltop.streams import ByteStream

PROJECT = "hilltop"
API_VERSION = 1

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

Role = Literal["sender", "receiver"]
"""Our side of the file transfer. Defined once, here, because the plugin contract already
speaks of it (:attr:`TransitSession.role`) and the pure transit engines may import this
module without pulling in any I/O."""


@value
class TransportInfo:
    """What a transport is, for the race and for the ``wormhole transports`` command.

    * ``name``: short and unique, used by ``--transports`` (e.g. ``direct-tcp``).
    * ``hint_types``: the wire hint types it can dial and may contribute (``direct-tcp-v1``).
    * ``tier``: 0 dials at once; higher tiers are held back (relays: 2 s after direct dials,
      each (tier, priority) group 2 s after the one before; ``relay-v1`` endpoints instead
      start one after another as :mod:`hilltop.transit.relayplan` orders them).
    * ``start_delay``: extra seconds added to this transport's scheduled start.
    * ``relay``: streams go through a transit relay, so the handshake first writes the relay
      line; the hints this transport contributes are also dialled by ourselves.
    * ``inbound``: the hints it contributes invite the peer to connect *to us*, so streams
      may arrive through ``session.offer_inbound`` until the race's overall time-out. False
      for a transport whose hints only say "dial me the same way" (``webrtc``: both sides
      dial, nothing is accepted), so a race whose attempts have all failed can end at once
      instead of waiting 120 s for a connection that cannot come.
    * ``usable`` / ``why_not``: whether it can work right now, and if not, a one-line reason
      (e.g. "Tor is not running") for the user.
    * ``tor_note``: a few words for ``wormhole transports`` when ``--tor`` changes what the
      transport does (e.g. "off under --tor"); empty when it says nothing.
    """

    name: str
    hint_types: tuple[str, ...]
    tier: int = 0
    start_delay: float = 0.0
    relay: bool = False
    inbound: bool = True
    usable: bool = True
    why_not: str = ""
    description: str = ""
    tor_note: str = ""


class SideChannel(Protocol):
    """Messages to the peer's transport of the same name, over the encrypted mailbox.

    A message is a JSON object whose only key is ``hilltop-<name>``, encoded as UTF-8 bytes;
    :meth:`send` refuses anything else, :meth:`receive` hands each one over as it arrived
    (parse it as hostile input). Only hilltop peers read side channels: ask
    :meth:`SessionServices.peer_uses` before sending. Added in hilltop 0.x, plugin api 1.
    """

    def send(self, message: bytes) -> None: ...

    async def receive(self) -> bytes: ...


class SessionServices(Protocol):
    """What the transfer gives every transport, built-in or third-party, for one session.

    * ``derive(purpose, length)``: a secret for a named purpose, from this transfer's key:
      both peers derive the same bytes for the same purpose, unrelated bytes for another
      (HKDF-SHA256 of the transit key with the purpose as info). The key itself is never
      handed out.
    * ``side_channel(name)``: a :class:`SideChannel` over the encrypted mailbox.
    * ``peer_uses(transport)``: whether we and the peer both advertised ``transport``.
    * ``mailbox_url``: the mailbox server this transfer met at (None if unknown).
    * ``mailbox_local_address`` / ``seen_address``: the mailbox connection's local
      ``(host, port)`` and where the server saw it come from (None if unknown).
    * ``generation``: None for a file transfer; for the race of a Dilation generation its
      number (0, 1, ...), whose side channels are scoped to it
      (:mod:`hilltop.dilation.services`), so a plugin needs no change to carry Dilation.

    Added to plugin api 1 without a version change: the field is new and optional
    (``session.services`` is None outside a transfer, e.g. in a plugin's own tests).
    """

    mailbox_url: str | None
    mailbox_local_address: tuple[str, int] | None
    seen_address: tuple[str, int] | None
    generation: int | None

    def derive(self, purpose: str, length: int = 32) -> bytes: ...

    def side_channel(self, name: str) -> SideChannel: ...

    async def peer_uses(self, transport: str) -> bool: ...


@value(frozen=False)
class TransitSession:
    """Everything a transport may need during one transit session; passed to every hook.

    * ``reactor``: the Twisted reactor (asyncio-backed) to do I/O with.
    * ``role``: ``"sender"`` or ``"receiver"`` (the file-transfer role).
    * ``no_listen``: the user asked us not to accept inbound connections.
    * ``tor``: every outbound connection must go through Tor; transports that would reveal our
      address (listening, direct dials) must decline.
    * ``transit_helpers``: our configured relays (``--transit-helper`` or the ``[relay]``
      table), one ``relay-v1`` hint per relay with all its endpoints.
    * ``local_addresses``: addresses to advertise for listeners; None means discover them.
    * ``offer_inbound``: a listener calls this with each accepted :class:`ByteStream`.
    * ``options``: third-party plugins' own free-form settings, keyed by transport name
      (from ``TransitOptions.plugin_options``); built-in transports read none.
    * ``settings``: typed settings, one frozen dataclass per transport, looked up by type:
      ``session.settings.get(WebRTCSettings)`` (:mod:`hilltop.transit.settings`).
    * ``services``: the transfer's :class:`SessionServices` (side channel, derived keys, what
      the mailbox connection knows), the same for built-in and third-party transports; None
      outside a transfer.
    """

    reactor: Any
    role: Role
    no_listen: bool = False
    tor: bool = False
    transit_helpers: Sequence[RelayHint] = ()
    local_addresses: Sequence[str] | None = None
    offer_inbound: Callable[[ByteStream], None] = lambda stream: stream.close()
    options: dict[str, Any] = field(default_factory=dict)
    settings: TransportSettings = field(default_factory=TransportSettings)
    services: SessionServices | None = None


@hookspec
def hilltop_transport_info() -> TransportInfo:
    """Describe this transport.

    Called at load time (to check the plugin works and to apply ``--transports``), by the
    ``wormhole transports`` command, and by the runner to learn tiers. Must be cheap and must
    not raise; report problems through ``usable=False`` and ``why_not``.

    :return: one :class:`TransportInfo`.

    .. versionadded:: 0.1
    """


@hookspec
def hilltop_transport_start(session: TransitSession) -> Sequence[Hint] | Any:
    """Start listening (if the transport listens) and contribute hints for the peer.

    Called once per transit session, before our ``transit`` message is sent, so the hints can
    travel through the mailbox. A listener hands every accepted connection to
    ``session.offer_inbound``. The transport may decline by returning ``[]`` (``--no-listen``,
    ``--tor``, nothing configured). Every hint's ``type`` must be one of the transport's
    ``hint_types``. An implementation that raises, returns something that is not such a list,
    or whose Deferred does not fire within the start timeout (20 s) is reported once and
    left out of the session; the other transports still run.

    :param session: the :class:`TransitSession`.
    :return: a list of hints, or a Deferred that fires with one (e.g. an onion service that
        takes time to publish). Third-party hint types can use
        :class:`hilltop.hints.RawHint`.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def hilltop_transport_connect(hint: Hint, session: TransitSession) -> Any:
    """Dial one hint.

    Called by the race when it decides to start an attempt; stops at the first non-None result.
    Return None when the hint is not yours (another type, or ``session.tor`` forbids it).

    :param hint: one parsed hint (a ``relay-v1`` hint carries exactly one endpoint; a hint
        type hilltop does not know arrives as :class:`hilltop.hints.RawHint`).
    :param session: the :class:`TransitSession`.
    :return: a Deferred that fires with a connected :class:`hilltop.streams.ByteStream`, or
        fails. Cancelling the Deferred must abort the attempt and close anything half-open.
        Raising, hanging past the connect timeout (45 s) or firing with something that is not
        a ByteStream counts as a plugin fault: reported once, and the hint goes to the next
        transport that claims its type.

    .. versionadded:: 0.1
    """


@hookspec
def hilltop_transport_stop(session: TransitSession) -> Any:
    """Stop listeners and release what start acquired.

    Always called once per session after the race ends (won or lost) or is abandoned, also
    when start failed or was never reached. Must not close streams already handed out: the
    winning connection belongs to the caller, and the runner closes the losers itself.

    :param session: the :class:`TransitSession` (the same object start got).
    :return: None, or a Deferred that fires once everything is released (within the stop
        timeout, 10 s).

    .. versionadded:: 0.1
    """
