"""The ``relay`` transport's settings, and the config file's ``[relay]`` table.

Format::

    [relay]
    helpers = ["tcp:relay.example:4001,wss://relay.example/", "tcp:backup.example:4001"]
    ca-file = "/etc/hilltop/relay-ca.pem"

``helpers`` lists relays as ``--transit-helper`` takes them (one string per relay; endpoints
of one relay joined by commas); it is used when no ``--transit-helper`` flag and no
``WORMHOLE_TRANSIT_HELPER`` is given, and an empty list means no relay at all. ``ca-file``
names PEM CA certificates that ``wss://`` relays are checked against instead of the system's
trust roots (a private relay with its own CA); certificates are always checked.

Like :mod:`hilltop.transit.settings`, nothing here loads Twisted or the plugin machinery: the
CLI reads this table for every command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hilltop._values import value
from hilltop.errors import LocalError


@value
class RelaySettings:
    """What the ``relay`` transport reads from ``session.settings``.

    * ``ca_file``: PEM CA certificates for ``wss://`` relays, in place of the system's roots.
    """

    ca_file: str | None = None

    def ca_pem(self) -> bytes | None:
        """The CA file's bytes, None without one; a LocalError naming it when unreadable."""
        if self.ca_file is None:
            return None
        try:
            return Path(self.ca_file).read_bytes()
        except OSError as err:
            raise LocalError(f"cannot read the relay CA file {self.ca_file}: "
                             f"{err.strerror or err}") from None


@value
class RelayConfig:
    """The ``[relay]`` table: ``helpers`` is None when the table names none."""

    helpers: tuple[str, ...] | None = None
    settings: RelaySettings = RelaySettings()


def read_relay_config(path: Path | None = None) -> RelayConfig:
    """Read and check the ``[relay]`` table; a missing file or table means defaults."""
    from hilltop.config import config_path, read_table
    from hilltop.transit.relayaddress import helper_endpoints

    path = config_path() if path is None else path
    table: dict[str, Any] = read_table("relay", path) or {}
    unknown = sorted(set(table) - {"helpers", "ca-file"})
    if unknown:
        raise LocalError(f"config file {path}: [relay] has no setting {unknown[0]!r} "
                         "(known: helpers, ca-file)")
    helpers = table.get("helpers")
    if isinstance(helpers, str):
        helpers = [helpers]
    if helpers is not None:
        if not isinstance(helpers, list) or not all(isinstance(h, str) for h in helpers):
            raise LocalError(f"config file {path}: [relay] helpers must be a list of relays, "
                             'e.g. helpers = ["tcp:relay.example:4001"]')
        for helper in helpers:
            try:
                helper_endpoints(helper)
            except LocalError as err:
                raise LocalError(f"config file {path}: [relay] helpers: {err}") from None
    ca_file = table.get("ca-file")
    if ca_file is not None:
        if not isinstance(ca_file, str) or not ca_file:
            raise LocalError(f"config file {path}: [relay] ca-file must be a file name")
        ca = Path(ca_file).expanduser()
        if not ca.is_file():
            raise LocalError(f"config file {path}: [relay] ca-file {ca} is not a file")
        ca_file = str(ca)
    return RelayConfig(None if helpers is None else tuple(helpers), RelaySettings(ca_file))
