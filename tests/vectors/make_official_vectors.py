"""Known answers of official magic-wormhole 0.24 for hilltop's key schedule, written once to a file.

Run by hand with hilltop's venv, naming a venv that has ``magic-wormhole==0.24.0`` (``.ci/run``
builds ``.peers-venv``), after changing an input below:
    .venv/bin/python tests/vectors/make_official_vectors.py .peers-venv \
        > tests/vectors/official_vectors.json

The inputs are fixed here; the official library computes every answer in one subprocess (its
own venv, away from any checkout). The file holds both, so ``test_official_vectors.py`` checks
hilltop without the official venv; with ``HILLTOP_PEERS_VENV`` set it also reruns this and
checks the file is still what official writes.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hilltop.rendezvous import key

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
import wormhole
out["version"] = wormhole.__version__
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


def request() -> dict[str, Any]:
    """The inputs, as JSON types (tuples become lists), in the shape the file stores them."""
    cases: dict[str, Any] = {
        "phase": PHASE_CASES, "derive": DERIVE_CASES, "hkdf": HKDF_CASES, "seal": SEAL_CASES,
        "transit": [k.hex() for k in KEYS], "pake": PAKE_CASES, "completions": COMPLETION_CASES}
    loaded: dict[str, Any] = json.loads(json.dumps(cases))
    return loaded


def official_answers(python: Path) -> dict[str, Any]:
    """Every answer for request(), computed by the official library under ``python``."""
    with tempfile.TemporaryDirectory() as away:  # away from any checkout on sys.path
        proc = subprocess.run(
            [str(python), "-I", "-c", OFFICIAL_SCRIPT], input=json.dumps(request()),
            capture_output=True, text=True, timeout=120, cwd=away, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{python} failed to compute the vectors:\n{proc.stderr}")
    answers: dict[str, Any] = json.loads(proc.stdout)
    return answers


def vectors(python: Path) -> dict[str, Any]:
    answers = official_answers(python)
    return {"official_version": answers.pop("version"), "request": request(),
            "answers": answers}


def dump(data: dict[str, Any]) -> str:
    """JSON with one case per line, so a regenerated file diffs case by case."""
    def block(value: Any, indent: str) -> str:
        if isinstance(value, dict) and len(indent) < 3:
            rows = [f"{indent} {json.dumps(k)}: {block(v, indent + ' ')}" for k, v in value.items()]
            return "{\n" + ",\n".join(rows) + f"\n{indent}}}"
        if isinstance(value, list) and len(indent) < 3:
            rows = [f"{indent} {json.dumps(v, ensure_ascii=False)}" for v in value]
            return "[\n" + ",\n".join(rows) + f"\n{indent}]"
        return json.dumps(value, ensure_ascii=False)
    return block(data, "") + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_official_vectors.py PEERS_VENV > tests/vectors/official_vectors.json")
    sys.stdout.write(dump(vectors(Path(sys.argv[1]) / "bin" / "python")))
