"""The L2 engine against bytes official 0.24's own classes wrote (integration/
official_dilation_vectors.py made tests/core/dilation/dilation_vectors.json), and its failure
cases."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

pytest.importorskip("noise", reason="the dilate extra (noiseprotocol) is not installed")

from hilltop.dilation import l2, records, wire  # noqa: E402
from hilltop.transit.handshake import Failed, Go, Ready  # noqa: E402

V = json.loads((Path(__file__).parent / "dilation_vectors.json").read_text())
DKEY = bytes.fromhex(V["dilation_key"])


def pair(relay: str | None = None) -> tuple[l2.L2Shake, l2.L2Shake]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the library warns about a fixed ephemeral key
        leader = l2.L2Shake(True, DKEY, relay, bytes.fromhex(V["ephemeral_leader"]))
        follower = l2.L2Shake(False, DKEY, relay, bytes.fromhex(V["ephemeral_follower"]))
    return leader, follower


def exchange(a: l2.L2Shake, b: l2.L2Shake) -> tuple[bytes, bytes]:
    sent_a = sent_b = b""
    for _ in range(5):
        out_a = a.data_to_send()
        out_b = b.data_to_send()
        sent_a += out_a
        sent_b += out_b
        if out_a:
            b.receive_data(out_a)
        if out_b:
            a.receive_data(out_b)
    return sent_a, sent_b


def test_key_and_relay_line_match_official() -> None:
    assert wire.dilation_key(bytes.fromhex(V["wormhole_key"])) == DKEY
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shake = l2.L2Shake(True, DKEY, "0123456789abcdef", bytes(32))
    assert shake.data_to_send().decode() == V["relay_line"]


def test_handshake_and_records_byte_for_byte() -> None:
    leader, follower = pair()
    sent_l, sent_f = exchange(leader, follower)
    assert isinstance(leader.next_event(), Ready)
    leader.send_go()
    sent_l += leader.data_to_send()
    follower.receive_data(sent_l[len(sent_l) - 4 - 17:])  # the KCM frame only
    assert isinstance(follower.next_event(), Go)
    assert sent_l.hex() == V["leader_handshake"]
    assert sent_f.hex() == V["follower_handshake"]
    lc, fc = leader.codec(), follower.codec()
    out = (lc.encode(records.Open(256, 513, "proto"))
           + lc.encode(records.Data(257, 513, b"hello dilation"))
           + lc.encode(records.Data(258, 513, bytes(i % 251 for i in range(70000)))))
    assert out.hex() == V["leader_records"]
    back = fc.encode(records.Ack(258)) + fc.encode(records.Ping(b"\x01\x02\x03\x04"))
    assert back.hex() == V["follower_records"]
    got = fc.feed(out[:7]) + fc.feed(out[7:])
    assert got[0] == records.Open(256, 513, "proto")
    assert got[2] == records.Data(258, 513, bytes(i % 251 for i in range(70000)))
    assert lc.feed(back) == [records.Ack(258), records.Ping(b"\x01\x02\x03\x04")]


def test_relay_line_then_ok_then_prologue() -> None:
    leader, follower = pair("0123456789abcdef")
    assert leader.data_to_send().startswith(b"please relay ")
    leader.receive_data(b"ok\n")
    assert leader.data_to_send() == l2.PROLOGUE_LEADER


def test_wrong_key_fails_cleanly() -> None:
    leader = l2.L2Shake(True, DKEY)
    follower = l2.L2Shake(False, bytes(32))
    exchange(leader, follower)
    ev = follower.next_event()
    assert isinstance(ev, Failed) and "Noise handshake failed" in ev.reason


def test_garbage_prologue_fails_at_once() -> None:
    follower = l2.L2Shake(False, DKEY)
    follower.receive_data(b"transit sender abc ready\n\n")
    ev = follower.next_event()
    assert isinstance(ev, Failed) and "prologue" in ev.reason


def test_oversized_frame_fails() -> None:
    leader, follower = pair()
    exchange(leader, follower)
    leader.receive_data(b"\xff\xff\xff\xff")
    assert isinstance(leader.next_event(), Ready)  # the KCM came first
    leader.send_go()
    codec = leader.codec()
    with pytest.raises(records.BadDilationRecord):
        codec.feed(b"\x7f\xff\xff\xff")


def test_a_megabyte_data_record_round_trips_in_one_frame() -> None:
    """The codec cuts a big DATA record into Noise messages of at most 65,535 bytes inside one
    frame (official's layout, pinned byte for byte above for 70,000 bytes) and joins it again
    from the pieces; a tampered byte anywhere is a bad record, not garbage data."""
    leader, follower = pair()
    exchange(leader, follower)
    leader.send_go()
    lc, fc = leader.codec(), follower.codec()
    assert fc.feed(leader.data_to_send()) == [records.KCM()]
    payload = bytes(i % 253 for i in range(1 << 20))
    frame = lc.encode(records.Data(7, 1, payload))
    messages = -(-(len(payload) + 9) // l2.NOISE_MAX_PAYLOAD)
    assert len(frame) == 4 + len(payload) + 9 + 16 * messages
    assert fc.feed(frame[:100_000]) == []
    assert fc.feed(frame[100_000:]) == [records.Data(7, 1, payload)]
    small = lc.encode(records.Ack(7))
    assert fc.feed(small) == [records.Ack(7)]
    spoiled = bytearray(lc.encode(records.Data(8, 1, payload)))
    spoiled[300_000] ^= 1
    with pytest.raises(records.BadDilationRecord, match="failed to decrypt"):
        fc.feed(bytes(spoiled))
