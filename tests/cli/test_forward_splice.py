"""``wormhole forward``'s splice: each end's transport paces the other's reading, so a local
reader that stops reading pauses the subchannel (and so L2), instead of buffering."""

from __future__ import annotations

from twisted.internet.testing import StringTransport

from hilltop.cli.forward import Splice


def test_join_registers_each_transport_as_the_others_producer() -> None:
    local, sub = Splice(), Splice()
    local_t, sub_t = StringTransport(), StringTransport()
    local.makeConnection(local_t)
    sub.makeConnection(sub_t)
    sub.dataReceived(b"early")  # before the join: queued, then delivered
    local.join(sub)
    assert local_t.producer is sub_t and local_t.streaming
    assert sub_t.producer is local_t and sub_t.streaming
    assert local_t.value() == b"early"
