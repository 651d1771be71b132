"""The README's library examples run as written: an asyncio sender, a Twisted message pair."""

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

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example(name: str, *args: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(EXAMPLES / name), *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def read_code(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("Wormhole code is: "):
            return line.split(": ", 1)[1].strip()
    raise AssertionError(f"no code printed: {proc.communicate()}")


@pytest.mark.interop
def test_asyncio_example_sends_a_file_to_the_official_client(
        tmp_path: Path, mailbox_url: str, transit_helper: str,
        official: Callable[..., Peer]) -> None:
    src = tmp_path / "letter.txt"
    src.write_text("dear peer\n")
    env = dict(os.environ, WORMHOLE_RELAY_URL=mailbox_url, WORMHOLE_TRANSIT_HELPER=transit_helper)
    sender = example("asyncio_send_file.py", str(src), env=env, cwd=tmp_path)
    try:
        code = read_code(sender)
        dest = tmp_path / "dest"
        dest.mkdir()
        received = official("receive", "--accept-file", code, cwd=dest).finish(60)
        out, err = sender.communicate(timeout=60)
    finally:
        sender.kill()
    assert received.returncode == 0, received.describe()
    assert sender.returncode == 0, err
    assert "sent and confirmed" in out
    assert (dest / "letter.txt").read_text() == "dear peer\n"


def test_twisted_example_exchanges_messages(tmp_path: Path, mailbox_url: str,
                                            fresh_code: str) -> None:
    env = dict(os.environ, WORMHOLE_RELAY_URL=mailbox_url)
    a = example("twisted_text.py", fresh_code, env=env, cwd=tmp_path)
    b = example("twisted_text.py", fresh_code, env=env, cwd=tmp_path)
    try:
        (out_a, err_a), (out_b, err_b) = a.communicate(timeout=60), b.communicate(timeout=60)
    finally:
        a.kill()
        b.kill()
    assert a.returncode == 0 and b.returncode == 0, (err_a, err_b)
    assert out_a.strip() == f"hello from pid {b.pid}"
    assert out_b.strip() == f"hello from pid {a.pid}"
