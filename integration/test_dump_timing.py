"""``--dump-timing FILE``: a JSON timeline in official 0.24's layout, from send and receive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Peers

interop = pytest.mark.interop

LAYOUT = {"name", "start", "stop", "details"}
MILESTONES = ["command dispatch", "code ready", "key established", "key confirmed",
              "mailbox closed", "exit"]
"""In this order on both sides; "code consumed" falls between "code ready" and the exit."""


def in_layout(path: Path) -> list[dict]:
    events = json.loads(path.read_text())
    assert isinstance(events, list) and events
    assert all(set(event) == LAYOUT for event in events), events
    return events


def timeline(path: Path) -> list[dict]:
    """Ours, unlike official's (which lists spans as they began), is in time order."""
    events = in_layout(path)
    starts = [event["start"] for event in events]
    assert starts == sorted(starts), events
    return events


@interop
def test_dump_timing_on_both_sides_in_official_layout(peers: Peers, tmp_path: Path) -> None:
    mine, theirs = tmp_path / "send.json", tmp_path / "official.json"
    received_timing = tmp_path / "receive.json"
    s = peers.hilltop("--dump-timing", str(mine), "send", "--text", "timed")
    r = peers.hilltop("--dump-timing", str(received_timing), "receive", s.wait_for_code())
    sent, received = s.finish(), r.finish()
    assert sent.returncode == 0 and received.returncode == 0, sent.describe()
    assert f"Timing data written to {mine}" in sent.stderr
    for path in (mine, received_timing):
        events = timeline(path)
        names = [event["name"] for event in events]
        assert [n for n in names if n in MILESTONES] == MILESTONES, names
        assert "code consumed" in names, names
        assert events[0]["details"]["command"] in ("send", "receive")
        assert events[-1]["details"] == {"status": 0}

    o = peers.official("--dump-timing", str(theirs), "send", "--text", "timed")
    peers.official("receive", o.wait_for_code()).finish()
    assert o.finish().returncode == 0
    in_layout(theirs)  # the layout we copy is official's own


@interop
def test_dump_timing_records_a_failure_and_an_unwritable_file_only_warns(
        peers: Peers, tmp_path: Path) -> None:
    """The file is written when the command fails (official writes none then): timings help
    most there. A file that cannot be written is one warning line, not a changed status."""
    failed_timing = tmp_path / "failed.json"
    failed = peers.hilltop("--dump-timing", str(failed_timing), "receive",
                           "--only-text", "1-no-such-code", relay_url="ws://127.0.0.1:9/v1"
                           ).finish()
    assert failed.returncode == 1, failed.describe()
    assert timeline(failed_timing)[-1]["details"] == {"status": 1}

    unwritable = tmp_path / "no-such-dir" / "t.json"
    s = peers.hilltop("--dump-timing", str(unwritable), "send", "--text", "timed")
    r = peers.official("receive", s.wait_for_code())
    sent = s.finish()
    assert r.finish().returncode == 0 and sent.returncode == 0, sent.describe()
    assert f"Warning: could not write timing data to {unwritable}" in sent.stderr
    assert "Traceback" not in sent.stderr
