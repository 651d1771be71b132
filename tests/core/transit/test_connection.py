"""The hand-over from the race to the record connection, over an in-memory stream.

The runner fires with a :class:`WinningStream`; an asyncio caller builds the
:class:`TransitConnection` a loop turn later, so bytes and a hang-up may arrive in between.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import defer

from hilltop.errors import TransitError
from hilltop.rendezvous.capabilities import AES_RECORDS, FEATURES
from hilltop.streams import ByteStream, OnData, OnLost
from hilltop.transit.connection import TransitConnection
from hilltop.transit.records import AES256GCM, SECRETBOX, Cipher, RecordSealer, record_keys
from hilltop.transit.runner import WinningStream

TK = bytes(range(32))
AES = pytest.mark.skipif(AES_RECORDS not in FEATURES, reason="no hardware AES here")


class MemoryStream:
    """A ByteStream whose peer is the test: ``arrive`` and ``hang_up`` play the network."""

    description = "memory"

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.paused = False
        self._on_data: OnData | None = None
        self._on_lost: OnLost | None = None

    def arrive(self, data: bytes) -> None:
        assert self._on_data is not None
        self._on_data(data)

    def hang_up(self, why: str = "connection closed") -> None:
        assert self._on_lost is not None
        self._on_lost(why)

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def start_receiving(self, on_data: OnData, on_lost: OnLost) -> None:
        self._on_data, self._on_lost = on_data, on_lost

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def register_producer(self, producer: Any, streaming: bool) -> None: ...

    def unregister_producer(self) -> None: ...

    def close(self) -> None: ...

    def when_closed(self) -> defer.Deferred[None]:
        return defer.succeed(None)


def peer_records(*plaintexts: bytes, cipher: Cipher = SECRETBOX) -> list[bytes]:
    """What the sender writes, as the receiver's connection must read it."""
    send_key, _ = record_keys(TK, "sender", cipher)
    sealer = RecordSealer(send_key, cipher)
    return [sealer.seal(p) for p in plaintexts]


def test_memory_stream_is_a_byte_stream() -> None:
    assert isinstance(MemoryStream(), ByteStream)


@pytest.mark.parametrize("cipher", [SECRETBOX, pytest.param(AES256GCM, marks=AES)])
def test_records_before_and_after_the_hand_over_arrive_in_order(cipher: Cipher) -> None:
    one, two, three, four = peer_records(b"one", b"two", b"three", b"four", cipher=cipher)
    stream = MemoryStream()
    won = WinningStream(stream, leftover=one + two[:5])  # read along with the handshake
    assert stream.paused  # nothing more is read until someone owns the stream
    stream.arrive(two[5:] + three)  # the gap: already on its way when the race fired
    conn = TransitConnection(won, "receiver", TK, cipher)
    assert not stream.paused
    stream.arrive(four)
    got = [conn.receive_record() for _ in range(4)]
    assert [d.result for d in got] == [b"one", b"two", b"three", b"four"]


def test_a_hang_up_while_held_reaches_the_connection_after_the_records() -> None:
    [last] = peer_records(b"last words")
    stream = MemoryStream()
    won = WinningStream(stream, leftover=b"")
    stream.arrive(last)
    stream.hang_up()
    conn = TransitConnection(won, "receiver", TK)
    assert conn.receive_record().result == b"last words"
    errors: list[Any] = []
    conn.receive_record().addErrback(errors.append)
    assert errors[0].check(TransitError)
    with pytest.raises(TransitError, match="cannot send"):
        conn.send_record(b"too late")


def test_a_winner_has_one_owner() -> None:
    won = WinningStream(MemoryStream(), leftover=b"")
    TransitConnection(won, "sender", TK)
    with pytest.raises(RuntimeError, match="already handed over"):
        TransitConnection(won, "sender", TK)


def test_the_connection_seals_with_the_role_key_and_cipher() -> None:
    stream = MemoryStream()
    conn = TransitConnection(WinningStream(stream, b""), "sender", TK)
    conn.send_record(b"hello")
    assert stream.written == peer_records(b"hello")
    assert conn.description == "memory"
