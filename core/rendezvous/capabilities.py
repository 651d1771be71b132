"""What we advertise in the ``version`` message, and what a peer's advertisement lets us do.

Decision (the one every extension builds on): hilltop puts its extensions under its own key,

    app_versions = {"hilltop": {"version": "0.1.0", "transports": [...], "features": [...]}}

and treats a peer whose ``app_versions`` lacks a well-formed ``"hilltop"`` entry as a plain
v1 peer. The official CLI (0.24) and wormhole-william both send ``{}`` and both accept a
non-empty dict from us, so the advertisement costs nothing on the wire. Towards a v1 peer we
use v1 rules only: file-transfer v1 messages, ``direct-tcp-v1``/``relay-v1`` hints, one
offer per code. An extension (LAN, WebRTC, several files, ...) is used only when *both* sides
list it; its name in ``features`` or ``transports`` is the whole negotiation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hilltop._values import value

APP_KEY = "hilltop"

BIG_RECORDS = "big-records"
"""Feature: "I read transit records of any size" (official peers do too, but never say so)."""
UNHASHED_ACK = "ack-without-sha256"
"""Feature: "between us, skip the whole-file SHA-256; my final ack will not carry one".

Why it is safe: every transit record is a secretbox (authenticated encryption) under a key
only the two peers hold, with a nonce that must be exactly the next counter, and the offer
fixes the total size. A tampered, reordered, replayed, dropped or truncated record already
ends the transfer, so the hash only re-checked what the records check; it cost ~0.6 s of CPU
per GiB on each side. Official peers treat the ack's ``sha256`` as optional; they never list
this feature, so towards them we hash and send it exactly as before.
"""
AES_RECORDS = "aes256gcm-records"
"""Feature: "I can seal transit records with AES-256-GCM (hardware AES here)".

Between two peers that both list it, records use libsodium's AES-256-GCM instead of XSalsa20-
Poly1305 secretbox: same frame layout, same nonce counter, keys derived apart from the
secretbox ones. Both are authenticated encryption with 256-bit keys; AES-GCM runs ~6x faster
where the CPU has AES instructions (0.12 s against 0.72 s per GiB measured here), and
secretbox was the largest cost left per side. Only advertised where libsodium reports the
hardware support, so a peer without it never agrees to it.
"""

STREAM = "stream-v1"
"""Feature: "I send and receive streams of unknown length" (``wormhole send -`` from a pipe).

A ``hilltop-stream`` offer, then data records, an empty end-marker record and a trailer with
the length and SHA-256 (:mod:`hilltop.transfer.streamcodec`; docs/protocol-extensions.md).
Official and wormhole-william receivers need the size in the offer, so toward them a stream
is refused with a message saying why, before any byte is read.
"""

RESUME = "resume-v1"
"""Feature: "I keep an interrupted file receive and can continue it from a new code".

A receiver keeps its hidden partial plus a record of the offer; when a later sender offers
the same name and size, the receiver's ``answer`` asks to continue at an offset with a fresh
salt, the sender proves over transit that it has the same prefix, and only the rest crosses
(:mod:`hilltop.transfer.resume`, docs/protocol-extensions.md). Official peers never list it,
so towards them a receive starts at zero and an interrupted one removes its partial.
"""

FILES = "files-v1"
"""Feature: "I send and receive several files and folders under one code".

A ``hilltop-files`` offer lists every entry (relative name, size, mode as a wish), then the
files' bytes follow back to back over one transit connection
(:mod:`hilltop.transfer.manifest`, docs/protocol-extensions.md). Toward a peer without it
(official, wormhole-william) the same command sends one folder (a zip) instead.
"""

DURABLE = "durable-v1"
"""Feature: "I run file transfers over Dilation when you can dilate too".

Between two peers that list it and whose ``version`` messages both carry ``can-dilate``, a
file, folder or several-files transfer runs on a Dilation subchannel instead of a transit
connection (:mod:`hilltop.dilation.channel`): a lost path is replaced by the next generation
and the transfer goes on from the last acknowledged byte, within a grace
(``--reconnect-grace``). A stream stays on transit until Dilation has inbound flow control.
Listed only where the ``dilate`` extra (noiseprotocol) is installed; official and
wormhole-william peers never list it and get transit as before.
"""

INLINE = "inline-file-v1"
"""Feature: "a small file may ride in its offer, through the mailbox".

