"""TCP hole punching: where our public address comes from, and when we may punch at all.

The ``tcp-punch`` transport (:mod:`hilltop.transports.punch`) reads :class:`PunchSettings`.
Both sides dial each other's public address at about the same time, each *from the local
port the mailbox connection uses*: a NAT that keeps source ports (Linux masquerade, most home
routers) then sends both SYNs from the public port the other side was told, each NAT sees
its own host's SYN leave before the peer's arrives, and TCP's simultaneous open joins the two
dials into one connection (Ford, Srisuresh and Kegel, 2005, section 4). A symmetric NAT maps
each destination to a new port, so its side's punch misses and the relay carries the bytes.

The public address comes from the mailbox server's ``welcome["your-address"]`` (server 0.8);
where it gives none, from a STUN server the user configured (``--stun`` or the config file),
asked over TCP from that same port. No STUN host is contacted unless configured.
"""

from __future__ import annotations

from urllib.parse import urlparse

from hilltop._values import value
from hilltop.errors import LocalError
from hilltop.hints._tcp import usable_address

Endpoint = tuple[str, int]

STUN_PORT = 3478


@value
class PunchSettings:
    """What the ``tcp-punch`` transport reads from ``session.settings``.

    * ``public``: where the mailbox server saw our connection come from, if it said.
    * ``local``: the mailbox connection's local address; the punch dials from its port.
    * ``stun``: STUN servers (``host``, ``port``) to ask over TCP when ``public`` is None.
    """

    public: Endpoint | None = None
    local: Endpoint | None = None
    stun: tuple[Endpoint, ...] = ()


def may_punch(no_listen: bool, tor: bool) -> bool:
    """``--no-listen`` promises the peer learns no address of ours and ``--tor`` that nothing
    leaves but through Tor: under either, no punch hint, no punch dial, no STUN query."""
    return not (no_listen or tor)


def advertised(public: Endpoint | None) -> Endpoint | None:
    """The public address worth a hint: not loopback, link-local or unspecified (a mailbox on
    this machine sees ``127.0.0.1``, which no peer elsewhere can dial)."""
    if public is None or not usable_address(public[0]):
        return None
    return public


def same_family(a: str, b: str) -> bool:
    """Both IPv6 or both IPv4: a punch dials from the mailbox socket's address."""
    return (":" in a) == (":" in b)


def stun_endpoint(url: str) -> Endpoint:
    """``stun:HOST[:PORT]`` (IPv6 host in brackets) -> (host, port); the port defaults to
    3478. A ``?transport=`` suffix is ignored: the punch always asks over TCP."""
    scheme, _, rest = url.partition(":")
    parsed = urlparse("x://" + rest.split("?", 1)[0])
    try:
        port = parsed.port
    except ValueError:
        port = None
        parsed = urlparse("x://")
    if scheme != "stun" or not parsed.hostname or rest.startswith("//"):
        raise LocalError(f"not a STUN URL: {url!r} (expected e.g. stun:stun.example.org:3478)")
    return parsed.hostname, port or STUN_PORT
