"""hilltop's key schedule against answers official magic-wormhole 0.24 computed.

The answers are checked in (official_vectors.json, written by make_official_vectors.py with the
official library), so these run everywhere. With HILLTOP_PEERS_VENV naming a venv with
``magic-wormhole==0.24.0``, test_file_is_what_official_computes also reruns the official side and
checks the file has not gone stale; that is the only test that needs the venv.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from make_official_vectors import official_answers, request

from hilltop.rendezvous import key, wordlist
from hilltop.rendezvous.codes import complete, words_from_bytes
from hilltop.transit import handshake

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).parent / "official_vectors.json").read_text(encoding="utf-8"))
CASES: dict[str, Any] = VECTORS["request"]
OFFICIAL: dict[str, Any] = VECTORS["answers"]


def test_file_covers_the_current_inputs() -> None:
    """An input edited in make_official_vectors.py without rerunning it fails here."""
    assert VECTORS["official_version"] == "0.24.0"
    assert request() == CASES
    for family in ("phase", "derive", "hkdf", "seal", "transit", "pake", "completions"):
        assert len(OFFICIAL[family]) == len(CASES[family]) > 0, family


def test_file_is_what_official_computes() -> None:
    venv = os.environ.get("HILLTOP_PEERS_VENV")
    if not venv:
        pytest.skip("set HILLTOP_PEERS_VENV to a venv with magic-wormhole 0.24 (e.g. .peers-venv)")
    python = Path(venv) / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{python} not found (HILLTOP_PEERS_VENV={venv})")
    live = official_answers(python)
    assert live.pop("version") == VECTORS["official_version"]
    assert live == OFFICIAL


def test_wordlist_matches() -> None:
    theirs = {int(k, 16): (a.lower(), b.lower()) for k, (a, b) in OFFICIAL["words"].items()}
    assert len(theirs) == 256
    assert dict(enumerate(wordlist.table())) == theirs


def test_phase_keys_match() -> None:
    ours = [key.derive_phase_key(bytes.fromhex(k), s, p).hex() for k, s, p in CASES["phase"]]
    assert ours == OFFICIAL["phase"]


def test_derive_key_matches() -> None:
    ours = [key.derive_key(bytes.fromhex(k), bytes.fromhex(p), n).hex()
            for k, p, n in CASES["derive"]]
    assert ours == OFFICIAL["derive"]


def test_hkdf_matches() -> None:
    ours = [key.hkdf(bytes.fromhex(k), n, bytes.fromhex(i)).hex() for k, n, i in CASES["hkdf"]]
    assert ours == OFFICIAL["hkdf"]


def test_seal_matches() -> None:
    ours = [key.seal(bytes.fromhex(k), bytes.fromhex(m), bytes.fromhex(n)).hex()
            for k, m, n in CASES["seal"]]
    assert ours == OFFICIAL["seal"]
    for (k, m, _), body in zip(CASES["seal"], OFFICIAL["seal"], strict=True):
        assert key.open_sealed(bytes.fromhex(k), bytes.fromhex(body)).hex() == m


def test_transit_key_and_handshakes_match() -> None:
    for k, (tk, sender, receiver, relay) in zip(CASES["transit"], OFFICIAL["transit"],
                                                strict=True):
        ours = key.transit_key(bytes.fromhex(k))
        assert ours.hex() == tk
        assert handshake.sender_handshake(ours).hex() == sender
        assert handshake.receiver_handshake(ours).hex() == receiver
        assert handshake.relay_handshake(ours, "0123456789abcdef").hex() == relay


@pytest.mark.parametrize("index", range(len(CASES["pake"])))
def test_pake_matches(index: int) -> None:
    code, appid, ea, eb = CASES["pake"][index]
    body_a, msg_b, key_a, key_b = OFFICIAL["pake"][index]
    a = key.Pake(code, appid, lambda n: bytes.fromhex(ea)[:n])
    b = key.Pake(code, appid, lambda n: bytes.fromhex(eb)[:n])
    assert a.start().hex() == body_a
    assert json.loads(b.start())["pake_v1"] == msg_b
    assert key_a == key_b
    assert a.finish(b.start()).hex() == key_a
    assert b.finish(a.start()).hex() == key_b


def test_completions_match() -> None:
    """Official completes the words part only; we complete the whole line after "N-"."""
    for (prefix, n), theirs in zip(CASES["completions"], OFFICIAL["completions"], strict=True):
        ours = complete(f"7-{prefix}", [], n)
        assert ours == [f"7-{c}" for c in theirs], (prefix, n)


def test_generated_words_are_official_words() -> None:
    odd = {b.lower() for _, b in OFFICIAL["words"].values()}
    even = {a.lower() for a, _ in OFFICIAL["words"].values()}
    words = words_from_bytes(bytes(range(256)))
    assert set(words[0::2]) <= odd and set(words[1::2]) <= even