Between two peers that list it, a single file of at most
:data:`hilltop.transfer.offers.INLINE_LIMIT` bytes whose sender did not restrict its transit
(:func:`hilltop.transfer.inline.allowed_by`) is sent as a ``hilltop-inline-file`` offer
carrying its bytes, and acknowledged with a ``hilltop-inline-ack`` answer once saved and
synced (docs/protocol-extensions.md). Why: between two hilltop peers a 3-byte receive spent
~130 ms after the key on the transit warm-up, hints, race and handshake, a text ~12 ms
(bench/README.md); the bytes are encrypted like a text message, so nothing is given up.
Official and wormhole-william peers never list it: they get transit as before.
"""


def dilation_available() -> bool:
    """The ``dilate`` extra is installed (the Noise library Dilation's L2 needs)."""
    import importlib.util

    return importlib.util.find_spec("noise") is not None


def _aes256gcm_available() -> bool:
    try:
        import nacl.bindings  # noqa: F401 - runs sodium_init(), which detects the CPU features
        from nacl._sodium import lib
    except ImportError:  # pragma: no cover - PyNaCl always ships its libsodium
        return False
    return bool(lib.crypto_aead_aes256gcm_is_available())


TRANSIT_FOLLOWS = "transit-follows"
"""Announcement, not a negotiated feature: "my offer will need a transit connection".

A sender of a file, folder, several files or a stream lists it; its receiver may then load
its transit machinery as soon as the key is confirmed, while the sender loads its own,
instead of after the offer arrives (``hilltop.transfer.session.warm_up_transit``; both took
~40-60 ms one after the other, bench/README.md "Time budget"). A text sender never lists it,
so a text receiver imports no transit code. Official peers never list it: their receivers
load at the offer, as before.
"""

FEATURES: tuple[str, ...] = (BIG_RECORDS, UNHASHED_ACK, STREAM, RESUME, FILES, INLINE) + (
    (AES_RECORDS,) if _aes256gcm_available() else ()) + (
    (DURABLE,) if dilation_available() else ())
"""Features this build advertises by default."""

WEBRTC = "webrtc"
"""Transport extension: WebRTC data channels, signalled through the mailbox (both must list it)."""


def extension_transports(allowed: Iterable[str] | None = None) -> list[str]:
    """Extension transports this installation can run and ``allowed`` (None: any) lets us
    use, for the default advertisement. Advertising one makes a hilltop peer start it, so
    leave out what this run will not use (``--transports``; under ``--tor`` allow none:
    WebRTC's ICE would reveal our addresses)."""
    import importlib.util

    ok = allowed is None or WEBRTC in allowed
    return [WEBRTC] if ok and importlib.util.find_spec("aiortc") is not None else []


def default_advertisement(version: str, allowed: Iterable[str] | None = None, *,
                          transit_follows: bool = False, inline: bool = True
                          ) -> dict[str, Any]:
    """What this installation advertises unless the caller says otherwise (a sender that
    will need transit adds :data:`TRANSIT_FOLLOWS`; a run whose transit the user restricted
    leaves out :data:`INLINE`, so a tiny file still takes the transport asked for)."""
    features = tuple(f for f in FEATURES if inline or f != INLINE)
    return advertisement(version, extension_transports(allowed),
                         features + ((TRANSIT_FOLLOWS,) if transit_follows else ()))


def advertisement(version: str, transports: Iterable[str], features: Iterable[str]
                  ) -> dict[str, Any]:
    """The ``app_versions`` dict our ``version`` message carries."""
    return {
        APP_KEY: {
            "version": version,
            "transports": sorted(set(transports)),
            "features": sorted(set(features)),
        }
    }


@value
class PeerCapabilities:
    """What the peer told us. ``hilltop_version is None`` means a v1 (official or Go) peer."""

    hilltop_version: str | None
    transports: frozenset[str]
    features: frozenset[str]

    @property
    def is_v1_only(self) -> bool:
        return self.hilltop_version is None

    def shared_features(self, ours: Iterable[str]) -> frozenset[str]:
        return self.features & frozenset(ours)

    def shared_transports(self, ours: Iterable[str]) -> frozenset[str]:
        return self.transports & frozenset(ours)


V1_PEER = PeerCapabilities(None, frozenset(), frozenset())


def _names(value: Any) -> frozenset[str]:
    if not isinstance(value, list):
        return frozenset()
    return frozenset(v for v in value if isinstance(v, str))


def from_app_versions(app_versions: Any) -> PeerCapabilities:
    """Read a peer's ``app_versions``; anything malformed degrades to :data:`V1_PEER`."""
    if not isinstance(app_versions, dict):
        return V1_PEER
    entry = app_versions.get(APP_KEY)
    if not isinstance(entry, dict) or not isinstance(entry.get("version"), str):
        return V1_PEER
    return PeerCapabilities(
        entry["version"], _names(entry.get("transports")), _names(entry.get("features"))
    )
