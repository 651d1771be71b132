"""The ``webrtc`` transport's settings: ICE servers from the flags and the config file.

Nothing here imports aiortc: the CLI builds these settings for every ``send`` and ``receive``,
so they stay plain frozen dataclasses that the transport turns into aiortc's types itself.
With no server configured the list is empty and only host candidates are used; no public
STUN server is ever contacted unasked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from hilltop._values import value
from hilltop.errors import HilltopError

if TYPE_CHECKING:
    from hilltop.webrtc.channel import Signalling


JOIN_AFTER = 0.5
"""WebRTC joins a race half a second after it began, so a direct connection that wins first
(the usual case: on loopback and LANs it connects in tens of ms) never pays for aiortc. Its
import alone took 0.3-0.6 s of CPU and ~28 MB, and it ran beside every transfer between two
hilltops with the extra installed: a 3-byte receive 1.26 s and 82 MB against 0.89 s and
53 MB without the extra (bench/README.md, "Time budget"). The cost: where WebRTC is needed
(both peers behind NAT) it connects that much later."""


@value
class IceServer:
    """One STUN or TURN server (the fields of WebRTC's ``RTCIceServer``)."""

    urls: str
    username: str | None = None
    credential: str | None = field(default=None, repr=False)  # a password: never logged


@value
class WebRTCSettings:
    """What the ``webrtc`` transport reads from ``session.settings``.

    * ``ice_servers``: STUN first, then TURN (``--stun``/``--turn`` or ``[webrtc]``).
    * ``relay_only``: use TURN relay candidates only (``--webrtc-relay-only``).
    * ``signalling``: the channel to the peer, set per transfer by
      :func:`hilltop.transfer.session.make_runner`; without one the transport stays idle.
    * ``join_after``: seconds the transport waits, once the race dials the peer's
      ``webrtc-v1`` hint, before it imports aiortc and negotiates (:data:`JOIN_AFTER`).
    """

    ice_servers: tuple[IceServer, ...] = ()
    relay_only: bool = False
    join_after: float = JOIN_AFTER
    signalling: Signalling | None = field(default=None, compare=False)

    @property
    def has_turn(self) -> bool:
        """A TURN server is configured, so relay candidates can be gathered."""
        return any(urlparse(s.urls).scheme in ("turn", "turns") for s in self.ice_servers)

    def under_no_listen(self, no_listen: bool) -> WebRTCSettings | None:
        """The settings a session may use, or None when the transport must stay out of it.

        ``--no-listen`` promises that no local address reaches the peer (users choose it to
        force the relay and keep their address private), and ICE host and server-reflexive
        candidates carry exactly those. So under it we offer TURN relay candidates only,
        which aioice gathers from the TURN server alone and whose related address it hides
        (0.0.0.0); with no TURN server we decline: no hint, no signal, no peer connection.
        """
        if not no_listen or self.relay_only:
            return self
        return replace(self, relay_only=True) if self.has_turn else None


def stun_server(url: str) -> IceServer:
    """``stun:HOST[:PORT]`` as an ICE server (``urls`` only)."""
    _check_url(url, ("stun",))
    return IceServer(url)


def turn_server(url: str, username: str | None, credential: str | None) -> IceServer:
    """``turn:HOST[:PORT][?transport=udp|tcp]`` (or ``turns:``) with long-term credentials."""
    _check_url(url, ("turn", "turns"))
    if not username or credential is None:
        raise HilltopError(f"TURN server {url} needs a user name and a password "
                           "(--turn-user, --turn-password or the config file)")
    return IceServer(url, username, credential)


def _check_url(url: str, schemes: tuple[str, ...]) -> None:
    scheme, _, rest = url.partition(":")
    host = rest.split("?")[0]
    if scheme not in schemes or not host or host.startswith("//"):
        raise HilltopError(f"not a {'/'.join(schemes)} URL: {url!r} "
                           f"(expected e.g. {schemes[0]}:example.org:3478)")
    if urlparse("x://" + host).port is None and ":" in host.rsplit("]", 1)[-1]:
        raise HilltopError(f"bad port in {url!r}")


def ice_servers(stun: Sequence[str], turn: Sequence[str], username: str | None,
                credential: str | None) -> tuple[IceServer, ...]:
    """The configured servers, STUN first. Empty means host candidates only."""
    servers = [stun_server(u) for u in stun if u]
    servers += [turn_server(u, username, credential) for u in turn if u]
    return tuple(servers)


def config_servers(path: Path | None = None) -> dict[str, Any]:
    """The ``[webrtc]`` table of the config file (``stun``, ``turn``: lists of URLs,
    ``turn-user``, ``turn-password``, ``relay-only``); a missing file or table means none."""
    from hilltop.config import read_table

    return read_table("webrtc", path) or {}


def from_flags(stun: Sequence[str], turn: Sequence[str], username: str | None,
               credential: str | None, relay_only: bool = False,
               config: Mapping[str, Any] | None = None) -> WebRTCSettings:
    """The settings from the command line and the ``[webrtc]`` table: flags win over the
    config file. The signalling channel is added per transfer, not here."""
    config = config or {}

    def urls(key: str) -> list[str]:
        value = config.get(key, [])
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise HilltopError(f"config file: [webrtc] {key} must be a URL or a list of URLs")
        return value

    def text(key: str) -> str | None:
        value = config.get(key)
        if value is not None and not isinstance(value, str):
            raise HilltopError(f"config file: [webrtc] {key} must be a string")
        return value

    if not isinstance(config.get("relay-only", False), bool):
        raise HilltopError("config file: [webrtc] relay-only must be true or false")
    stun = stun or urls("stun")
    turn = turn or urls("turn")
    username = username or text("turn-user")
    credential = credential if credential is not None else text("turn-password")
    relay_only = relay_only or config.get("relay-only", False)
    if relay_only and not turn:
        raise HilltopError("webrtc relay-only needs a TURN server (--turn or [webrtc] turn)")
    return WebRTCSettings(ice_servers(stun, turn, username, credential), relay_only)
