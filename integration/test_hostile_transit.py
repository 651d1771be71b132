"""A sender with a valid code whose transit bytes go wrong (issue 20, point 3), end to end.

``hostile_transit_peer.py`` offers a 2 MB file honestly and then breaks its third record (a
skipped nonce, a flipped bit, a 4 GiB length prefix) or hangs up after 1 MB. The hilltop
receiver must end with one clear line, a non-zero exit, and nothing visible where the file
would have gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Peer

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize(("mode", "says"), [
    ("skip-nonce", "nonce 3, expected 2"),
    ("bad-mac", "failed to decrypt"),
    ("huge-length", "transit record too long"),
    ("short", "of 2000000 bytes; the file was not saved"),  # how many came depends on timing
])
def test_a_broken_record_stream_leaves_nothing(hilltop: Callable[..., Peer], mailbox_url: str,
                                               transit_helper: str, fresh_code: str,
                                               tmp_path: Path, mode: str, says: str) -> None:
    peer = subprocess.Popen([sys.executable, str(HERE / "hostile_transit_peer.py"), mailbox_url,
                             transit_helper, fresh_code, mode],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        received = hilltop("receive", "--accept-file", fresh_code, cwd=tmp_path).finish(60)
    finally:
        peer.kill()
        _, peer_err = peer.communicate()
    assert received.returncode != 0, (received.describe(), peer_err)
    assert "Traceback" not in received.stderr, received.describe()
    [line] = [ln for ln in received.stderr.splitlines() if ln.startswith("ERROR:")]
    assert says in line, (received.describe(), peer_err)
    assert [n for n in os.listdir(tmp_path) if not n.startswith(".")] == [], received.describe()
