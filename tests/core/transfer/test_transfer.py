"""hilltop.transfer.offers (v1 app messages on the wire) and hilltop.transfer.targets (where
received data may land)."""

from __future__ import annotations

import contextlib
import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilltop.errors import ProtocolError, RejectedError, UnknownOfferError
from hilltop.transfer.offers import (
    Answer,
    DirectoryOffer,
    ErrorMsg,
    FileOffer,
    TextOffer,
    TransitMsg,
    UnknownMessage,
    parse_app_message,
)
from hilltop.transfer.targets import (
    BLOCK_PER_FILE,
    check_free_space,
    free_space,
    safe_name,
    space_needed,
    target_path,
)

# --- messages: exact wire shapes (protocol summary §4) ---------------------------------------

WIRE = [
    (TextOffer("hello ☃"), {"offer": {"message": "hello ☃"}}),
    (FileOffer("a.txt", 300000), {"offer": {"file": {"filename": "a.txt", "filesize": 300000}}}),
    (DirectoryOffer("d", zipsize=692, numbytes=6, numfiles=4),
     {"offer": {"directory": {"mode": "zipfile/deflated", "dirname": "d", "zipsize": 692,
                              "numbytes": 6, "numfiles": 4}}}),
    (Answer("file_ack"), {"answer": {"file_ack": "ok"}}),
    (Answer("message_ack"), {"answer": {"message_ack": "ok"}}),
    (ErrorMsg("transfer rejected"), {"error": "transfer rejected"}),
    (TransitMsg(abilities=({"type": "direct-tcp-v1"}, {"type": "relay-v1"}),
                hints=({"type": "direct-tcp-v1", "hostname": "10.0.0.1", "port": 4000,
                        "priority": 0.0},)),
     {"transit": {"abilities-v1": [{"type": "direct-tcp-v1"}, {"type": "relay-v1"}],
                  "hints-v1": [{"type": "direct-tcp-v1", "hostname": "10.0.0.1", "port": 4000,
                                "priority": 0.0}]}}),
]


@pytest.mark.parametrize(("message", "wire"), WIRE)
def test_to_wire_matches_protocol(message: object, wire: dict) -> None:
    data = message.to_wire()  # type: ignore[attr-defined]
    assert json.loads(data) == wire
    assert parse_app_message(data) == message
    assert type(message).from_wire(data) == message


def test_official_python_encoding_parses() -> None:
    # json.dumps defaults: spaces after separators and ASCII escapes.
    data = b'{"offer": {"file": {"filename": "\\u00fcber.txt", "filesize": 3}}}'
    assert parse_app_message(data) == FileOffer("über.txt", 3)


def test_wormhole_william_transit_with_null_hints_and_extra_fields() -> None:
    data = json.dumps({"transit": {"abilities-v1": [{"type": "direct-tcp-v1"}], "hints-v1": None}})
    assert parse_app_message(data.encode()) == TransitMsg(({"type": "direct-tcp-v1"},), ())
    relay = {"type": "relay-v1", "hostname": "", "port": 0,
             "hints": [{"type": "direct-tcp-v1", "hostname": "r", "port": 1, "hints": None}]}
    data = json.dumps({"transit": {"abilities-v1": [], "hints-v1": [relay, "junk", 3]}})
    assert parse_app_message(data.encode()).hints == (relay,)


def test_missing_transit_lists_mean_none() -> None:
    assert parse_app_message(b'{"transit": {}}') == TransitMsg()


def test_answer_status() -> None:
    assert Answer("file_ack").ok
    refused = parse_app_message(b'{"answer": {"file_ack": "no thanks"}}')
    assert refused == Answer("file_ack", "no thanks") and not refused.ok


def test_error_wins_over_everything() -> None:
    data = b'{"error": "sender rejected verification check", "offer": {"message": "x"}}'
    assert parse_app_message(data) == ErrorMsg("sender rejected verification check")
    assert parse_app_message(b'{"error": {"odd": 1}}') == ErrorMsg('{"odd": 1}')


