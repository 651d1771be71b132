"""Server-reflexive ICE candidates from the address the mailbox server saw, with no STUN server.

Why: a NAT that keeps source ports (Linux masquerade, most home routers) maps a UDP socket's
port to the same public port, so "our public IP (from ``welcome["your-address"]``), the host
candidate's port" is the candidate a STUN server would have reported. aiortc gathers only
from the servers it is given, so the candidate is added to the SDP we send: the peer pairs
with it, and our host socket answers its checks from behind the NAT as from a STUN-learnt
address. A NAT that remaps ports makes the candidate useless, nothing worse.
"""

from __future__ import annotations

import ipaddress

SRFLX_PREFERENCE = 100  # RFC 8445's recommended type preference for server-reflexive


def with_reflexive(sdp: str, public_host: str) -> str:
    """``sdp`` plus one ``srflx`` candidate at ``public_host`` for each IPv4 UDP host
    candidate (same port), right after it; unchanged when ``public_host`` is no IPv4 address
    or already a candidate."""
    try:
        if ipaddress.ip_address(public_host).version != 4:
            return sdp
    except ValueError:
        return sdp
    eol = "\r\n" if "\r\n" in sdp else "\n"
    lines = sdp.split(eol)
    if any((f := _fields(line)) is not None and f[4] == public_host for line in lines):
        return sdp
    out: list[str] = []
    for line in lines:
        out.append(line)
        f = _fields(line)
        if not f or f[2].lower() != "udp" or f[7] != "host" or ":" in f[4]:
            continue
        foundation, component, host, port = f[0][len("a=candidate:"):], f[1], f[4], f[5]
        priority = (SRFLX_PREFERENCE << 24) + (65535 << 8) + (256 - int(component))
        out.append(f"a=candidate:r{foundation} {component} udp {priority} {public_host} {port}"
                   f" typ srflx raddr {host} rport {port}")
    return eol.join(out)


def _fields(line: str) -> list[str] | None:
    """The fields of an ``a=candidate:`` line with its type at index 7, or None."""
    if not line.startswith("a=candidate:"):
        return None
    f = line.split()
    if len(f) < 8 or f[6] != "typ" or not f[1].isdigit() or not f[5].isdigit():
        return None
    return f
