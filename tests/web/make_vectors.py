"""Known answers for the page's cryptography, computed by python-spake2 and hilltop's key schedule.

Run as ``python tests/web/make_vectors.py [SEED] > web/test/vectors.json``. The committed file
(seed 0) lets ``npm test`` run alone; ``tests/web/test_node.py`` writes a fresh file from a new
seed each run and hands it to the node tests, so the JavaScript is checked against the Python
libraries as installed, not against a file that could have gone stale. hilltop's own key
schedule is checked against official magic-wormhole 0.24 by tests/vectors/.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from nacl.secret import SecretBox
from spake2 import SPAKE2_Symmetric

from hilltop.rendezvous import key as wkey
from hilltop.transit import handshake, records

CODES = ["7-guitarist-revenge", "0-", "123-élan-Zürich", "4-a-b-c-d", "99-" + "x" * 200]


def _spake_case(rng: random.Random, code: str, appid: str) -> dict[str, Any]:
    entropy_a, entropy_b = rng.randbytes(64), rng.randbytes(64)
    a = SPAKE2_Symmetric(code.encode(), idSymmetric=appid.encode(),
                         entropy_f=lambda n: entropy_a[:n])
    b = SPAKE2_Symmetric(code.encode(), idSymmetric=appid.encode(),
                         entropy_f=lambda n: entropy_b[:n])
    msg_a, msg_b = a.start(), b.start()
    shared = a.finish(msg_b)
    assert shared == b.finish(msg_a)
    return {"code": code, "appid": appid, "entropy_a": entropy_a.hex(),
            "entropy_b": entropy_b.hex(), "msg_a": msg_a.hex(), "msg_b": msg_b.hex(),
            "key": shared.hex()}


def _schedule_case(rng: random.Random) -> dict[str, Any]:
    shared = rng.randbytes(32)
    side = rng.randbytes(5).hex()
    phases = ["pake", "version", "0", "1", str(rng.randrange(2, 1000))]
    nonce, plaintext = rng.randbytes(24), rng.randbytes(rng.randrange(0, 200))
    tk = wkey.transit_key(shared)
    send_key, receive_key = records.record_keys(tk, "sender")
    return {
        "key": shared.hex(), "side": side,
        "phase_keys": {p: wkey.derive_phase_key(shared, side, p).hex() for p in phases},
        "verifier": wkey.verifier(shared).hex(),
        "transit_key": tk.hex(),
        "sender_handshake": handshake.sender_handshake(tk).decode(),
        "receiver_handshake": handshake.receiver_handshake(tk).decode(),
        "record_sender_key": send_key.hex(), "record_receiver_key": receive_key.hex(),
        "seal": {"nonce": nonce.hex(), "plaintext": plaintext.hex(),
                 "sealed": bytes(SecretBox(shared).encrypt(plaintext, nonce)).hex()},
    }


def _records_case(rng: random.Random) -> dict[str, Any]:
    """Transit records both ways as PyNaCl's SecretBox seals them (counter nonces, big-endian,
    protocol notes §5.4), and the relay line, for the page's relay path."""
    tk = rng.randbytes(32)
    side = rng.randbytes(8).hex()
    send_key, receive_key = records.record_keys(tk, "sender")
    sizes = [0, 1, 300, rng.randrange(2, 2000)]

    def frames(key: bytes) -> tuple[list[str], str]:
        plaintexts = [rng.randbytes(n) for n in sizes]
        box = SecretBox(key)
        stream = b""
        for counter, plaintext in enumerate(plaintexts):
            sealed = bytes(box.encrypt(plaintext, counter.to_bytes(24, "big")))
            stream += len(sealed).to_bytes(4, "big") + sealed
        return [p.hex() for p in plaintexts], stream.hex()

    to_receiver, stream_sender = frames(send_key)
    to_sender, stream_receiver = frames(receive_key)
    return {"transit_key": tk.hex(), "side": side,
            "relay_line": handshake.relay_handshake(tk, side).decode(),
            "sender_plaintexts": to_receiver, "sender_stream": stream_sender,
            "receiver_plaintexts": to_sender, "receiver_stream": stream_receiver}


def vectors(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    codes = CODES + [f"{rng.randrange(1, 1000)}-{rng.randbytes(3).hex()}" for _ in range(5)]
    return {
        "seed": seed,
        "spake2": [_spake_case(rng, c, wkey.APPID) for c in codes]
        + [_spake_case(rng, "5-other-appid", "example.com/other")],
        "schedule": [_schedule_case(rng) for _ in range(4)],
        "records": [_records_case(rng) for _ in range(2)],
    }


if __name__ == "__main__":
    json.dump(vectors(int(sys.argv[1]) if len(sys.argv) > 1 else 0), sys.stdout, indent=1)
    sys.stdout.write("\n")