def test_unknown_messages_are_skippable() -> None:
    assert parse_app_message(b'{"future-thing": 1}') == UnknownMessage(("future-thing",))


@pytest.mark.parametrize("data", [
    b"\xff\xfe", b"not json", b"[1, 2]", b'"text"', b"",
    b'{"offer": "x"}', b'{"offer": {"file": "x"}}', b'{"offer": {"message": 3}}',
    b'{"offer": {"file": {"filename": "a"}}}',
    b'{"offer": {"file": {"filename": "a", "filesize": -1}}}',
    b'{"offer": {"file": {"filename": "a", "filesize": "12"}}}',
    b'{"offer": {"file": {"filename": "a", "filesize": 1.5}}}',
    b'{"offer": {"file": {"filename": "a", "filesize": true}}}',
    b'{"offer": {"file": {"filename": 7, "filesize": 1}}}',
    b'{"offer": {"directory": {"mode": "zipfile/deflated", "dirname": "d", "zipsize": 1}}}',
    b'{"answer": {}}', b'{"answer": {"file_ack": 1}}', b'{"answer": "ok"}',
    b'{"transit": []}', b'{"transit": {"hints-v1": {}}}',
    b'{"transit": {}, "offer": {"message": "x"}}',
    b"[" * 100000,
])
def test_garbage_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_app_message(data)
    assert "\n" not in str(info.value)
    assert not isinstance(info.value, UnknownOfferError)


def test_unknown_offer_type_has_official_reply() -> None:
    with pytest.raises(UnknownOfferError) as info:
        parse_app_message(b'{"offer": {"tarball": {}}}')
    assert info.value.reply == "unknown offer type"


def test_unknown_directory_mode_has_official_reply() -> None:
    data = DirectoryOffer("d", 1, 1, 1, mode="tar/xz").to_wire()
    with pytest.raises(UnknownOfferError) as info:
        parse_app_message(data)
    assert info.value.reply == "unknown mode"


def test_from_wire_insists_on_its_type() -> None:
    with pytest.raises(ProtocolError, match="expected a FileOffer"):
        FileOffer.from_wire(TextOffer("hi").to_wire())


def test_constructors_check_types() -> None:
    with pytest.raises(TypeError):
        FileOffer("a", -1)
    with pytest.raises(TypeError):
        Answer("nope")  # type: ignore[arg-type]


@given(st.binary(max_size=200))
def test_random_bytes_never_raise_anything_else(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        parse_app_message(data)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.sampled_from(
                        ["offer", "file", "directory", "message", "filename", "filesize",
                         "mode", "dirname", "zipsize", "numbytes", "numfiles", "answer",
                         "file_ack", "transit", "hints-v1", "abilities-v1"]), kids, max_size=4),
                    max_leaves=12))
def test_random_json_never_raises_anything_else(obj: object) -> None:
    with contextlib.suppress(ProtocolError):
        parse_app_message(json.dumps(obj).encode())


# --- safe names --------------------------------------------------------------------------------

@pytest.mark.parametrize(("offered", "kept"), [
    ("report.pdf", "report.pdf"),
    ("/etc/passwd", "passwd"),
    ("../../.ssh/authorized_keys", "authorized_keys"),
    ("über ☃.txt", "über ☃.txt"),
    (".hidden", ".hidden"),
])
def test_safe_name_keeps_the_basename(offered: str, kept: str) -> None:
    assert safe_name(offered) == kept


@pytest.mark.parametrize("offered", [
    "", ".", "..", "dir/", "a/..", "/", "nul\x00byte", "back\\slash", "..\\..\\x",
    "bell\x07", "new\nline", "del\x7f", "esc\x1b[31m", "x" * 256, "é" * 128, "\ud800",
])
def test_safe_name_refuses(offered: str) -> None:
    with pytest.raises(RejectedError) as info:
        safe_name(offered)
    assert "\n" not in str(info.value)


# --- target paths (-o/--output-file) -------------------------------------------------------------

def test_target_defaults_to_cwd(tmp_path) -> None:
    assert target_path("/x/y/a.txt", None, str(tmp_path)) == str(tmp_path / "a.txt")


