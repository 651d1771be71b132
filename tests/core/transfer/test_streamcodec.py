"""The stream-v1 records: data, the empty end marker, the trailer, and what the reader refuses."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilltop._transitions import move
from hilltop.errors import IllegalTransition, ProtocolError
from hilltop.transfer.filesink import UNKNOWN_SIZE, FileSink, StreamSink
from hilltop.transfer.offers import (
    MAX_STREAM_NAME,
    FileOffer,
    StreamOffer,
    UnknownOfferError,
    parse_app_message,
)
from hilltop.transfer.streamcodec import (
    END_MARKER,
    STREAM_MOVES,
    StreamReader,
    StreamState,
    Trailer,
)

DIGEST = hashlib.sha256(b"hello world").hexdigest()


def feed_all(reader: StreamReader, plaintexts: list[bytes]) -> bytes:
    out = b""
    for p in plaintexts:
        data = reader.feed(p)
        if data is not None:
            out += bytes(data)
    return out


def test_a_whole_stream_yields_its_data_and_trailer() -> None:
    reader = StreamReader()
    trailer = Trailer(11, DIGEST)
    got = feed_all(reader, [b"hello", b" world", END_MARKER, trailer.to_record()])
    assert got == b"hello world"
    assert reader.ended
    assert reader.check() == trailer


def test_an_empty_stream_is_just_the_marker_and_trailer() -> None:
    reader = StreamReader()
    assert feed_all(reader, [END_MARKER, Trailer(0).to_record()]) == b""
    assert reader.check() == Trailer(0, None)


def test_a_stream_cut_before_the_marker_never_checks_out() -> None:
    reader = StreamReader()
    feed_all(reader, [b"hello", b" world"])
    assert not reader.ended
    with pytest.raises(ProtocolError, match="without its end marker after 11 bytes"):
        reader.check()


def test_a_stream_cut_between_marker_and_trailer_never_checks_out() -> None:
    reader = StreamReader()
    feed_all(reader, [b"data", END_MARKER])
    assert reader.state is StreamState.TRAILER
    with pytest.raises(ProtocolError, match="without its end marker"):
        reader.check()


def test_a_trailer_that_disagrees_with_the_count_is_refused() -> None:
    reader = StreamReader()
    feed_all(reader, [b"abc", END_MARKER, Trailer(4).to_record()])
    with pytest.raises(ProtocolError, match="4 bytes, but 3 arrived"):
        reader.check()


def test_anything_after_the_trailer_is_refused() -> None:
    reader = StreamReader()
    feed_all(reader, [b"abc", END_MARKER, Trailer(3).to_record()])
    for late in (b"more", END_MARKER):
        with pytest.raises(ProtocolError, match="after the end of its stream"):
            reader.feed(late)


def test_trailer_wire_shape() -> None:
    assert json.loads(Trailer(5, DIGEST).to_record()) == {"length": 5, "sha256": DIGEST}
    assert json.loads(Trailer(5).to_record()) == {"length": 5}


@pytest.mark.parametrize("record", [
    b"", b"[]", b"{}", b'{"length": -1}', b'{"length": true}', b'{"length": "5"}',
    b'{"length": 5, "sha256": "XYZ"}', b'{"length": 5, "sha256": 7}', b"\xff\xfe",
    b'{"length": 1' + b" " * 2000 + b"}",
])
def test_bad_trailers_are_protocol_errors(record: bytes) -> None:
    with pytest.raises(ProtocolError):
        Trailer.from_record(record)


@given(st.binary(max_size=200))
def test_garbage_trailer_parses_or_raises_protocol_error(data: bytes) -> None:
    try:
        trailer = Trailer.from_record(data)
    except ProtocolError:
        return
    assert trailer.length >= 0


def test_the_table_has_only_the_three_forward_moves() -> None:
    assert move(STREAM_MOVES, StreamState.DATA, "end") is StreamState.TRAILER
    with pytest.raises(IllegalTransition):
        move(STREAM_MOVES, StreamState.ENDED, "data")
    assert len(STREAM_MOVES) == 3


# --- the offer ---------------------------------------------------------------------------------
def test_stream_offer_round_trip() -> None:
    wire = StreamOffer("backup.tar").to_wire()
    assert json.loads(wire) == {"offer": {"hilltop-stream": {"name": "backup.tar"}}}
    assert parse_app_message(wire) == StreamOffer("backup.tar")


def test_stream_offer_ignores_unknown_keys() -> None:
    wire = json.dumps({"offer": {"hilltop-stream": {"name": "x", "later": 1}}}).encode()
    assert parse_app_message(wire) == StreamOffer("x")


@pytest.mark.parametrize("body", [[], {"name": 5}, {}, {"name": "n" * (MAX_STREAM_NAME + 1)}])
def test_bad_stream_offers_are_protocol_errors(body: object) -> None:
    wire = json.dumps({"offer": {"hilltop-stream": body}}).encode()
    with pytest.raises(ProtocolError) as caught:
        parse_app_message(wire)
    assert not isinstance(caught.value, UnknownOfferError)


def test_file_offers_are_unchanged() -> None:
    wire = FileOffer("a", 3).to_wire()
    assert parse_app_message(wire) == FileOffer("a", 3)


# --- sinks of unknown size ---------------------------------------------------------------------
def test_unknown_size_file_sink_publishes_only_at_the_announced_end(tmp_path) -> None:
    target = tmp_path / "stdin"
    sink = FileSink(str(target), UNKNOWN_SIZE)
    sink.write(b"hello ")
    sink.write(b"world")
    assert not target.exists()
    sink.end_at(11)
    assert sink.finish(DIGEST) == DIGEST
    assert target.read_bytes() == b"hello world"


def test_unknown_size_sink_refuses_a_wrong_digest_and_leaves_nothing(tmp_path) -> None:
    target = tmp_path / "stdin"
    sink = FileSink(str(target), UNKNOWN_SIZE)
    sink.write(b"hello world")
    sink.end_at(11)
    with pytest.raises(ProtocolError, match="damaged"):
        sink.finish(hashlib.sha256(b"other").hexdigest())
    assert list(tmp_path.iterdir()) == []


def test_unknown_size_sink_refuses_an_end_before_what_arrived() -> None:
    sink = StreamSink(io.BytesIO(), UNKNOWN_SIZE)
    sink.write(b"abcdef")
    with pytest.raises(ProtocolError, match="3 bytes, but 6 arrived"):
        sink.end_at(3)


def test_unknown_size_sink_never_finishes_without_an_end(tmp_path) -> None:
    sink = FileSink(str(tmp_path / "x"), UNKNOWN_SIZE)
    sink.write(b"abc")
    with pytest.raises(ProtocolError, match="ended early"):
        sink.finish()
    assert list(tmp_path.iterdir()) == []
