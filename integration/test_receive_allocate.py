"""``wormhole receive --allocate``: the receiver makes the code and an official 0.24 sender
types it, as official's own receiver and sender do."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Peers

interop = pytest.mark.interop

ALLOCATED = re.compile(r"Allocated code: (\S+)")


@interop
def test_receive_allocate_with_official_sender(peers: Peers, tmp_path: Path) -> None:
    source = tmp_path / "allocated.txt"
    source.write_bytes(b"the receiver went first\n" * 100)
    receiver = peers.hilltop("receive", "--allocate", "--accept-file", "--hide-progress")
    code = receiver.wait_for_line(ALLOCATED).group(1)
    receiver.wait_for_line(re.escape(f"wormhole send --code {code} <filename>"))
    sender = peers.official("send", "--code", code, "--hide-progress", str(source))
    sent, received = sender.finish(), receiver.finish()
    assert sent.returncode == 0, sent.describe()
    assert received.returncode == 0, received.describe()
    assert (receiver.cwd / source.name).read_bytes() == source.read_bytes()


@interop
def test_receive_allocate_text_from_official_sender(peers: Peers) -> None:
    receiver = peers.hilltop("receive", "-a", "--code-length", "3")
    code = receiver.wait_for_line(ALLOCATED).group(1)
    assert len(code.split("-")) == 4, code  # the nameplate and three words
    receiver.wait_for_line(r"^Waiting for sender\.\.\.$", 15)  # official says it after 1 s
    sender = peers.official("send", "--code", code, "--text", "receiver first")
    sent, received = sender.finish(), receiver.finish()
    assert sent.returncode == 0, sent.describe()
    assert received.returncode == 0, received.describe()
    assert received.stdout.strip() == "receiver first"
    assert received.stderr.count("Waiting for sender...") == 1, received.describe()


@interop
def test_receive_allocate_json_reports_the_code(peers: Peers) -> None:
    from test_json_events import validated

    receiver = peers.hilltop("--json", "receive", "--allocate")
    code = receiver.wait_for_line(r'"event": "code", "time": [\d.]+, "code": "([^"]+)"').group(1)
    sender = peers.official("send", "--code", code, "--text", "json first")
    sent, received = sender.finish(), receiver.finish()
    assert sent.returncode == 0 and received.returncode == 0, received.describe()
    events = validated(received.stdout)
    assert events[0] == {**events[0], "event": "code", "code": code}
    assert "Allocated code" not in received.stderr  # the event replaces the human lines
    assert [e["message"] for e in events if e["event"] == "text"] == ["json first"]