def test_output_option_names_the_file(tmp_path) -> None:
    assert target_path("a.txt", "b.txt", str(tmp_path)) == str(tmp_path / "b.txt")
    (tmp_path / "sub").mkdir()
    assert target_path("a.txt", "sub/b.txt", str(tmp_path)) == str(tmp_path / "sub" / "b.txt")


def test_output_option_existing_directory_puts_it_inside(tmp_path) -> None:
    (tmp_path / "into").mkdir()
    assert target_path("a.txt", "into", str(tmp_path)) == str(tmp_path / "into" / "a.txt")
    assert target_path("a", str(tmp_path / "into"), "/") == str(tmp_path / "into" / "a")


def test_output_option_inside_directory_still_sanitises(tmp_path) -> None:
    (tmp_path / "into").mkdir()
    assert target_path("../../evil", "into", str(tmp_path)) == str(tmp_path / "into" / "evil")
    with pytest.raises(RejectedError):
        target_path("..", "into", str(tmp_path))


@pytest.mark.parametrize("output", [None, "a.txt"])
def test_existing_target_is_refused(tmp_path, output: str | None) -> None:
    (tmp_path / "a.txt").write_text("keep me")
    with pytest.raises(RejectedError, match="refusing to overwrite"):
        target_path("a.txt", output, str(tmp_path))
    assert (tmp_path / "a.txt").read_text() == "keep me"


def test_existing_inside_output_directory_is_refused(tmp_path) -> None:
    (tmp_path / "into").mkdir()
    (tmp_path / "into" / "a.txt").mkdir()
    with pytest.raises(RejectedError, match="refusing to overwrite"):
        target_path("a.txt", "into", str(tmp_path))


def test_dangling_symlink_counts_as_existing(tmp_path) -> None:
    os.symlink(tmp_path / "nowhere", tmp_path / "a.txt")
    with pytest.raises(RejectedError):
        target_path("a.txt", None, str(tmp_path))
    assert not (tmp_path / "nowhere").exists()


def test_missing_parent_is_refused(tmp_path) -> None:
    with pytest.raises(RejectedError, match="does not exist"):
        target_path("a.txt", "no/such/dir/b.txt", str(tmp_path))


# --- free space ----------------------------------------------------------------------------------

def test_free_space_decision() -> None:
    check_free_space("/d", 100, 100)
    check_free_space("/d", 100, None)
    with pytest.raises(RejectedError, match="not enough free space"):
        check_free_space("/d", 101, 100)


def test_free_space_refusal_is_readable() -> None:
    with pytest.raises(RejectedError, match=r"need 60\.0 MB, only 45\.0 MB available$"):
        check_free_space("/d", 60_000_352, 45_000_000)
    # sizes that read the same are told apart by their exact counts
    with pytest.raises(RejectedError, match="need 45000001 bytes, only 45000000 bytes"):
        check_free_space("/d", 45_000_001, 45_000_000)


def test_free_space_reader(tmp_path) -> None:
    assert isinstance(free_space(str(tmp_path)), int)
    assert free_space(str(tmp_path / "missing")) is None


def test_space_needed_for_a_file_is_its_size() -> None:
    assert space_needed(FileOffer("a", 10)) == 10
    assert space_needed(FileOffer("a", 0)) == 0


def test_space_needed_for_a_folder_counts_its_files_not_its_zip() -> None:
    """The zip is unpacked as it arrives and never stored; counting it refused a 30 MB folder
    with 45 MB free ("need 60000352 bytes")."""
    folder = DirectoryOffer("d", zipsize=30_000_352, numbytes=30_000_000, numfiles=3)
    assert space_needed(folder) == 30_000_000 + 3 * BLOCK_PER_FILE
    check_free_space("/d", space_needed(folder), 45_000_000)
    assert space_needed(DirectoryOffer("d", zipsize=22, numbytes=0, numfiles=0)) == 0
    many = DirectoryOffer("d", zipsize=2_000_000, numbytes=10_000, numfiles=10_000)
    assert space_needed(many) == 10_000 + 10_000 * 4096  # each tiny file takes a block
