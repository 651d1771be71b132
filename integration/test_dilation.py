"""Dilation with real peers: hilltop against official 0.24's library (``dilate()``), and a
reconnect mid-stream that loses nothing.

The official side is integration/official_dilation_peer.py in the peers venv (it needs
``magic-wormhole[dilate]``); hilltop's is integration/dilation_peer.py. Each echoes a
subchannel's bytes, so one run checks both directions: the opener compares the SHA-256 of
what came back with what the listener saw.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SIZE = 3_000_000


def start(python: Path | str, script: str, *args: str,
          env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    import os

    return subprocess.Popen([str(python), str(HERE / script), *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, **(env or {})))


def finish(proc: subprocess.Popen[str], timeout: float = 90) -> str:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"peer hung:\n{out}\n{err[-3000:]}") from None
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{out}\n{err[-3000:]}"
    return out


def line(out: str, prefix: str) -> str:
    found = [ln for ln in out.splitlines() if ln.startswith(prefix)]
    assert found, f"no {prefix!r} line in:\n{out}"
    return found[-1]


def official_python(peers_venv: Path) -> Path:
    python = peers_venv / "bin" / "python"
    check = subprocess.run([str(python), "-c", "import noise"], capture_output=True)
    if check.returncode != 0:
        pytest.fail("the peers venv lacks noiseprotocol: install magic-wormhole[dilate]==0.24.0 "
                    "(.ci/run does)", pytrace=False)
    return python


@pytest.mark.interop
@pytest.mark.parametrize("opener", ["hilltop", "official"])
def test_subchannel_echo_with_official(opener: str, peers_venv: Path, mailbox_url: str,
                                       fresh_code: str) -> None:
    official = official_python(peers_venv)
    ours = sys.executable
    open_py, listen_py = (ours, official) if opener == "hilltop" else (official, ours)
    open_script, listen_script = (
        ("dilation_peer.py", "official_dilation_peer.py") if opener == "hilltop"
        else ("official_dilation_peer.py", "dilation_peer.py"))
    listener = start(listen_py, listen_script, mailbox_url, fresh_code, "listen")
    opener_proc = start(open_py, open_script, mailbox_url, fresh_code, "open", str(SIZE))
    opened = finish(opener_proc)
    served = finish(listener)
    echoed = line(opened, "echoed ").split()
    assert echoed[1] == str(SIZE)
    assert line(served, "served ").split()[1:] == echoed[1:]


@pytest.mark.interop
def test_reconnect_mid_stream_with_official_loses_nothing(
        peers_venv: Path, mailbox_url: str, fresh_code: str) -> None:
    """hilltop drops the L2 connection a third of the way; both peers build a second
    generation, the unacked records go again, and the echo is complete and identical."""
    official = official_python(peers_venv)
    listener = start(official, "official_dilation_peer.py", mailbox_url, fresh_code, "listen")
    opener = start(sys.executable, "dilation_peer.py", mailbox_url, fresh_code, "open", str(SIZE),
                   env={"HILLTOP_DROP_AFTER": str(SIZE // 3)})
    opened = finish(opener)
    served = finish(listener)
    assert "dropping the L2 connection" in opened
    assert line(opened, "generations ") == "generations 2"
    echoed = line(opened, "echoed ").split()
    assert echoed[1] == str(SIZE)
    assert line(served, "served ").split()[1:] == echoed[1:]


@pytest.mark.interop
def test_a_paused_hilltop_reader_holds_back_official(
        peers_venv: Path, mailbox_url: str, fresh_code: str) -> None:
    """Inbound flow control against official: hilltop's consumer of the echo pauses for 2 s a
    third of the way; hilltop stops reading L2 (only what one read held still arrives), the
    official echo backs up, and after the pause every byte comes back, identical."""
    official = official_python(peers_venv)
    listener = start(official, "official_dilation_peer.py", mailbox_url, fresh_code, "listen")
    opener = start(sys.executable, "dilation_peer.py", mailbox_url, fresh_code, "open", str(SIZE),
                   env={"HILLTOP_PAUSE_AT": str(SIZE // 3)})
    opened = finish(opener)
    served = finish(listener)
    paused = line(opened, "paused at ").split()
    print(" ".join(paused))
    assert int(paused[3]) <= 256 * 1024, paused  # one L2 read's worth, not the rest
    echoed = line(opened, "echoed ").split()
    assert echoed[1] == str(SIZE)
    assert line(served, "served ").split()[1:] == echoed[1:]
