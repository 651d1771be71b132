"""The one place hilltop reaches into aiortc's internals: bigger SCTP packets on local paths.

Why: aiortc runs SCTP, DTLS and ICE in Python, and its cost is per *packet*, not per byte:
each 1,160-byte DATA chunk is a Python object, a DTLS record (one OpenSSL call each way), a
UDP datagram through aioice, and a SACK back. That caps a data channel at about 7 MB/s on
this 2-core machine however the stream above it is tuned (measured with ``bench/webrtc.py``;
py-spy shows the time spread over those layers, none dominant). aiortc keeps packets at 1,189
bytes so they fit the minimum IPv6 MTU behind any NAT, and there is no setting for it.

On a *local* path (both ICE candidates are host candidates on this machine or a LAN, no
NAT and no TURN in between) that limit buys nothing: loopback carries 64 KiB datagrams and
a LAN reassembles IP fragments. There, :func:`widen` lets one packet carry up to
:data:`PACKET` bytes (a DTLS record holds at most 16 KiB), so the per-packet costs are paid
about 13 times less often.

What it touches, all checked against the aiortc version in :data:`TESTED` (another version
leaves everything untouched and the transport runs at aiortc's own packet size):

* ``rtcsctptransport.USERDATA_MAX_LENGTH`` (and the packet length it derives from): read at
  every send for fragmenting, the congestion window and the burst size. It is a module
  global, so the wider size holds for every association in the process; :func:`widen` is
  refcounted and :func:`narrow` restores aiortc's value when the last local session ends.
  hilltop's CLI runs one session per process.
* ``RTCSctpTransport._cwnd``: while wide packets are on, capped at :data:`FLIGHT` (aiortc
  grows it until a loss and ignores the peer's receive window; on a local path a loss is an
  overflowing socket buffer).
* ``RTCDtlsTransport._ssl``: wrapped so that reading decrypted data asks OpenSSL for up to
  64 KiB instead of aiortc's fixed 1,500 bytes (this changes nothing on the wire and is
  needed on *both* sides before either sends a wide packet, so it is installed when the
  transport starts, for every session), and so that taking the next outgoing datagram from
  OpenSSL does the same while wide packets are on (only then can a record exceed 1,500).

Both peers must agree before wide packets are sent: each says ``"wide": true`` in its
signalling message (see :mod:`hilltop.webrtc.signals`), and a side widens only if the peer did.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

TESTED = ("1.16.",)
"""aiortc versions whose internals this module was written against (prefixes)."""
PACKET = 16 * 1024 - 64
"""Largest SCTP packet on a local path: fits one DTLS record (16 KiB of plaintext)."""
READ = 64 * 1024
FLIGHT = 8 * PACKET
"""Most wide-packet bytes in flight: the peer's UDP socket buffer (Linux default 208 KiB,
counted with per-datagram overhead) holds about this many; beyond it, when the receiver is
slow to run, the kernel drops packets and SCTP stalls in retransmission timeouts."""

_state: dict[str, Any] = {"installed": False, "wide": 0, "narrow_value": None}


def supported() -> bool:
    """Whether this aiortc is one the tuning was written against."""
    try:
        from importlib.metadata import version

        return version("aiortc").startswith(TESTED)
    except Exception:  # noqa: BLE001 - not installed, odd metadata: just do not tune
        return False


class _WideReads:
    """A pyOpenSSL Connection whose ``recv`` reads up to :data:`READ` bytes of decrypted data
    (so a wide record is never cut), and whose ``bio_read`` (the next datagram to send) does
    so only while wide packets are on: otherwise aiortc's 1,500 bytes keep handshake flights
    in datagrams that cross any path."""

    def __init__(self, ssl: Any) -> None:
        self._wrapped = ssl

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)

    def recv(self, bufsiz: int, *args: Any) -> Any:
        return self._wrapped.recv(max(bufsiz, READ), *args)

    def bio_read(self, bufsiz: int) -> Any:
        return self._wrapped.bio_read(max(bufsiz, READ) if _state["wide"] else bufsiz)


def install() -> bool:
    """Make every DTLS transport read wide records (idempotent). False if not supported."""
    if _state["installed"]:
        return True
    if not supported():
        return False
    from aiortc import rtcdtlstransport

    cls = rtcdtlstransport.RTCDtlsTransport
    slot = "_hilltop_ssl"

    def get(self: Any) -> Any:
        return getattr(self, slot, None)

    def put(self: Any, value: Any) -> None:
        setattr(self, slot, None if value is None else _WideReads(value))

    setattr(cls, "_ssl", property(get, put))  # noqa: B010 (patching a class on purpose)

    # aiortc grows the congestion window until a loss (it ignores the peer's receive window);
    # with wide packets on a local path a loss is a full socket buffer, so cap the window
    from aiortc import rtcsctptransport

    cwnd_slot = "_hilltop_cwnd"

    def get_cwnd(self: Any) -> Any:
        return getattr(self, cwnd_slot)

    def put_cwnd(self: Any, value: Any) -> None:
        setattr(self, cwnd_slot, min(value, FLIGHT) if _state["wide"] else value)

    setattr(rtcsctptransport.RTCSctpTransport, "_cwnd", property(get_cwnd, put_cwnd))  # noqa: B010
    _state["installed"] = True
    return True


def widen() -> bool:
    """Use :data:`PACKET`-byte SCTP packets (call only when both peers agreed and the path is
    local); pair every True with one :func:`narrow`."""
    if not install():
        return False
    from aiortc import rtcsctptransport as sctp

    if _state["wide"] == 0:
        _state["narrow_value"] = sctp.USERDATA_MAX_LENGTH
        sctp.USERDATA_MAX_LENGTH = _userdata(PACKET, sctp)
    _state["wide"] += 1
    return True


def narrow() -> None:
    """Undo one :func:`widen`; the last one restores aiortc's packet size."""
    from aiortc import rtcsctptransport as sctp

    if _state["wide"] == 0:
        return
    _state["wide"] -= 1
    if _state["wide"] == 0:
        sctp.USERDATA_MAX_LENGTH = _state["narrow_value"]


def userdata_size() -> int:
    """The user data one SCTP DATA chunk carries right now (aiortc's 1,160 unless widened)."""
    from aiortc import rtcsctptransport as sctp

    return int(sctp.USERDATA_MAX_LENGTH)


def _userdata(packet: int, sctp: Any) -> int:
    """User data per DATA chunk for a packet of ``packet`` bytes, as aiortc computes it."""
    room = packet - sctp.SCTP_COMMON_HEADER_LENGTH - sctp.SCTP_DATA_CHUNK_HEADER_LENGTH
    return room // 4 * 4
