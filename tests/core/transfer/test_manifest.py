"""The ``hilltop-files`` manifest (``files-v1``): its wire shape and the name rules."""

from __future__ import annotations

import json

import pytest

from hilltop.errors import ProtocolError, UnknownOfferError, UnsafeOfferError
from hilltop.transfer import offers
from hilltop.transfer.manifest import (
    MAX_ENTRIES,
    FilesOffer,
    ManifestEntry,
    TopItem,
    checked_offer,
    files_from_body,
)


def wire(entries: list[object]) -> bytes:
    return json.dumps({"offer": {"hilltop-files": {"entries": entries}}}).encode()


def test_round_trip_keeps_order_sizes_and_modes() -> None:
    offer = checked_offer((ManifestEntry("a.txt", 12, 0o644), ManifestEntry("DIR/x/y.bin", 5),
                           ManifestEntry("DIR/empty/", 0)))
    back = offers.parse_app_message(offer.to_wire())
    assert back == offer
    assert isinstance(back, FilesOffer)
    assert back.numbytes == 17 and back.numfiles == 2
    assert back.tops() == (TopItem("a.txt", False), TopItem("DIR", True))
    assert json.loads(offer.to_wire())["offer"]["hilltop-files"]["entries"][0] == {
        "path": "a.txt", "size": 12, "mode": 0o644}


def test_paths_are_normalised() -> None:
    offer = offers.parse_app_message(wire([{"path": "./a//b/./c.txt", "size": 1}]))
    assert isinstance(offer, FilesOffer)
    assert offer.entries[0].path == "a/b/c.txt"


def test_unknown_keys_are_ignored() -> None:
    body = {"offer": {"hilltop-files": {"entries": [{"path": "a", "size": 1, "x": 2}],
                                        "later": True}}}
    assert isinstance(offers.parse_app_message(json.dumps(body).encode()), FilesOffer)


@pytest.mark.parametrize(("path", "why"), [
    ("/etc/passwd", "absolute"),
    ("../up.txt", "'..'"),
    ("a/../../b", "'..'"),
    ("C:evil", "drive letter"),
    ("a\\b", "backslash"),
    ("bell\x07.txt", "control characters"),
    ("x" * 256, "longer than 255 bytes"),
    ("/".join(["d"] * 300) + "/f", "nested more than"),
    ("./", "empty name"),
    # lone surrogates survive json.loads: "\ud800" used to escape as UnicodeEncodeError, a
    # "bug in hilltop" with a report file; the surrogate-escape range too, for one rule
    ("a/\ud800.txt", "lone surrogate"),
    ("\udcff", "lone surrogate"),
    ("d/x\udfff/f", "lone surrogate"),
])
def test_unsafe_names_are_refused_like_zip_entries(path: str, why: str) -> None:
    with pytest.raises(UnsafeOfferError, match="refusing the offered files") as err:
        offers.parse_app_message(wire([{"path": path, "size": 1}]))
    assert why in str(err.value)


@pytest.mark.parametrize(("entries", "why"), [
    ([{"path": "a.txt", "size": 1}, {"path": "a.txt", "size": 2}], "appears twice"),
    ([{"path": "A.txt", "size": 1}, {"path": "a.txt", "size": 2}], "clashes with"),
    ([{"path": "caf\u00e9", "size": 1}, {"path": "cafe\u0301", "size": 1}], "clashes with"),
    # issue 27 item 23: folders are held to the case rule too (were accepted)
    ([{"path": "Dir/a", "size": 1}, {"path": "dir/b", "size": 1}], "clashes with 'Dir'"),
    ([{"path": "x/Dir/", "size": 0}, {"path": "x/dir/b", "size": 1}], "clashes with 'Dir'"),
    ([{"path": "README", "size": 1}, {"path": "readme/b", "size": 1}], "both a file"),
    ([{"path": "e/", "size": 0}, {"path": "e/", "size": 0}], "appears twice"),
    ([{"path": "d", "size": 1}, {"path": "d/x", "size": 1}], "both a file and a folder"),
    ([{"path": "d/x", "size": 1}, {"path": "d", "size": 1}], "both a file and a folder"),
    ([{"path": "e/", "size": 0}, {"path": "e", "size": 1}], "both a file and a folder"),
    ([{"path": "e/", "size": 3}], "folder with a size"),
    ([{"path": "f", "size": -1}], "bad size"),
    ([{"path": "f", "size": True}], "bad size"),
    ([{"path": "f", "size": 1, "mode": 0o10000}], "bad mode"),
])
def test_clashing_or_malformed_entries_are_refused(entries: list[object], why: str) -> None:
    with pytest.raises(ProtocolError) as err:
        offers.parse_app_message(wire(entries))
    assert why in str(err.value)
    # a name we will not create is a refusal (exit 5); a broken shape is a protocol error
    malformed = why in ("bad size", "bad mode", "folder with a size")
    assert isinstance(err.value, UnsafeOfferError) is not malformed


def test_one_folder_may_be_named_implicitly_and_explicitly() -> None:
    """An empty folder's entry beside files in it (other writers' habit) is no clash."""
    offer = files_from_body({"entries": [{"path": "d/x", "size": 1}, {"path": "d/", "size": 0},
                                         {"path": "D2/", "size": 0}, {"path": "D2/y"}]})
    assert [e.path for e in offer.entries] == ["d/x", "d/", "D2/", "D2/y"]


@pytest.mark.parametrize("body", [[], {"entries": "a"}, {"entries": []}, {"entries": [3]},
                                  {"entries": [{"size": 1}]}])
def test_malformed_manifests_are_protocol_errors(body: object) -> None:
    data = json.dumps({"offer": {"hilltop-files": body}}).encode()
    with pytest.raises(ProtocolError) as err:
        offers.parse_app_message(data)
    assert not isinstance(err.value, UnknownOfferError | UnsafeOfferError)


def test_a_manifest_of_too_many_entries_is_refused_before_any_is_read() -> None:
    entries = [{"path": f"f{i}", "size": 0} for i in range(MAX_ENTRIES + 1)]
    with pytest.raises(ProtocolError, match=f"more than {MAX_ENTRIES} entries"):
        files_from_body({"entries": entries})
