"""A durable transfer that starts on the relay moves to a punched path once one opens.

Two hosts behind port-keeping NATs of the NAT lab (hostA sends, hostB receives): their
``direct-tcp`` hints are private addresses, so only the punch (``tcp-punch``, both sides dial
at once) can go direct. At the start an nftables table on each host drops what it sends to the
other's NAT, so the relay wins the first generation; when a few MB have crossed both go, and
the Dilation leader's next probe, which between hilltop peers asks the follower to punch back
(:mod:`hilltop.dilation.punchover`), finds the punched path. hostA's link is throttled so the
move happens mid-transfer; a counter in hostB counts what came from natA's public address (the
punched path), the relay's usage table what it carried.

Why the block is on the hosts, not on a router: a block that drops one host's punch before its
NAT (the first version: natA's forward chain) lets the other host's punch leave its own NAT,
whose conntrack keeps that half-open entry (SYN_SENT, 120 s). When the takeover's punch from
the blocked side then reaches that NAT before its host dialled again, the entry turns
SYN_SENT2 bound to the old SYN; the host's new SYN is INVALID for it and leaves the NAT
unmapped, so that punch path is dead until the entry expires, about 2 minutes (tcpdump and
``conntrack -L`` in docs/dilation.md, "Path takeover"). Blocked on the hosts, no NAT holds
state from the blocked race and the takeover's punch meets the NATs as a first punch does.
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

SIZE = 40 * 1000 * 1000
RATE = "40mbit"
"""hostA's link: 40 MB take ~8 s, so the switch (the first probe runs 2 s after the relay's
win) comes mid-transfer."""
UNBLOCK_AT = 4 * 1000 * 1000
NAT_A, NAT_B = "198.19.0.2", "198.19.0.3"
BLOCK = """table inet punch_block {{
  chain output {{ type filter hook output priority -10; ip daddr {peer_nat} drop; }}
}}
"""
BLOCKED = {"hostA": NAT_B, "hostB": NAT_A}
COUNT = f"""table inet punch_count {{
  chain input {{ type filter hook input priority -10;
    ip saddr {NAT_A} tcp flags & (syn | rst) == 0 counter; }}
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
        lab.exec("hostA", "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", RATE,
                 "burst", "64kb", "latency", "50ms")
        lab.exec("hostB", "nft", "-f", "-", stdin=COUNT)
        for host, peer_nat in BLOCKED.items():
            lab.exec(host, "nft", "-f", "-", stdin=BLOCK.format(peer_nat=peer_nat))
        lab.servers(peers_venv / "bin" / "twist", coturn=False, relay=True)
        yield lab
    finally:
        lab.down()


def punched_counter(lab: Any) -> tuple[int, int]:
    """Packets and bytes hostB received from natA's public address (not SYN or RST)."""
    return nft_counter(lab, "hostB", "punch_count")


def test_a_punched_path_takes_over_from_the_relay(lab: Any, tmp_path: Path) -> None:
    src = random_file(tmp_path / "src" / "punchover.bin", SIZE)
    dest = tmp_path / "dest"
    dest.mkdir()
    sender, receiver = start_durable_pair(lab, "hostA", "hostB", src, dest,
                                          "direct-tcp,tcp-punch,relay")
    part = dest / f".{src.name}.hilltop-part"
    wait_for_partial(part, UNBLOCK_AT, receiver, sender)
    assert punched_counter(lab)[1] == 0, "data crossed the blocked path"
    for host in BLOCKED:
        lab.exec(host, "nft", "delete", "table", "inet", "punch_block")
    unblocked, unblocked_at = time.monotonic(), time.time()
    at_unblock = part.stat().st_size
    flowing: float | None = None
    while receiver.proc.poll() is None and time.monotonic() < unblocked + 60:
        if flowing is None and punched_counter(lab)[1] > 1_000_000:
            flowing = time.monotonic() - unblocked
        time.sleep(0.02)
    assert receiver.finish(30) == 0, receiver.describe() + sender.describe()
    assert sender.finish(30) == 0, sender.describe()
    assert digest(dest / src.name) == digest(src)

    reports = path_reports(receiver.stdout)
    seen = [path for path, _time in reports]
    assert len(seen) >= 3, receiver.describe() + sender.describe()
    assert seen[0].startswith("relay "), seen  # the relay won the first generation
    assert seen[-1].startswith("tcp-punch "), seen  # and the punched path took over
    assert "reconnecting" in seen, seen
    assert not any(p.startswith("relay ") for p in seen[1:]), seen  # one switch, no flapping

    packets, punched = punched_counter(lab)
    payload = punched - 52 * packets  # IPv4 and TCP (with timestamps) headers
    relayed = lab.relayed_bytes()
    again = relayed + payload - SIZE
    stall = reports[-1][1] - reports[-2][1]  # "reconnecting" to the punched generation
    switched = reports[-1][1] - unblocked_at  # the receiver's event times are wall-clock
    print(f"unblocked at {at_unblock} bytes on disk; on the punched path {switched:.2f} s "
          f"after, punched bytes flowing {flowing:.2f} s after; the switch's "
          f"stall {stall:.2f} s; relayed {relayed}, punched payload {payload}, sent twice or "
          f"overhead {again}")
    assert flowing is not None and flowing < 15.0, flowing
    assert payload > SIZE * 0.25, (payload, at_unblock)  # a good part went punched
    assert again < SIZE * 0.12, (relayed, payload)
