"""Our WebSocket client: RFC 6455 examples, hostile server frames, and the Twisted protocol."""

from __future__ import annotations

import base64

import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from hilltop import rendezvous
from hilltop.wsframes import (
    CLOSE,
    PING,
    PONG,
    TEXT,
    Control,
    FrameParser,
    Message,
    WebSocketError,
    check_handshake_response,
    encode_frame,
    expected_accept,
    handshake_request,
)

RFC_KEY = base64.b64decode("dGhlIHNhbXBsZSBub25jZQ==")  # RFC 6455 §1.3


def accept_head(key: bytes) -> bytes:
    return (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: "
            + expected_accept(key).encode() + b"\r\n\r\n")


def server_frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + n.to_bytes(2, "big")
    else:
        head += bytes([127]) + n.to_bytes(8, "big")
    return head + payload


# --- handshake ----------------------------------------------------------------------------------
def test_accept_value_matches_the_rfc_example() -> None:
    assert expected_accept(RFC_KEY) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def test_request_names_host_path_and_key() -> None:
    req = handshake_request("127.0.0.1", 4000, "/v1", RFC_KEY, tls=False).decode()
    assert req.startswith("GET /v1 HTTP/1.1\r\nHost: 127.0.0.1:4000\r\n")
    assert "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" in req
    assert "Sec-WebSocket-Version: 13\r\n" in req and req.endswith("\r\n\r\n")
    assert "Host: relay.example\r\n" in handshake_request("relay.example", 443, "/v1",
                                                          RFC_KEY, tls=True).decode()
    assert "Host: [::1]:4000\r\n" in handshake_request("::1", 4000, "/v1", RFC_KEY,
                                                       tls=False).decode()


def test_good_response_is_accepted() -> None:
    check_handshake_response(accept_head(RFC_KEY)[:-4], RFC_KEY)


@pytest.mark.parametrize("head", [
    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0",
    b"SSH-2.0-OpenSSH_9.2",
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
])
def test_bad_responses_are_refused(head: bytes) -> None:
    with pytest.raises(WebSocketError):
        check_handshake_response(head, RFC_KEY)


# --- frames -------------------------------------------------------------------------------------
def test_masked_hello_matches_the_rfc_example() -> None:  # RFC 6455 §5.7
    assert encode_frame(TEXT, b"Hello", bytes.fromhex("37fa213d")) == bytes.fromhex(
        "818537fa213d7f9f4d5158")


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536, 200_000])
def test_encoded_lengths_round_trip_through_unmasking(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    frame = encode_frame(TEXT, payload, b"\x01\x02\x03\x04")
    n = frame[1] & 0x7F
    start = 2 + {126: 2, 127: 8}.get(n, 0)
    mask, body = frame[start : start + 4], frame[start + 4 :]
    assert frame[1] & 0x80 and len(body) == size
    assert bytes(b ^ mask[i % 4] for i, b in enumerate(body)) == payload


def test_control_frames_stay_small() -> None:
    with pytest.raises(ValueError):
        encode_frame(PING, b"x" * 126, b"abcd")


def test_parser_reads_rfc_examples_byte_by_byte() -> None:
    stream = (bytes.fromhex("810548656c6c6f")  # "Hello"
              + bytes.fromhex("010348656c") + bytes.fromhex("80026c6f")  # "Hel" + "lo"
              + bytes.fromhex("890548656c6c6f"))  # ping "Hello"
    parser = FrameParser(1000)
    events = [e for i in range(len(stream)) for e in parser.feed(stream[i : i + 1])]
    assert events == [Message(b"Hello", True), Message(b"Hello", True),
                      Control(PING, b"Hello")]


def test_parser_handles_long_lengths_and_control_between_fragments() -> None:
    big = b"x" * 70_000
    parser = FrameParser(100_000)
    data = (server_frame(TEXT, big[:300], fin=False) + server_frame(PING, b"")
            + server_frame(0, big[300:]))
    assert parser.feed(data) == [Control(PING, b""), Message(big, True)]


@pytest.mark.parametrize("data", [
    bytes([0x81, 0x85]) + b"abcd" + b"Hello",  # masked by the server
    bytes([0xC1, 0x00]),  # reserved bit
    server_frame(PING, b"x" * 126),  # long control frame
    server_frame(PING, b"", fin=False),  # fragmented control frame
    server_frame(0, b"lo"),  # continuation of nothing
    server_frame(TEXT, b"a", fin=False) + server_frame(TEXT, b"b"),  # nested message
    server_frame(0x3, b""),  # unknown opcode
    server_frame(TEXT, b"y" * 101),  # over the limit
])
def test_parser_refuses_protocol_violations(data: bytes) -> None:
    with pytest.raises(WebSocketError):
        FrameParser(100).feed(data)


# --- the Twisted protocol -----------------------------------------------------------------------
class FakeClient:
    """What :class:`rendezvous._MailboxProtocol` uses of its RendezvousClient."""

    def __init__(self) -> None:
        self._reactor = Clock()
        self._host, self._port, self._tls = "127.0.0.1", 4000, False
        self.events: list[object] = []

    def _opened(self, p: object) -> None:
        self.events.append("open")

    def _frame(self, payload: bytes) -> None:
        self.events.append(payload)

    def _lost(self, p: object) -> None:
        self.events.append("lost")


def sent_frames(transport: StringTransport) -> list[tuple[int, bytes]]:
    """Unmask what the client wrote (after its upgrade request)."""
    data = transport.value()
    data = data[data.index(b"\r\n\r\n") + 4 :]
    out = []
    while data:
        opcode, n = data[0] & 0x0F, data[1] & 0x7F
        pos = 2 + {126: 2, 127: 8}.get(n, 0)
        if n >= 126:
            n = int.from_bytes(data[2:pos], "big")
        mask, body = data[pos : pos + 4], data[pos + 4 : pos + 4 + n]
        out.append((opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(body))))
        data = data[pos + 4 + n :]
    return out


