"""How to reach Tor, and what the ``tor`` transports are handed: plain frozen dataclasses.

Kept apart from :mod:`hilltop.tor.manager` (Twisted, and txtorcon when used) so that reading
the ``--tor`` flags costs a command nothing until Tor is really wanted.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

from hilltop._values import value
from hilltop.errors import LocalError

if TYPE_CHECKING:
    from hilltop.tor.manager import TorManager


@value
class TorSettings:
    """How to find Tor (the ``--launch-tor``, ``--tor-control-port``, ``--tor-socks`` flags)."""

    launch: bool = False
    control_port: str | None = None  # a Twisted client endpoint string, e.g. tcp:127.0.0.1:9051
    socks: str | None = None  # HOST:PORT of a SOCKS-only Tor


def parse_socks(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise LocalError(f"--tor-socks wants HOST:PORT, not {text!r}")
    return host, int(port)


@value
class TorTransitSettings:
    """What the ``tor`` and ``tor-relay`` transports read from ``session.settings``.

    * ``manager``: a running :class:`~hilltop.tor.manager.TorManager` to share (the CLI's,
      which also carries the mailbox connection, so one control connection serves both); the
      transports never close it.
    * ``find``: without a manager, the transports make their own from these settings for the
      session, and close it when the session stops.
    """

    manager: TorManager | None = field(default=None, compare=False)
    find: TorSettings = TorSettings()
