"""Small files between hilltop peers ride in the offer (``inline-file-v1``): through the
mailbox, no transit connection, in both start orders; a file over the limit, or a run that
chose its transports, still crosses transit. Official peers are covered by
test_interop_files.py (its ``empty`` payload both ways)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from test_dump_timing import MILESTONES, timeline
from test_json_events import kinds, validated

if TYPE_CHECKING:
    from conftest import Peer, Peers

HERE = Path(__file__).resolve().parent
LIMIT = 16 * 1024  # hilltop.transfer.offers.INLINE_LIMIT
CODE_EVENT = r'"event": "code"'


def transfer(peers: Peers, tmp_path: Path, code: str, data: bytes, *, receiver_first: bool,
             send_flags: tuple[str, ...] = (), receive_flags: tuple[str, ...] = ()
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Path]:
    source = tmp_path / "small.bin"
    source.write_bytes(data)
    dest = tmp_path / "dest"
    dest.mkdir()

    def sender() -> Peer:
        return peers.hilltop("--json", "send", *send_flags, "--code", code, str(source))

    def receiver() -> Peer:
        return peers.hilltop("--json", "--dump-timing", str(tmp_path / "timing.json"),
                             "receive", "--accept-file", *receive_flags, code, cwd=dest)

    first = receiver() if receiver_first else sender()
    first.wait_for_line(CODE_EVENT, 30)
    second = sender() if receiver_first else receiver()
    r, s = (first, second) if receiver_first else (second, first)
    received, sent = r.finish(60), s.finish(60)
    assert received.returncode == 0, received.describe()
    assert sent.returncode == 0, sent.describe()
    assert "Traceback" not in received.stderr + sent.stderr
    assert (dest / source.name).read_bytes() == data
    assert [p.name for p in dest.iterdir()] == [source.name]  # no temporary left
    return validated(sent.stdout), validated(received.stdout), dest / source.name


@pytest.mark.parametrize("order", ["receiver-first", "sender-first", "receiver-first-busy"])
def test_a_small_file_goes_through_the_mailbox(peers: Peers, tmp_path: Path, fresh_code: str,
                                               order: str, request: pytest.FixtureRequest
                                               ) -> None:
    if order.endswith("-busy"):
        request.getfixturevalue("busy_loop")  # a core kept busy beside both processes
    s_events, r_events, path = transfer(peers, tmp_path, fresh_code, b"hi\n",
                                        receiver_first=order.startswith("receiver-first"))
    for events in (s_events, r_events):
        assert "transit_attempt" not in kinds(events), events  # no transit connection at all
        [connected] = [e for e in events if e["event"] == "transit_connected"]
        assert connected["via"] == "mailbox"
        assert events[-1] == {**events[-1], "event": "done", "via": "mailbox", "bytes": 3}
    assert r_events[-1]["path"] == str(path)
    names = [e["name"] for e in timeline(tmp_path / "timing.json")]
    assert [n for n in names if n in MILESTONES] == MILESTONES, names  # --dump-timing works


@pytest.mark.parametrize("case", ["over-the-limit", "sender-transports", "receiver-transports"])
def test_transit_where_inline_does_not_apply(peers: Peers, tmp_path: Path, fresh_code: str,
                                             case: str) -> None:
    size = LIMIT + 1 if case == "over-the-limit" else 3
    chosen = ("--transports", "direct-tcp,relay")
    s_events, r_events, _ = transfer(
        peers, tmp_path, fresh_code, b"x" * size, receiver_first=False,
        send_flags=chosen if case == "sender-transports" else (),
        receive_flags=chosen if case == "receiver-transports" else ())
    for events in (s_events, r_events):
        assert "transit_attempt" in kinds(events), events
        assert events[-1]["via"].startswith("direct-tcp "), events[-1]


@pytest.mark.parametrize("listed", [True, False], ids=["library-sender", "older-hilltop"])
def test_the_library_sender_takes_the_same_path(peers: Peers, tmp_path: Path, fresh_code: str,
                                                mailbox_url: str, transit_helper: str,
                                                listed: bool) -> None:
    """The library's send (``hilltop.transfer.session.send``, as ``Wormhole.send_file``)
    decides as the CLI does; a hilltop peer that does not list the feature gets transit."""
    from hilltop.rendezvous.capabilities import FEATURES, INLINE

    source = tmp_path / "small.bin"
    source.write_bytes(b"from the library\n")
    dest = tmp_path / "dest"
    dest.mkdir()
    features = ",".join(f for f in FEATURES if listed or f != INLINE)
    s = peers.run("library-sender", [sys.executable, str(HERE / "feature_sender.py"),
                                     mailbox_url, transit_helper, fresh_code, str(source),
                                     features],
                  relay_url=mailbox_url, transit_helper=transit_helper)
    received = peers.hilltop("--json", "receive", "--accept-file", fresh_code,
                             cwd=dest).finish(60)
    sent = s.finish(60)
    assert received.returncode == 0 and sent.returncode == 0, received.describe()
    assert (dest / source.name).read_bytes() == source.read_bytes()
    done = validated(received.stdout)[-1]
    assert (done["via"] == "mailbox") is listed, done


@pytest.mark.parametrize(("mode", "why"), [
    ("unlisted", "did not list inline-file-v1"),
    ("long", "inline file of 4 bytes that says it has 3"),
    ("huge", "over the 16384 an offer may carry"),
    ("garbage", "data is not base64"),
])
def test_a_hostile_inline_offer_ends_the_receive_cleanly(peers: Peers, tmp_path: Path,
                                                         fresh_code: str, mailbox_url: str,
                                                         mode: str, why: str) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    s = peers.run("hostile-inline", [sys.executable, str(HERE / "hostile_inline_sender.py"),
                                     mailbox_url, fresh_code, mode], relay_url=mailbox_url)
    flags = ("--transports", "direct-tcp") if mode == "unlisted" else ()
    received = peers.hilltop("receive", "--accept-file", *flags, fresh_code,
                             cwd=dest).finish(60)
    sent = s.finish(60)
    assert received.returncode == 1, received.describe()
    assert "Traceback" not in received.stderr, received.describe()
    [line] = [ln for ln in received.stderr.splitlines() if ln.startswith("ERROR:")]
    assert why in line, received.describe()
    assert list(dest.iterdir()) == []
    assert '"error"' in sent.stdout, sent.describe()  # the sender was told
