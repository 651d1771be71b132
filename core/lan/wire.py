"""What hilltop puts into DNS-SD (mDNS) records, and how it reads them back (pure).

Two kinds of service share one service type, told apart by the instance name:

* ``nameplate-<N>``: a sender in LAN mode (``wormhole send --lan``) runs a mailbox server and
  announces it under its **nameplate only**. The code's words are the PAKE password; they never
  go on the network, so someone who browses the LAN learns that a transfer is waiting, not how
  to join it.
* ``transit-<tag>``: the ``lan`` transport announces its transit listener under a tag derived
  from the transit key and the file-transfer role. Only the two peers know the key, so the tag
  links nothing to the code, and each side knows which tag the other side uses.

TXT records carry a format version and what a client needs beyond the SRV and address records
(the WebSocket path). Everything here is strings and bytes in, strings out: the I/O is in
:mod:`hilltop.lan.service`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping

from hilltop._values import value
from hilltop.errors import ProtocolError
from hilltop.hints._tcp import usable_address
from hilltop.rendezvous import codes, key

SERVICE_TYPE = "_wormhole._tcp.local."
"""Our own DNS-SD service type (the service name must be 1-15 characters)."""

TXT_VERSION = "1"
MAILBOX_PREFIX = "nameplate-"
TRANSIT_PREFIX = "transit-"
MAILBOX_PATH = "/v1"
TAG_BYTES = 8
TAG_PURPOSE = "hilltop-lan-v1 transit tag "
"""The HKDF purpose of a side's tag, followed by its role."""
"""A transit tag is 8 bytes of HKDF output: collisions between unrelated sessions do not happen."""

NAMEPLATE_RANGE = (10, 99)
"""Where LAN senders pick random nameplates: two digits, so codes stay short, and 90 choices so
two senders on one LAN rarely collide (a collision is detected by mDNS probing and retried)."""


# --- names ----------------------------------------------------------------------------------
def mailbox_instance(nameplate: str) -> str:
    """``nameplate-7``: the instance name a LAN sender announces."""
    return MAILBOX_PREFIX + codes.check_nameplate(nameplate)


def mailbox_service_name(nameplate: str) -> str:
    """``nameplate-7._wormhole._tcp.local.``: what a LAN receiver looks up."""
    return f"{mailbox_instance(nameplate)}.{SERVICE_TYPE}"


def nameplate_of(service_name: str) -> str | None:
    """The nameplate in a mailbox service name, or None for anything else."""
    if not service_name.endswith("." + SERVICE_TYPE):
        return None
    instance = service_name[: -len(SERVICE_TYPE) - 1]
    if not instance.startswith(MAILBOX_PREFIX):
        return None
    nameplate = instance[len(MAILBOX_PREFIX):]
    return nameplate if codes.is_nameplate(nameplate) else None


def transit_tag(transit_key: bytes, role: str) -> str:
    """The tag one side announces its transit listener under, as 16 hex digits.

    Derived with HKDF from the transit key (never from the code), separately per role, so each
    side can look for the other's tag and a listener never finds itself.
    """
    if role not in ("sender", "receiver"):
        raise ValueError(f"role must be 'sender' or 'receiver', not {role!r}")
    info = (TAG_PURPOSE + role).encode("ascii")
    return key.hkdf(transit_key, TAG_BYTES, info).hex()


def peer_role(role: str) -> str:
    return "receiver" if role == "sender" else "sender"


def transit_service_name(tag: str) -> str:
    if len(tag) != 2 * TAG_BYTES or any(c not in "0123456789abcdef" for c in tag):
        raise ValueError(f"a transit tag is {2 * TAG_BYTES} lowercase hex digits, not {tag!r}")
    return f"{TRANSIT_PREFIX}{tag}.{SERVICE_TYPE}"


# --- TXT records ----------------------------------------------------------------------------
@value
class MailboxTxt:
    """A LAN mailbox's TXT record, parsed: the nameplate it serves and its WebSocket path."""

    nameplate: str
    path: str = MAILBOX_PATH


def mailbox_txt(nameplate: str, path: str = MAILBOX_PATH) -> dict[str, str]:
    return {"v": TXT_VERSION, "kind": "mailbox", "nameplate": codes.check_nameplate(nameplate),
            "path": path}


def transit_txt() -> dict[str, str]:
    return {"v": TXT_VERSION, "kind": "transit"}


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def decode_txt(properties: Mapping[bytes | str, bytes | str | None]) -> dict[str, str]:
    """zeroconf's raw TXT properties as ``str -> str``; undecodable or empty values are dropped."""
    out: dict[str, str] = {}
    for k, v in properties.items():
        name, value = _text(k), _text(v)
        if name is not None and value is not None:
            out[name.lower()] = value
    return out


def parse_mailbox_txt(properties: Mapping[bytes | str, bytes | str | None],
                      expected_nameplate: str) -> MailboxTxt:
    """Check a found mailbox service's TXT record; unknown keys are ignored (newer senders).

    Raises :class:`ProtocolError` if it is not ours: another version, another kind, or a
    nameplate that differs from the one in its name.
    """
    txt = decode_txt(properties)
    if txt.get("v") != TXT_VERSION:
        raise ProtocolError(f"the LAN sender speaks announcement version {txt.get('v')!r}, "
                            f"we understand {TXT_VERSION!r}")
    if txt.get("kind", "mailbox") != "mailbox":
        raise ProtocolError(f"the LAN service is a {txt.get('kind')!r}, not a mailbox")
    if txt.get("nameplate", expected_nameplate) != expected_nameplate:
        raise ProtocolError("the LAN announcement's nameplate does not match its name")
    path = txt.get("path") or MAILBOX_PATH
    if not path.startswith("/"):
        raise ProtocolError(f"the LAN mailbox path {path!r} is not a path")
    return MailboxTxt(expected_nameplate, path)


# --- addresses and URLs -----------------------------------------------------------------------
def order_addresses(addresses: Iterable[str]) -> list[str]:
    """Usable addresses, de-duplicated, IPv4 first (the most likely to be routed on a LAN)."""
    seen: list[str] = []
    for a in addresses:
        if usable_address(a) and a not in seen:
            seen.append(a)
    return sorted(seen, key=lambda a: ipaddress.ip_address(a).version)


def mailbox_url(address: str, port: int, path: str = MAILBOX_PATH) -> str:
    host = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    return f"ws://{host}:{port}{path}"


def mailbox_urls(addresses: Iterable[str], port: int, path: str = MAILBOX_PATH) -> list[str]:
    return [mailbox_url(a, port, path) for a in order_addresses(addresses)]


# --- codes ------------------------------------------------------------------------------------
def pick_nameplate(random_bytes: Callable[[int], bytes], avoid: Iterable[str] = ()) -> str:
    """A random nameplate in :data:`NAMEPLATE_RANGE` that is not in ``avoid``."""
    low, high = NAMEPLATE_RANGE
    taken = set(avoid)
    free = [str(n) for n in range(low, high + 1) if str(n) not in taken]
    if not free:
        raise ProtocolError("every LAN nameplate is in use; try again later")
    return free[int.from_bytes(random_bytes(4), "big") % len(free)]


def make_code(nameplate: str, length: int, random_bytes: Callable[[int], bytes]) -> str:
    """A full code for a nameplate we chose ourselves (there is no server to allocate one)."""
    return codes.make_code(codes.check_nameplate(nameplate), random_bytes(length))
