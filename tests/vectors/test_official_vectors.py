"""Golden values computed at test time by official magic-wormhole 0.24 in its own venv.

Set HILLTOP_PEERS_VENV to a venv with ``magic-wormhole==0.24.0`` installed (CI uses /tmp/peers).
One subprocess computes every vector from the inputs below; each test compares one family.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hilltop.rendezvous import key, wordlist
from hilltop.rendezvous.codes import words_from_bytes
from hilltop.transit import handshake

# Runs inside the official venv. Reads a JSON request on stdin, prints a JSON answer.
OFFICIAL_SCRIPT = r"""
import json, sys
from nacl.secret import SecretBox
from spake2 import SPAKE2_Symmetric
from wormhole import transit
from wormhole._key import derive_key, derive_phase_key
from wormhole._wordlist import PGPWordList, raw_words
from wormhole.util import HKDF, bytes_to_hexstr, dict_to_bytes, to_bytes

req = json.loads(sys.stdin.read())
h = bytes.fromhex
out = {"words": {k: v for k, v in raw_words.items()}}
out["phase"] = [derive_phase_key(h(k), s, p).hex() for k, s, p in req["phase"]]
out["derive"] = [derive_key(h(k), h(p), n).hex() for k, p, n in req["derive"]]
out["hkdf"] = [HKDF(h(k), n, CTXinfo=h(i)).hex() for k, n, i in req["hkdf"]]
out["seal"] = [bytes(SecretBox(h(k)).encrypt(h(m), h(n))).hex() for k, m, n in req["seal"]]
out["transit"] = []
for k in req["transit"]:
    tk = derive_key(h(k), b"lothar.com/wormhole/text-or-file-xfer/transit-key")
    out["transit"].append([
        tk.hex(),
        transit.build_sender_handshake(tk).hex(),
        transit.build_receiver_handshake(tk).hex(),
        transit.build_sided_relay_handshake(tk, "0123456789abcdef").hex(),
    ])
out["pake"] = []
for code, appid, ea, eb in req["pake"]:
    a = SPAKE2_Symmetric(to_bytes(code), idSymmetric=to_bytes(appid),
                         entropy_f=lambda n, e=h(ea): e[:n])
    b = SPAKE2_Symmetric(to_bytes(code), idSymmetric=to_bytes(appid),
                         entropy_f=lambda n, e=h(eb): e[:n])
    ma, mb = a.start(), b.start()
    body = dict_to_bytes({"pake_v1": bytes_to_hexstr(ma)})
    out["pake"].append([body.hex(), mb.hex(), a.finish(mb).hex(), b.finish(ma).hex()])
