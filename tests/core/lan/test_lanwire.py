"""Service names, tags and TXT records for LAN mode (hilltop.lan.wire, pure)."""

from __future__ import annotations

import itertools

import pytest

from hilltop.errors import CodeFormatError, ProtocolError
from hilltop.hints._tcp import usable_address
from hilltop.lan import wire
from hilltop.rendezvous import codes

TK = bytes(range(32))


def test_mailbox_name_carries_the_nameplate_only() -> None:
    name = wire.mailbox_service_name("42")
    assert name == "nameplate-42._wormhole._tcp.local."
    assert wire.nameplate_of(name) == "42"
    txt = wire.mailbox_txt("42")
    assert txt == {"v": "1", "kind": "mailbox", "nameplate": "42", "path": "/v1"}
    # the words of a code never reach a record
    code = wire.make_code("42", 2, lambda n: b"\x69\xa9"[:n])
    assert code == "42-guitarist-revenge"
    for text in (name, *txt.values()):
        assert "guitarist" not in text and "revenge" not in text


@pytest.mark.parametrize("bad", ["", "4a", "7-x", "١٢", "1" * 41])
def test_nameplates_must_be_ascii_digits(bad: str) -> None:
    with pytest.raises(CodeFormatError):
        wire.mailbox_service_name(bad)


@pytest.mark.parametrize("name", [
    "transit-0011223344556677._wormhole._tcp.local.",
    "nameplate-._wormhole._tcp.local.",
    "nameplate-4x._wormhole._tcp.local.",
    "nameplate-4._other._tcp.local.",
])
def test_nameplate_of_rejects_other_names(name: str) -> None:
    assert wire.nameplate_of(name) is None


def test_transit_tags_differ_by_role_and_key() -> None:
    s = wire.transit_tag(TK, "sender")
    r = wire.transit_tag(TK, "receiver")
    assert len(s) == 16 and s != r
    assert wire.transit_tag(bytes(32), "sender") != s
    assert wire.transit_tag(TK, "sender") == s  # deterministic: both sides compute it
    assert wire.transit_service_name(s) == f"transit-{s}._wormhole._tcp.local."
    assert wire.peer_role("sender") == "receiver"
    with pytest.raises(ValueError):
        wire.transit_tag(TK, "relay")
    with pytest.raises(ValueError):
        wire.transit_service_name("XYZ")


def test_transit_tag_is_an_hkdf_of_the_key_not_the_key() -> None:
    tag = bytes.fromhex(wire.transit_tag(TK, "sender"))
    assert tag not in TK


def test_parse_mailbox_txt_accepts_ours_and_ignores_extra_keys() -> None:
    raw = {b"v": b"1", b"kind": b"mailbox", b"nameplate": b"7", b"path": b"/v1",
           b"future": b"x", b"flag": None, b"\xff": b"bad"}
    assert wire.parse_mailbox_txt(raw, "7") == wire.MailboxTxt("7", "/v1")
    assert wire.parse_mailbox_txt({b"v": b"1"}, "7").path == "/v1"


@pytest.mark.parametrize("raw", [
    {},
    {b"v": b"2"},
    {b"v": b"1", b"kind": b"transit"},
    {b"v": b"1", b"nameplate": b"8"},
    {b"v": b"1", b"path": b"v1"},
    {b"v": b"\xff"},
])
def test_parse_mailbox_txt_rejects_what_is_not_ours(raw: dict) -> None:
    with pytest.raises(ProtocolError):
        wire.parse_mailbox_txt(raw, "7")


def test_urls_put_ipv4_first_and_bracket_ipv6() -> None:
    addrs = ["fe80::1", "2001:2::11", "127.0.0.1", "198.18.0.11", "198.18.0.11", "::1"]
    assert wire.order_addresses(addrs) == ["198.18.0.11", "2001:2::11"]
    assert wire.mailbox_urls(addrs, 4000) == ["ws://198.18.0.11:4000/v1",
                                                 "ws://[2001:2::11]:4000/v1"]
    assert not usable_address("not an address")


def test_pick_nameplate_is_two_digits_and_avoids_taken_ones() -> None:
    counter = itertools.count()
    rnd = lambda n: next(counter).to_bytes(n, "big")  # noqa: E731
    picks = {wire.pick_nameplate(rnd) for _ in range(200)}
    assert all(len(p) == 2 for p in picks) and len(picks) == 90
    taken = [str(n) for n in range(10, 99)]
    assert wire.pick_nameplate(rnd, taken) == "99"
    with pytest.raises(ProtocolError):
        wire.pick_nameplate(rnd, [*taken, "99"])


def test_make_code_parses_back() -> None:
    code = wire.make_code("31", 3, lambda n: bytes(range(n)))
    parsed = codes.parse_code(code)
    assert parsed.nameplate == "31" and len(parsed.words) == 3
