"""The sender's "code has been consumed" notice, on stdout as official 0.24 prints it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Peers

interop = pytest.mark.interop

NOTICE = "Note: code has been consumed and can no longer be used."


@interop
@pytest.mark.parametrize("sender", ["official", "hilltop"])
def test_sender_says_the_code_was_consumed(peers: Peers, sender: str) -> None:
    """Official's sender is the reference: the same line, on stdout, once per transfer."""
    s = getattr(peers, sender)("send", "--text", "spent")
    r = peers.official("receive", s.wait_for_code())
    sent, received = s.finish(), r.finish()
    assert received.returncode == 0 and sent.returncode == 0, sent.describe()
    assert sent.stdout.splitlines().count(NOTICE) == 1, sent.describe()


@interop
def test_no_notice_when_nobody_came(peers: Peers) -> None:
    """A code nobody used is not consumed: hilltop's sender, interrupted, says nothing of it."""
    s = peers.hilltop("send", "--text", "unclaimed")
    s.wait_for_code()
    s.proc.terminate()
    result = s.finish()
    assert NOTICE not in result.stdout, result.describe()
