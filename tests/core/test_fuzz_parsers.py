"""Every parser that reads what the network sent, fed garbage: only our own errors come out.

The parsers: mailbox frames and the rendezvous engine behind them, PAKE bodies, v1 app messages
(with the ``hilltop-files`` manifest), WebRTC signals, stream-v1 records and trailers, resume
records, a peer's ``app_versions``, transit hints, the transit handshake, transit records, the
zip reader, and LAN TXT records, addresses and service names. Each input is raw bytes, or a
well-formed shape with hostile values, or such a shape damaged, so both the decoders and the
checks after them run. Parsers that read the same kind of input (a JSON document in bytes, a
decoded JSON value) share each example: every one of them still sees every example, for a third
of hypothesis's own cost per example.

The invariant is h11's fuzz rule: a :class:`~hilltop.errors.HilltopError` or a result, nothing
else. A ``RecursionError``, ``KeyError`` or ``IllegalTransition`` escaping would be a traceback
on the user's screen.

The number of examples comes from the hypothesis profile named by ``HILLTOP_HYPOTHESIS_PROFILE``
(``tests/conftest.py``): ``small`` (the default, fast local runs) or ``ci`` (10,000 examples
per test, which ``.ci/run`` selects).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import os
import zipfile
from collections.abc import Callable
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from hilltop import hints
from hilltop.errors import HilltopError, ProtocolError
from hilltop.lan import wire as lanwire
from hilltop.rendezvous import capabilities, key, mailbox, messages
from hilltop.transfer import offers, resume
from hilltop.transfer.streamcodec import StreamReader, Trailer
from hilltop.transfer.zipreader import ZipStreamReader
from hilltop.transit import handshake, records
from hilltop.webrtc import signals

FUZZ = settings(settings.get_profile(os.environ.get("HILLTOP_HYPOTHESIS_PROFILE", "small")))
"""Applied to every test here, and only here: the other hypothesis tests keep their sizes."""

DEEP = b"[" * 100_000
"""Nesting deep enough to exhaust Python's recursion limit in ``json.loads``."""

# --- shapes ---------------------------------------------------------------------------------
scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats()
           | st.text(max_size=30))
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=3),
    max_leaves=8)


