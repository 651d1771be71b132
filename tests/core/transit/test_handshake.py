"""The transit handshake engine, byte by byte, with two engines joined back to back."""

from __future__ import annotations

import pytest

from hilltop.errors import IllegalTransition
from hilltop.transit.handshake import (
    HANDSHAKE_MOVES,
    Failed,
    Go,
    Handshake,
    Nevermind,
    Ready,
    ShakeState,
    receiver_handshake,
    relay_handshake,
    sender_handshake,
)

TK = bytes.fromhex("9329a646acaba7172c557c7971191ec6a1e287f84abe58c60dce2659c44c2925")
SENDER_HS = (
    b"transit sender 6fa5ad1bb11461d5165ff989e5ce9bf1c2d464385caf06870527e62fc0643f4c ready\n\n"
)
RECEIVER_HS = (
    b"transit receiver 0b5d03da4672ec8428bd2485e126faf13ef3ffb278196ddc2f95d96d3d82c1fd ready\n\n"
)
RELAY_HS = (
    b"please relay ecd85f320731169f5768239a248b8b0f3e7834f1c05937a5939b13d6bfa933e1"
    b" for side 0123456789abcdef\n"
)


def events(hs: Handshake) -> list:
    out = []
    while (ev := hs.next_event()) is not None:
        out.append(ev)
    return out


def test_vectors() -> None:
    assert sender_handshake(TK) == SENDER_HS
    assert receiver_handshake(TK) == RECEIVER_HS
    assert relay_handshake(TK, "0123456789abcdef") == RELAY_HS


def test_relay_side_must_be_16_hex() -> None:
    with pytest.raises(ValueError):
        relay_handshake(TK, "xyz")


def test_both_write_their_line_at_once() -> None:
    s, r = Handshake("sender", TK), Handshake("receiver", TK)
    assert s.data_to_send() == SENDER_HS
    assert r.data_to_send() == RECEIVER_HS
    assert s.data_to_send() == b""


def test_pair_go_with_leftover_records() -> None:
    s, r = Handshake("sender", TK), Handshake("receiver", TK)
    s.receive_data(r.data_to_send())
    r.receive_data(s.data_to_send())
    assert events(s) == [Ready()]
    assert events(r) == []
    s.send_go()
    assert s.data_to_send() == b"go\n"
    r.receive_data(b"go\n" + b"RECORD")
    assert events(r) == [Go()]
    assert r.leftover == b"RECORD"
    assert r.finished and s.finished
    r.receive_data(b"MORE")
    assert r.leftover == b"RECORDMORE"


def test_byte_at_a_time() -> None:
    s, r = Handshake("sender", TK), Handshake("receiver", TK)
    for b in r.data_to_send():
        s.receive_data(bytes([b]))
    assert events(s) == [Ready()]
    s.send_go()
    for b in s.data_to_send():
        r.receive_data(bytes([b]))
    r_events = events(r)
    assert r_events == [Go()] and r.leftover == b""


def test_nevermind() -> None:
    s, r = Handshake("sender", TK), Handshake("receiver", TK)
    s.receive_data(r.data_to_send())
    r.receive_data(s.data_to_send())
    assert events(s) == [Ready()]
    s.send_nevermind()
    r.receive_data(s.data_to_send())
    assert events(r) == [Nevermind()]
    assert s.state is ShakeState.CLOSED and r.state is ShakeState.CLOSED


def test_receiver_fails_on_other_than_go() -> None:
    r = Handshake("receiver", TK)
    r.receive_data(SENDER_HS + b"gx\n")
    [ev] = events(r)
    assert isinstance(ev, Failed) and "expected go" in ev.reason


def test_wrong_peer_line_fails_fast() -> None:
    s = Handshake("sender", TK)
    s.receive_data(b"transit receiver 00")  # wrong token already at the first differing byte
    [ev] = events(s)
    assert isinstance(ev, Failed)
    assert s.finished


def test_garbage_does_not_buffer() -> None:
    r = Handshake("receiver", TK)
    r.receive_data(b"x" * 10_000_000)
    assert isinstance(r.next_event(), Failed)
    assert len(r._in) == 0


def test_same_role_on_both_ends_fails() -> None:
    a, b = Handshake("sender", TK), Handshake("sender", TK)
    a.receive_data(b.data_to_send())
    assert isinstance(a.next_event(), Failed)


def test_relay_line_first_then_ok() -> None:
    s = Handshake("sender", TK, relay_side16="0123456789abcdef")
    assert s.data_to_send() == RELAY_HS  # nothing else until the relay says ok
    s.receive_data(b"o")
    assert s.data_to_send() == b""
    s.receive_data(b"k\n" + RECEIVER_HS)
    assert s.data_to_send() == SENDER_HS
    assert events(s) == [Ready()]


