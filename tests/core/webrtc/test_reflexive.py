"""Server-reflexive candidates added from the mailbox-seen address (pure SDP text)."""

from __future__ import annotations

from hilltop.webrtc.reflexive import with_reflexive

SDP = ("v=0\r\n"
       "a=candidate:abc 1 udp 2130706431 198.18.1.10 40000 typ host\r\n"
       "a=candidate:def 1 udp 2130706431 fd00::10 40001 typ host\r\n"
       "a=candidate:ghi 1 tcp 1518280447 198.18.1.10 9 typ host tcptype active\r\n"
       "a=end-of-candidates\r\n")


def test_one_srflx_per_ipv4_udp_host_candidate_same_port() -> None:
    out = with_reflexive(SDP, "198.19.0.2").split("\r\n")
    added = [line for line in out if "srflx" in line]
    assert added == ["a=candidate:rabc 1 udp 1694498815 198.19.0.2 40000 typ srflx "
                     "raddr 198.18.1.10 rport 40000"]
    assert out.index(added[0]) == out.index(SDP.split("\r\n")[1]) + 1


def test_unchanged_for_ipv6_garbage_or_a_known_address() -> None:
    assert with_reflexive(SDP, "2001:db8::1") == SDP
    assert with_reflexive(SDP, "not an address") == SDP
    assert with_reflexive(SDP, "198.18.1.10") == SDP  # no NAT: the host candidate says it