wl = PGPWordList()
out["completions"] = [sorted(wl.get_completions(p, n)) for p, n in req["completions"]]
print(json.dumps(out))
"""


def det(label: str, n: int = 32) -> bytes:
    """Reproducible "random" bytes, so a failure names the same inputs every run."""
    out = b""
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{label}/{counter}".encode()).digest()
        counter += 1
    return out[:n]


KEYS = [bytes(range(32)), bytes(32), b"\xff" * 32, *(det(f"key{i}") for i in range(5))]
PHASE_CASES = [
    (k.hex(), side, phase)
    for k in KEYS
    for side in ("abcdef0123", "0000000000", det("side" + k.hex(), 5).hex())
    for phase in ("pake", "version", "0", "1", "17", "dilate-0")
]
DERIVE_CASES = [(k.hex(), p.hex(), n) for k in KEYS[:4]
                for p, n in [(b"wormhole:verifier", 32), (b"app purpose \xc3\xa9", 16),
                             (b"dilation-v1", 32), (b"", 64)]]
HKDF_CASES = [(k.hex(), n, det(f"info{n}", n % 50).hex()) for k in KEYS[:3]
              for n in (1, 31, 32, 33, 64, 100, 255)]
SEAL_CASES = [(det(f"sk{i}").hex(), det(f"msg{i}", i * 37).hex(), det(f"nonce{i}", 24).hex())
              for i in range(6)]
PAKE_CASES = [
    ("7-guitarist-revenge", key.APPID, "01" * 64, "02" * 64),
    ("0-", key.APPID, det("ea0", 64).hex(), det("eb0", 64).hex()),
    ("123-Hello-WORLD", key.APPID, det("ea1", 64).hex(), det("eb1", 64).hex()),
    ("4-caf\u00e9-\u03bb", key.APPID, det("ea2", 64).hex(), det("eb2", 64).hex()),
    ("4-cafe\u0301-\u03bb", key.APPID, det("ea2", 64).hex(), det("eb2", 64).hex()),  # NFC
    ("99999-a-b-c-d-e", "example.com/app", det("ea3", 64).hex(), det("eb3", 64).hex()),
]
COMPLETION_PREFIXES = ["", "g", "guit", "guitarist-", "guitarist-r", "guitarist-revenge-",
                       "guitarist-revenge-a", "Custom-s", "zz"]
COMPLETION_CASES = [(p, n) for p in COMPLETION_PREFIXES for n in (1, 2, 3)]


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    venv = os.environ.get("HILLTOP_PEERS_VENV")
    if not venv:
        pytest.skip("set HILLTOP_PEERS_VENV to a venv with magic-wormhole 0.24 (e.g. /tmp/peers)")
    python = Path(venv) / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{python} not found (HILLTOP_PEERS_VENV={venv})")
    request = {"phase": PHASE_CASES, "derive": DERIVE_CASES, "hkdf": HKDF_CASES,
               "seal": SEAL_CASES, "transit": [k.hex() for k in KEYS], "pake": PAKE_CASES,
               "completions": COMPLETION_CASES}
    proc = subprocess.run(
        [str(python), "-I", "-c", OFFICIAL_SCRIPT], input=json.dumps(request),
        capture_output=True, text=True, timeout=120,
        cwd=tmp_path_factory.mktemp("official"),  # away from any checkout on sys.path
    )
    if proc.returncode != 0:
        pytest.fail(f"official venv failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def test_wordlist_matches(official: dict[str, Any]) -> None:
    theirs = {int(k, 16): (a.lower(), b.lower()) for k, (a, b) in official["words"].items()}
    assert len(theirs) == 256
    assert dict(enumerate(wordlist.table())) == theirs


def test_phase_keys_match(official: dict[str, Any]) -> None:
    ours = [key.derive_phase_key(bytes.fromhex(k), s, p).hex() for k, s, p in PHASE_CASES]
    assert ours == official["phase"]


def test_derive_key_matches(official: dict[str, Any]) -> None:
    ours = [key.derive_key(bytes.fromhex(k), bytes.fromhex(p), n).hex()
            for k, p, n in DERIVE_CASES]
    assert ours == official["derive"]


def test_hkdf_matches(official: dict[str, Any]) -> None:
    ours = [key.hkdf(bytes.fromhex(k), n, bytes.fromhex(i)).hex() for k, n, i in HKDF_CASES]
    assert ours == official["hkdf"]


def test_seal_matches(official: dict[str, Any]) -> None:
    ours = [key.seal(bytes.fromhex(k), bytes.fromhex(m), bytes.fromhex(n)).hex()
            for k, m, n in SEAL_CASES]
    assert ours == official["seal"]
    for (k, m, _), body in zip(SEAL_CASES, official["seal"], strict=True):
        assert key.open_sealed(bytes.fromhex(k), bytes.fromhex(body)).hex() == m


def test_transit_key_and_handshakes_match(official: dict[str, Any]) -> None:
    for k, (tk, sender, receiver, relay) in zip(KEYS, official["transit"], strict=True):
        ours = key.transit_key(k)
        assert ours.hex() == tk
        assert handshake.sender_handshake(ours).hex() == sender
        assert handshake.receiver_handshake(ours).hex() == receiver
        assert handshake.relay_handshake(ours, "0123456789abcdef").hex() == relay


@pytest.mark.parametrize("index", range(len(PAKE_CASES)))
def test_pake_matches(official: dict[str, Any], index: int) -> None:
    code, appid, ea, eb = PAKE_CASES[index]
    body_a, msg_b, key_a, key_b = official["pake"][index]
    a = key.Pake(code, appid, lambda n: bytes.fromhex(ea)[:n])
    b = key.Pake(code, appid, lambda n: bytes.fromhex(eb)[:n])
    assert a.start().hex() == body_a
    assert json.loads(b.start())["pake_v1"] == msg_b
    assert key_a == key_b
    assert a.finish(b.start()).hex() == key_a
    assert b.finish(a.start()).hex() == key_b


def test_completions_match(official: dict[str, Any]) -> None:
    """Official completes the words part only; we complete the whole line after "N-"."""
    from hilltop.rendezvous.codes import complete

    for (prefix, n), theirs in zip(COMPLETION_CASES, official["completions"], strict=True):
        ours = complete(f"7-{prefix}", [], n)
        assert ours == [f"7-{c}" for c in theirs], (prefix, n)


def test_generated_words_are_official_words(official: dict[str, Any]) -> None:
    odd = {b.lower() for _, b in official["words"].values()}
    even = {a.lower() for a, _ in official["words"].values()}
    words = words_from_bytes(bytes(range(256)))
    assert set(words[0::2]) <= odd and set(words[1::2]) <= even
