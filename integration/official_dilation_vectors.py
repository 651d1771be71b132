"""Known-answer bytes of official 0.24's Dilation L2 code (for
tests/core/dilation/test_dilation_l2.py).

Run with the official library (``magic-wormhole[dilate]==0.24.0``):
    PEERS_VENV/bin/python integration/official_dilation_vectors.py \
        > tests/core/dilation/dilation_vectors.json

It drives official's own ``_Framer``/``_Record`` classes (leader against follower, in memory)
with fixed ephemeral keys and records every byte each side writes, plus a few records sealed
afterwards, so hilltop's engine can be checked byte for byte without a network.
"""

import json
import sys

from noise.connection import Keypair
from twisted.internet.interfaces import ITransport
from wormhole._dilation.connection import Ack, Data, Open, Ping, _Framer, _Record
from wormhole._dilation.connector import (
    PROLOGUE_FOLLOWER,
    PROLOGUE_LEADER,
    build_noise,
    build_sided_relay_handshake,
)
from wormhole._dilation.roles import FOLLOWER, LEADER
from wormhole.util import HKDF
from zope.interface import implementer

WORMHOLE_KEY = bytes(range(32))
E_LEADER = bytes([0x11] * 32)
E_FOLLOWER = bytes([0x22] * 32)


@implementer(ITransport)
class Wire:
    def __init__(self):
        self.written = []

    def write(self, data):
        self.written.append(bytes(data))


def side(role, ephemeral, dkey):
    noise = build_noise()
    noise.set_psks(dkey)
    if role is LEADER:
        noise.set_as_initiator()
        out, inn = PROLOGUE_LEADER, PROLOGUE_FOLLOWER
    else:
        noise.set_as_responder()
        out, inn = PROLOGUE_FOLLOWER, PROLOGUE_LEADER
    noise.set_keypair_from_private_bytes(Keypair.EPHEMERAL, ephemeral)
    wire = Wire()
    rec = _Record(_Framer(wire, out, inn), noise, role)
    (rec.set_role_leader if role is LEADER else rec.set_role_follower)()
    rec.connectionMade()
    return wire, rec


def main():
    dkey = HKDF(WORMHOLE_KEY, 32, CTXinfo=b"dilation-v1")
    lw, leader = side(LEADER, E_LEADER, dkey)
    fw, follower = side(FOLLOWER, E_FOLLOWER, dkey)
    # exchange until quiet, as the connection would; the follower's KCM is sent by the
    # protocol object on its Handshake token, so send it here the same way
    from wormhole._dilation.connection import KCM, Handshake
    lpos = fpos = 0
    for _ in range(5):
        for tok in list(follower.add_and_unframe(b"".join(lw.written[lpos:]))):
            if isinstance(tok, Handshake):
                follower.send_record(KCM())
        lpos = len(lw.written)
        list(leader.add_and_unframe(b"".join(fw.written[fpos:])))
        fpos = len(fw.written)
    leader.send_record(KCM())
    leader_hs = b"".join(lw.written)
    follower_hs = b"".join(fw.written)
    n_l, n_f = len(lw.written), len(fw.written)
    leader.send_record(Open(256, 513, "proto"))
    leader.send_record(Data(257, 513, b"hello dilation"))
    leader.send_record(Data(258, 513, bytes(i % 251 for i in range(70000))))
    follower.send_record(Ack(258))
    follower.send_record(Ping(b"\x01\x02\x03\x04"))
    json.dump({
        "wormhole_key": WORMHOLE_KEY.hex(),
        "dilation_key": dkey.hex(),
        "ephemeral_leader": E_LEADER.hex(),
        "ephemeral_follower": E_FOLLOWER.hex(),
        "relay_line": build_sided_relay_handshake(dkey, "0123456789abcdef").decode(),
        "leader_handshake": leader_hs.hex(),
        "follower_handshake": follower_hs.hex(),
        "leader_records": b"".join(lw.written[n_l:]).hex(),
        "follower_records": b"".join(fw.written[n_f:]).hex(),
    }, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
