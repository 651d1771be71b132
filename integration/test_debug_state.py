"""``--debug-state`` in real transfers: accepted as official spells it, traces on stderr only.

Official 0.24 prints its machines' moves on stdout; hilltop prints its own tables' moves in the
same line format on stderr, so a received text is still exactly what was sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Peer

MOVE = re.compile(r"^(send|recv)\.(\w+)\.(\w+)\[(\w+)\]\.([\w ]+) -> \[(\w+)\]$")
"""Official's ``CLIENT.MACHINE[OLD].INPUT -> [NEW]``, with hilltop's ``module.Enum`` as machine."""


def traced(stderr: str) -> list[tuple[str, ...]]:
    return [m.groups() for line in stderr.splitlines() if (m := MOVE.match(line))]


def test_a_text_transfer_traces_both_sides_mailboxes(hilltop: Callable[..., Peer]) -> None:
    sender = hilltop("send", "--debug-state", "--text", "traced text")
    code = sender.wait_for_code()
    received = hilltop("receive", "--debug-state=M", code).finish()
    sent = sender.finish()
    assert received.returncode == 0 and sent.returncode == 0, (sent.describe(),
                                                                 received.describe())
    assert received.stdout == "traced text", received.describe()
    for who, result in (("send", sent), ("recv", received)):
        moves = traced(result.stderr)
        assert {m[0] for m in moves} == {who}, result.describe()
        assert (who, "mailbox", "Stage", "NO_CODE", "code", "HAVE_CODE") in moves
        assert (who, "mailbox", "Stage", "KEYED", "confirm", "CONFIRMED") in moves
        assert (who, "mailbox", "Link", "CONNECTING", "connected", "UP") in moves
    assert ("recv", "mailbox", "Plate", "NONE", "claim", "CLAIMING") in traced(received.stderr)


def test_a_file_transfer_traces_the_transit_machines(hilltop: Callable[..., Peer],
                                                     tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"x" * 20_000)  # over offers.INLINE_LIMIT: transit
    out = tmp_path / "out"
    out.mkdir()
    sender = hilltop("send", "--debug-state=handshake,race", "f.txt", cwd=tmp_path)
    code = sender.wait_for_code()
    received = hilltop("receive", "--accept-file", code, "--debug-state", cwd=out).finish()
    sent = sender.finish()
    assert received.returncode == 0 and sent.returncode == 0, (sent.describe(),
                                                                 received.describe())
    assert (out / "f.txt").read_bytes() == b"x" * 20_000
    sender_moves = traced(sent.stderr)
    assert {m[1] for m in sender_moves} == {"handshake", "race"}, sent.describe()
    assert ("send", "handshake", "ShakeState", "READY", "send go", "DONE") in sender_moves
    assert ("send", "race", "AttemptState", "RUNNING", "win", "WON") in sender_moves
    receiver_moves = traced(received.stderr)
    assert ("recv", "handshake", "ShakeState", "WAIT_GO", "got go", "DONE") in receiver_moves
    assert {m[1] for m in receiver_moves} >= {"mailbox", "handshake", "race"}