def connect() -> tuple[FakeClient, rendezvous._MailboxProtocol, StringTransport]:
    client = FakeClient()
    proto = rendezvous._MailboxProtocol(client, "/v1")  # type: ignore[arg-type]
    transport = StringTransport()
    proto.makeConnection(transport)
    assert transport.value().startswith(b"GET /v1 HTTP/1.1\r\n")
    return client, proto, transport


def test_protocol_upgrades_exchanges_text_and_answers_pings() -> None:
    client, proto, transport = connect()
    head = accept_head(proto._key)
    proto.dataReceived(head[:10])
    assert client.events == []
    proto.dataReceived(head[10:] + server_frame(TEXT, b'{"type": "welcome"}'))
    assert client.events == ["open", b'{"type": "welcome"}']
    proto.sendMessage(b'{"type": "bind"}')
    proto.dataReceived(server_frame(PING, b"p1"))
    assert sent_frames(transport) == [(TEXT, b'{"type": "bind"}'), (PONG, b"p1")]


def test_protocol_closes_cleanly_and_gives_up_on_a_silent_server() -> None:
    client, proto, transport = connect()
    proto.dataReceived(accept_head(proto._key))
    proto.sendClose()
    assert sent_frames(transport)[-1] == (CLOSE, b"\x03\xe8")
    client._reactor.advance(rendezvous.CLOSE_TIMEOUT + 1)
    assert transport.disconnecting  # the server never ended TCP, so we did
    proto.connectionLost()
    assert client.events == ["open", "lost"]


def test_protocol_pings_when_quiet_and_drops_a_dead_server() -> None:
    client, proto, transport = connect()
    proto.dataReceived(accept_head(proto._key))
    client._reactor.advance(rendezvous.PING_INTERVAL)
    assert sent_frames(transport) == [(PING, b"")]
    assert not transport.disconnecting
    client._reactor.advance(rendezvous.PING_TIMEOUT)
    assert transport.disconnecting


def test_protocol_drops_a_server_that_is_not_websocket() -> None:
    client, proto, transport = connect()
    proto.dataReceived(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
    assert transport.disconnecting and client.events == []


def test_protocol_drops_a_server_that_never_upgrades() -> None:
    client, proto, transport = connect()
    client._reactor.advance(rendezvous.OPEN_TIMEOUT + 1)
    assert transport.disconnecting