def objects_with(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects whose keys are mostly the ones a parser looks for."""
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=8), json_values, max_size=5)


def damage(data: bytes, where: int, how: int) -> bytes:
    """``data`` cut short (``how == 0``) or with one byte changed."""
    if not data:
        return data
    i = where % len(data)
    return data[:i] if how == 0 else data[:i] + bytes([(data[i] + how) % 256]) + data[i + 1:]


def garbage_or(shaped: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Raw bytes, or a well-formed shape, or that shape with a byte changed or cut short."""
    return st.one_of(st.binary(max_size=200), shaped,
                     st.builds(damage, shaped, st.integers(0, 10_000), st.integers(0, 255)))


def only_our_errors(parse: Callable[[], object]) -> None:
    with contextlib.suppress(HilltopError):
        parse()


# --- one JSON document, every parser that reads one ----------------------------------------
SIDES = ("aaaaaaaaaa", "bbbbbbbbbb", "0123456789")
MAILBOX_KEYS = ["type", "id", "side", "phase", "body", "mailbox", "nameplate", "welcome",
                "error", "orig", "nameplates", "pong"]
server_frames = st.one_of(
    st.builds(lambda w: {"type": "welcome", "welcome": w},
              objects_with(["motd", "error", "current_cli_version"])),
    st.builds(lambda n: {"type": "allocated", "nameplate": n}, st.text(max_size=5)),
    st.builds(lambda m: {"type": "claimed", "mailbox": m}, st.text(max_size=13)),
    st.sampled_from([{"type": "released"}, {"type": "closed"}, {"type": "ack"}]),
    st.builds(lambda s, p, b: {"type": "message", "side": s, "phase": p, "body": b},
              st.sampled_from(SIDES) | st.text(max_size=3),
              st.sampled_from(["pake", "version", "0", "1", "2", "dilate-0", "99999999999"]),
              st.binary(max_size=120).map(bytes.hex) | st.text(max_size=10)),
    st.builds(lambda k, v: {"type": k, k: v}, st.sampled_from(["error", "nameplates", "pong"]),
              json_values),
    objects_with(MAILBOX_KEYS),
)
app_messages = st.one_of(
    st.builds(lambda o: {"offer": o}, objects_with(["message", "file", "directory",
                                                    "hilltop-stream"])),
    st.builds(lambda k, o: {"offer": {k: o}}, st.sampled_from(["file", "directory"]),
              objects_with(["filename", "filesize", "dirname", "zipsize", "numbytes", "numfiles",
                            "mode"])),
    st.builds(lambda o: {"answer": o}, objects_with(["file_ack", "message_ack",
                                                     "hilltop-resume"])),
    st.builds(lambda e: {"offer": {"hilltop-files": {"entries": e}}},
              st.lists(objects_with(["path", "size", "mode"]) | st.builds(
                  lambda p, s: {"path": p, "size": s},
                  st.sampled_from(["a", "../a", "/a", "a/../../b", "a\x00b", ".", "a//b"])
                  | st.text(max_size=8), st.integers(-1, 2**64)), max_size=4)),
    st.builds(lambda o: {"transit": o}, objects_with(["abilities-v1", "hints-v1"])),
    objects_with(["transit", "offer", "answer", "error"]),
)
records_json = st.one_of(
    st.builds(lambda o: {signals.KEY: o}, objects_with(["kind", "sdp", "wide"])),
    objects_with(["length", "sha256", "resume-proof", "resume-from", "ack", "pake_v1"]),
    st.builds(lambda h: {"pake_v1": h}, st.binary(max_size=40).map(bytes.hex)),
)
documents = garbage_or(st.one_of(server_frames, app_messages, records_json).map(
    lambda obj: json.dumps(obj).encode()))


class PakeOnce:
    """A started PAKE, made again only after a body got through its checks (SPAKE2 is slow)."""

    pake: key.Pake | None = None

    @classmethod
    def finish(cls, body: bytes) -> None:
        if cls.pake is None:
            cls.pake = key.Pake("4-purple-sausages", key.APPID, lambda n: b"\x01" * n)
            cls.pake.start()
        pake = cls.pake
        try:
            pake.finish(body)
        finally:
            if pake._finished:
                cls.pake = None


@FUZZ
@given(documents)
@example(DEEP)
@example(b'{"offer": ' * 50_000)
@example(b"\xff\xfe")
def test_json_documents(data: bytes) -> None:
    """Mailbox frames, PAKE bodies, v1 app messages, WebRTC signals, stream-v1 trailers and
    resume records: a value or one of our errors."""
    only_our_errors(lambda: messages.parse_server_frame(data))
    only_our_errors(lambda: messages.parse_server_frame(data.decode("utf-8", "replace")))
    only_our_errors(lambda: PakeOnce.finish(data))
    only_our_errors(lambda: offers.parse_app_message(data))
    try:
        signal = signals.decode(data)
    except ProtocolError:
        pass
    else:
        assert signal.kind in signals.KINDS
    only_our_errors(lambda: Trailer.from_record(data))
    only_our_errors(lambda: resume.parse_proof(data))
    only_our_errors(lambda: resume.parse_decision(data, 5))
    reader = StreamReader()
    only_our_errors(lambda: (reader.feed(data), reader.feed(b""), reader.feed(data),
                             reader.check()))


hint_fields = st.dictionaries(
    st.sampled_from(["hostname", "port", "priority", "hints", "name", "url"]),
    scalars | st.lists(scalars, max_size=2), max_size=4)
"""Flat values: a hint's checks look one level deep, and nested values cost generation time."""


@FUZZ
@given(json_values | st.builds(lambda o: {"hilltop": o},
                               objects_with(["version", "transports", "features"])),
       st.lists(st.builds(lambda t, o: {**o, "type": t},
                          st.sampled_from(["direct-tcp-v1", "relay-v1", "tor-tcp-v1",
                                           "webrtc-v1"]) | scalars,
                          hint_fields | st.builds(lambda o: {"hints": [o]}, hint_fields)
                          | st.builds(lambda o, t: {"hints": [{**o, "type": t}]}, hint_fields,
                                      st.sampled_from(["websocket-v1", "websocket"]))),
                max_size=3))
def test_decoded_values(value: Any, hint_list: list[Any]) -> None:
    """A peer's ``app_versions``, its hints, and its resume request, as decoded JSON."""
    caps = capabilities.from_app_versions(value)
    assert all(isinstance(f, str) for f in caps.features | caps.transports)
    logging.disable(logging.WARNING)  # each dropped hint is logged; formatting them is the cost
    try:
        for items in (value, hint_list):
            only_our_errors(lambda items=items: hints.parse_hints(items, claimed=("webrtc-v1",)))
    finally:
        logging.disable(logging.NOTSET)
    only_our_errors(lambda: resume.request_from_wire(value))


# --- the rendezvous engine -------------------------------------------------------------------
@functools.cache
def _pake_frame(code: str, side: str) -> str:
    body = key.Pake(code, key.APPID, lambda n: b"\x02" * n).start()
    return json.dumps({"type": "message", "side": side, "phase": "pake", "body": body.hex()})


CLAIMED = json.dumps({"type": "claimed", "mailbox": "abc"})
ALLOCATED = json.dumps({"type": "allocated", "nameplate": "4"})
APP_INPUTS = ("set_code", "allocate", "claim", "send", "close", "lost", "connected", "timer",
              "list", "ping")
steps = st.lists(st.one_of(server_frames.map(json.dumps), st.binary(max_size=40),
                           st.sampled_from(APP_INPUTS), st.just("peer pake")), max_size=20)


@FUZZ
@given(steps)
@example(["set_code", CLAIMED, "close", "peer pake"])  # the peer's PAKE after we closed
@example(["allocate", "close", ALLOCATED])  # a nameplate after we closed
def test_rendezvous_engine_takes_any_server(script: list[str | bytes]) -> None:
    """Any sequence of server frames, in any order, between any of our own inputs: the engine
    ends in a clear state (its own errors are reported as a ClosedEvent), never an exception
    of another kind, and never an illegal move of its state tables."""
    engine = mailbox.Mailbox(key.APPID, "0123456789", lambda n: b"\x01" * n)
    now = 0.0
    engine.connected(now)
    app: dict[str, Callable[[], object]] = {
        "set_code": lambda: engine.set_code("4-purple-sausages"),
        "allocate": lambda: engine.allocate(2),
        "claim": lambda: engine.claim_nameplate("4"),
        "send": lambda: engine.send(b"hello"),
        "close": lambda: engine.close(),
        # the shell reports a connection's end once, and an open only after ConnectNow
        "lost": lambda: engine.link in (mailbox.Link.UP, mailbox.Link.CONNECTING)
        and engine.connection_lost(now),
        "connected": lambda: engine.link is mailbox.Link.CONNECTING and engine.connected(now),
        "timer": lambda: engine.handle_timer(now),
        "list": engine.list_nameplates,
        "ping": lambda: engine.ping(1),
    }
    for step in script:
        now += 7.0
        if step == "peer pake":
            engine.frame_received(_pake_frame("4-purple-sausages", SIDES[0]), now)
        elif isinstance(step, str) and step in app:
            only_our_errors(app[step])
        else:
            engine.frame_received(step, now)
        engine.frames_to_send()
        while engine.next_event() is not None:
            pass
    engine.close()
    engine.handle_timer(now + 1000)


# --- transit: handshake and records ----------------------------------------------------------
TRANSIT_KEY = bytes(range(32))


@FUZZ
@given(st.sampled_from(["sender", "receiver"]), st.booleans(),
       st.lists(garbage_or(st.sampled_from([
           b"ok\n", handshake.sender_handshake(TRANSIT_KEY),
           handshake.receiver_handshake(TRANSIT_KEY), b"go\n", b"nevermind\n"])), max_size=5))
@example("receiver", False, [b"x" * 100_000])
def test_transit_handshake(role: Any, relay: bool, chunks: list[bytes]) -> None:
    shake = handshake.Handshake(role, TRANSIT_KEY, "0123456789abcdef" if relay else None)
    for chunk in chunks:
        shake.receive_data(chunk)
        if shake.state is handshake.ShakeState.READY:
            shake.send_go()
        while shake.next_event() is not None:
            pass
    shake.connection_lost()


def _sealed(plaintexts: list[bytes]) -> bytes:
    sealer = records.RecordSealer(TRANSIT_KEY)
    return b"".join(bytes(sealer.seal(p)) for p in plaintexts)


@FUZZ
@given(garbage_or(st.lists(st.binary(max_size=50), max_size=3).map(_sealed)),
       st.integers(1, 64))
@example(b"\xff\xff\xff\xff" + b"\x00" * 60, 8)
def test_transit_records(stream: bytes, chunk: int) -> None:
    """Any bytes, any length prefix: plaintexts or BadRecordError, and a length prefix over
    the limit is refused before anything of that size is allocated."""
    decoder = records.RecordDecoder(TRANSIT_KEY)
    for i in range(0, len(stream), chunk):
        try:
            decoder.feed(stream[i:i + chunk])
        except HilltopError:
            return
        assert decoder.buffered <= records.MAX_RECORD_SIZE + 4


# --- the zip reader ------------------------------------------------------------------------
def _small_zip(names: list[str], method: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for i, name in enumerate(names):
            zf.writestr(name, b"data %d " % i * i)
    return buf.getvalue()


zip_names = st.text(st.characters(codec="utf-8", blacklist_characters="/\\\x00"),
                    min_size=1, max_size=6)
"""Names zipfile can write (it cuts a name at NUL); the damage step makes the rest."""
zips = st.builds(_small_zip, st.lists(zip_names, min_size=1, max_size=3, unique=True),
                 st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))


@FUZZ
@given(garbage_or(zips), st.integers(1, 300))
def test_zip_reader(data: bytes, chunk: int) -> None:
    """Damaged archives: events or ZipFormatError, never an exception of another kind."""
    reader = ZipStreamReader()
    try:
        for i in range(0, len(data), chunk):
            for _event in reader.feed(data[i:i + chunk]):
                pass
        reader.close()
    except HilltopError:
        pass


# --- LAN TXT records -----------------------------------------------------------------------
txt_values = st.binary(max_size=12) | st.text(max_size=12) | st.none()
txt_records = st.dictionaries(
    st.sampled_from([b"v", b"kind", b"nameplate", b"path", "v", "path"]) | st.binary(max_size=6),
    txt_values | st.sampled_from([b"1", b"mailbox", b"4", b"/v1"]), max_size=6)


addresses = st.lists(st.ip_addresses().map(str) | st.text(max_size=20)
                     | st.sampled_from(["::1", "127.0.0.1", "fe80::1", "0.0.0.0", "1.2.3"]),
                     max_size=5)
service_names = (st.text(max_size=40) | st.builds(
    lambda n, tail: lanwire.mailbox_service_name(n)[:tail], st.from_regex(r"\A[0-9]{1,6}\Z"),
    st.integers(0, 80)))


@FUZZ
@given(txt_records, st.sampled_from(["4", "123"]), addresses, service_names)
def test_lan_txt_records(properties: dict[Any, Any], nameplate: str, found: list[str],
                         name: str) -> None:
    """A found service's TXT record, its addresses and its name (all from the network)."""
    only_our_errors(lambda: lanwire.parse_mailbox_txt(properties, nameplate))
    only_our_errors(lambda: lanwire.order_addresses(found))
    only_our_errors(lambda: lanwire.nameplate_of(name))


@settings(FUZZ, max_examples=min(FUZZ.max_examples, 2000))  # small parsers: CI stays lean
@given(st.binary(max_size=200) | documents)
@example(b"\x03\x00\x00\x02\x01\x00\x00\x01\x00\xff")
def test_dilation_records_messages_and_fowl(data: bytes) -> None:
    """Dilation's L3 records, its dilate-N messages and fowl's control messages: a value or
    one of our errors."""
    from hilltop.dilation import fowl, wire
    from hilltop.dilation import records as drecords

    only_our_errors(lambda: drecords.parse(data))
    only_our_errors(lambda: wire.parse(data))
    only_our_errors(lambda: fowl.MessageReader().feed(data))
    only_our_errors(lambda: fowl.MessageReader().feed(len(data).to_bytes(2, "big") + data))


@settings(FUZZ, max_examples=min(FUZZ.max_examples, 1000))  # Noise costs ~15 ms an example
@given(st.booleans(), st.booleans(),
       st.lists(garbage_or(st.sampled_from([
           b"ok\n", b"Magic-Wormhole Dilation Handshake v1 Leader\n\n",
           b"Magic-Wormhole Dilation Handshake v1 Follower\n\n",
           b"\x00\x00\x00\x30" + bytes(48), b"\xff\xff\xff\xff"])), max_size=5))
def test_dilation_l2_handshake(leader: bool, relay: bool, chunks: list[bytes]) -> None:
    from hilltop.dilation import l2

    shake = l2.L2Shake(leader, TRANSIT_KEY, "0123456789abcdef" if relay else None)
    for chunk in chunks:
        shake.receive_data(chunk)
        if shake.state is l2.L2State.READY:
            shake.send_go()
        while shake.next_event() is not None:
            pass
    shake.connection_lost()
