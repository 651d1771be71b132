"""A durable transfer that starts on the relay moves to the direct path once it opens.

Two public hosts of the NAT lab (hostC sends, hostD receives) whose direct path is dropped by
an nftables table in hostD at the start, so the transit relay wins the first generation. When
a few MB have crossed, the table goes; the Dilation leader's next probe
(:mod:`hilltop.dilation.takeover`) finds the path and the transfer moves to a direct
generation. hostC's link is throttled (tc tbf) so the move happens mid-transfer. A counter in
hostD (another table, which stays) counts what hostC sends it directly; the relay's usage
table what it carried; together they say how much crossed twice.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from durablelab import nft_counter, path_reports, start_durable_pair, wait_for_partial
from transferkit import digest, random_file

from hilltop.rendezvous.capabilities import DURABLE, FEATURES

pytestmark = pytest.mark.skipif(DURABLE not in FEATURES,
                                reason="the dilate extra (noiseprotocol) is not installed")

SIZE = 60 * 1000 * 1000
RATE = "40mbit"
"""hostC's link: 60 MB take ~12 s, so the switch (the probes run 2 s, 9 s, 21 s after the
relay's win) comes mid-transfer."""
UNBLOCK_AT = int(os.environ.get("HILLTOP_TAKEOVER_UNBLOCK_AT", 5 * 1000 * 1000))
"""Bytes at the receiver when the block goes: the relay generation is running by then (set
``HILLTOP_TAKEOVER_UNBLOCK_AT`` to unblock later in the probe schedule, by hand)."""
SENDER, RECEIVER = "198.19.0.4", "198.19.0.5"
BLOCK = f"""table inet takeover_block {{
  chain input {{ type filter hook input priority 0; ip saddr {SENDER} drop; }}
  chain output {{ type filter hook output priority 0; ip daddr {SENDER} drop; }}
}}
"""
COUNT = f"""table inet takeover_count {{
  chain input {{ type filter hook input priority -10;
    ip saddr {SENDER} tcp flags & (syn | rst) == 0 counter; }}
}}
"""


@pytest.fixture
def lab(tmp_path: Path, peers_venv: Path) -> Iterator[Any]:
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "nft", "tc")):
        pytest.skip("the namespace lab needs root, iproute2, tc and nftables")
    from natlab import NatLab

    lab = NatLab(tmp_path / "lab")
    try:
        lab.up()
        lab.add_public_host("hostC", SENDER)
        lab.add_public_host("hostD", RECEIVER)
        lab.exec("hostC", "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", RATE,
                 "burst", "64kb", "latency", "50ms")
        lab.exec("hostD", "nft", "-f", "-", stdin=COUNT)
        lab.exec("hostD", "nft", "-f", "-", stdin=BLOCK)
        lab.servers(peers_venv / "bin" / "twist", coturn=False, relay=True)
        yield lab
    finally:
        lab.down()


def direct_counter(lab: Any) -> tuple[int, int]:
    """Packets and bytes hostD received straight from hostC (not SYN or RST)."""
    return nft_counter(lab, "hostD", "takeover_count")


def test_a_direct_path_takes_over_from_the_relay(lab: Any, tmp_path: Path) -> None:
    src = random_file(tmp_path / "src" / "takeover.bin", SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()
    sender, receiver = start_durable_pair(lab, "hostC", "hostD", src, dest,
                                          "direct-tcp,relay")
    part = dest / f".{src.name}.hilltop-part"
    wait_for_partial(part, UNBLOCK_AT, receiver, sender)
    assert direct_counter(lab)[1] == 0, "data crossed the blocked path"
    lab.exec("hostD", "nft", "delete", "table", "inet", "takeover_block")
    unblocked = time.monotonic()
    at_unblock = part.stat().st_size
    flowing: float | None = None
    while receiver.proc.poll() is None and time.monotonic() < unblocked + 60:
        if flowing is None and direct_counter(lab)[1] > 1_000_000:
            flowing = time.monotonic() - unblocked
        time.sleep(0.02)
    assert receiver.finish(30) == 0, receiver.describe() + sender.describe()
    assert sender.finish(30) == 0, sender.describe()
    assert digest(dest / src.name) == digest(src)

    reports = path_reports(receiver.stdout)
    seen = [path for path, _time in reports]
    assert len(seen) >= 3, receiver.describe()
    assert seen[0].startswith("relay "), seen  # the relay won the first generation
    assert seen[-1].startswith("direct-tcp "), seen  # and the direct path took over
    assert "reconnecting" in seen, seen
    assert not any(p.startswith("relay ") for p in seen[1:]), seen  # one switch, no flapping

    packets, direct = direct_counter(lab)
    payload = direct - 52 * packets  # IPv4 and TCP (with timestamps) headers
    relayed = lab.relayed_bytes()
    again = relayed + payload - SIZE
    stall = reports[-1][1] - reports[-2][1]  # "reconnecting" to the direct generation
    print(f"unblocked at {at_unblock} bytes on disk; direct bytes flowing {flowing:.2f} s "
          f"after; the switch's stall {stall:.2f} s; relayed {relayed}, direct payload "
          f"{payload}, sent twice or overhead {again}")
    assert flowing is not None and flowing < 20.0, flowing
    assert payload > SIZE * 0.25, (payload, at_unblock)  # a good part went direct
    assert again < SIZE * 0.12, (relayed, payload)
