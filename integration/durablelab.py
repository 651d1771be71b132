"""A durable transfer between two hosts of the namespace lab (integration/natlab.py): how the
lab's durable tests start one, wait for it to be under way and read its path reports.

One place for what integration/test_durable.py, test_durable_takeover.py and
test_durable_punchover.py share, so a change to the commands or the ``--json`` events is made
once.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from nsproc import Proc


def start_durable_pair(lab: Any, sender_host: str, receiver_host: str, src: Path, dest: Path,
                       transports: str) -> tuple[Proc, Proc]:
    """``send --durable`` on ``sender_host``, then ``receive`` of its code on
    ``receiver_host`` into ``dest``; both with ``--json`` and only ``transports``."""
    from natlab import MAILBOX, TRANSIT_HELPER
    from nsproc import hilltop_command

    head = [*hilltop_command(), "--relay-url", MAILBOX, "--transit-helper", TRANSIT_HELPER,
            "--json"]
    flags = ["--hide-progress", "--transports", transports]
    sender = lab.run(sender_host, "send", [*head, "send", "--durable", *flags, str(src)],
                     cwd=src.parent)
    code = sender.wait_for(r'"event": "code", "time": [0-9.]+, "code": "([^"]+)"', 30).group(1)
    receiver = lab.run(receiver_host, "receive",
                       [*head, "receive", *flags, "--accept-file", code], cwd=dest)
    return sender, receiver


def wait_for_partial(part: Path, at_least: int, *procs: Proc, timeout: float = 60.0) -> None:
    """Until the receiver's hidden partial ``part`` holds ``at_least`` bytes; every process
    must still be running meanwhile."""
    deadline = time.monotonic() + timeout
    while not (part.exists() and part.stat().st_size >= at_least):
        described = "".join(p.describe() for p in procs)
        assert time.monotonic() < deadline, f"never {at_least} bytes in {part}:\n{described}"
        assert all(p.proc.poll() is None for p in procs), described
        time.sleep(0.02)


def path_reports(stdout: str) -> list[tuple[str, float]]:
    """The receiver's path reports in order (``transit_connected``, then ``transit_path``
    events): the path, or "reconnecting", and the event's time."""
    out = []
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if event.get("event") in ("transit_connected", "transit_path"):
            out.append((event.get("via") or event.get("state"), float(event["time"])))
    return out


def nft_counter(lab: Any, host: str, table: str) -> tuple[int, int]:
    """Packets and bytes of the one counter in nftables table ``inet TABLE`` on ``host`` (the
    takeover tests count what crossed the path they blocked and then opened)."""
    out = subprocess.run(["ip", "netns", "exec", lab.ns(host), "nft", "list", "table", "inet",
                          table], capture_output=True, text=True, check=True, timeout=10).stdout
    m = re.search(r"counter packets (\d+) bytes (\d+)", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))