def test_receiver_via_relay_answers_only_after_the_sender_line() -> None:
    """wormhole-william 1.0.6's sender closes its relay connection if our line is already
    waiting when it reads (see hilltop.transit.handshake); through a relay we answer, never lead."""
    r = Handshake("receiver", TK, relay_side16="0123456789abcdef")
    assert r.data_to_send() == RELAY_HS
    r.receive_data(b"ok\n")
    assert r.data_to_send() == b""  # the sender speaks first
    r.receive_data(SENDER_HS[:-1])
    assert r.data_to_send() == b""
    r.receive_data(SENDER_HS[-1:] + b"go\n")
    assert r.data_to_send() == RECEIVER_HS
    assert events(r) == [Go()]


def test_direct_receiver_writes_its_line_at_once() -> None:
    assert Handshake("receiver", TK).data_to_send() == RECEIVER_HS


def test_relay_refusal() -> None:
    r = Handshake("receiver", TK, relay_side16="0123456789abcdef")
    r.data_to_send()
    r.receive_data(b"impatient\n")
    [ev] = events(r)
    assert isinstance(ev, Failed) and "relay" in ev.reason
    assert r.data_to_send() == b""


def test_eof_is_an_input() -> None:
    s = Handshake("sender", TK)
    s.receive_data(RECEIVER_HS[:10])
    s.connection_lost()
    [ev] = events(s)
    assert isinstance(ev, Failed) and "closed" in ev.reason


def test_go_only_from_ready_sender() -> None:
    r = Handshake("receiver", TK)
    with pytest.raises(RuntimeError):
        r.send_go()
    s = Handshake("sender", TK)
    with pytest.raises(RuntimeError):
        s.send_go()


def test_bad_role() -> None:
    with pytest.raises(ValueError):
        Handshake("both", TK)  # type: ignore[arg-type]


# -- the transition table ---------------------------------------------------------------------
S = ShakeState
LEGAL = {
    "sender": {(S.RELAY, "relay ok"): S.PEER, (S.PEER, "peer line"): S.READY,
               (S.READY, "send go"): S.DONE, (S.READY, "send nevermind"): S.CLOSED,
               (S.RELAY, "fail"): S.FAILED, (S.PEER, "fail"): S.FAILED,
               (S.READY, "fail"): S.FAILED, (S.WAIT_GO, "fail"): S.FAILED},
    "receiver": {(S.RELAY, "relay ok"): S.PEER, (S.PEER, "peer line"): S.WAIT_GO,
                 (S.WAIT_GO, "got go"): S.DONE, (S.WAIT_GO, "got nevermind"): S.CLOSED,
                 (S.RELAY, "fail"): S.FAILED, (S.PEER, "fail"): S.FAILED,
                 (S.READY, "fail"): S.FAILED, (S.WAIT_GO, "fail"): S.FAILED},
}


@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_table_holds_exactly_the_legal_moves(role: str) -> None:
    assert HANDSHAKE_MOVES[role] == LEGAL[role]  # type: ignore[index]


@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_finished_states_have_no_way_out(role: str) -> None:
    sources = {state for state, _event in HANDSHAKE_MOVES[role]}  # type: ignore[index]
    assert not sources & {S.DONE, S.CLOSED, S.FAILED}


def test_every_path_through_the_engine_follows_the_table() -> None:
    """Relay, lines, go: the states the engine passes are the table's, in order."""
    s = Handshake("sender", TK, "0123456789abcdef")
    r = Handshake("receiver", TK, "fedcba9876543210")
    assert (s.state, r.state) == (S.RELAY, S.RELAY)
    s.receive_data(b"ok\n")
    r.receive_data(b"ok\n")
    assert (s.state, r.state) == (S.PEER, S.PEER)
    s_line = s.data_to_send().split(b"\n", 1)[1]  # the relay line went first
    r.receive_data(s_line)
    s.receive_data(r.data_to_send().split(b"\n", 1)[1])
    assert (s.state, r.state) == (S.READY, S.WAIT_GO)
    s.send_go()
    r.receive_data(s.data_to_send())
    assert (s.state, r.state) == (S.DONE, S.DONE)


def test_an_illegal_move_names_state_and_event() -> None:
    r = Handshake("receiver", TK)
    r.receive_data(SENDER_HS)
    assert r.state is S.WAIT_GO
    with pytest.raises(IllegalTransition, match=r"'send go' in ShakeState.WAIT_GO") as err:
        r.send_go()
    assert (err.value.state, err.value.event) == (S.WAIT_GO, "send go")
    assert r.state is S.WAIT_GO  # a refused move changes nothing


def test_a_finished_handshake_cannot_go_twice() -> None:
    s = Handshake("sender", TK)
    s.receive_data(RECEIVER_HS)
    s.send_go()
    with pytest.raises(IllegalTransition, match="DONE"):
        s.send_nevermind()
