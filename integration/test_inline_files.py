"""Small files between hilltop peers ride in the offer (``inline-file-v1``): through the
mailbox, no transit connection, in both start orders; a file over the limit, or a run that
chose its transports, still crosses transit. Official peers are covered by
test_interop_files.py (its ``empty`` payload both ways)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from test_json_events import kinds, validated

if TYPE_CHECKING:
    from conftest import Peer, Peers

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
        return peers.hilltop("--json", "receive", "--accept-file", *receive_flags, code,
                             cwd=dest)

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


@pytest.mark.parametrize("order", ["receiver-first", "sender-first"])
def test_a_small_file_goes_through_the_mailbox(peers: Peers, tmp_path: Path, fresh_code: str,
                                               order: str) -> None:
    s_events, r_events, path = transfer(peers, tmp_path, fresh_code, b"hi\n",
                                        receiver_first=order == "receiver-first")
    for events in (s_events, r_events):
        assert "transit_attempt" not in kinds(events), events  # no transit connection at all
        [connected] = [e for e in events if e["event"] == "transit_connected"]
        assert connected["via"] == "mailbox"
        assert events[-1] == {**events[-1], "event": "done", "via": "mailbox", "bytes": 3}
    assert r_events[-1]["path"] == str(path)


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
