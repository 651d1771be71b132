"""Two TransitConnections over loopback TCP, for the unit tests of the data path, the bulk pump
and the idle time-outs (in tests/core/transfer and tests/core/transit, so this sits on pytest's
``pythonpath``): a real socket pair, because those paths take the socket itself."""

from __future__ import annotations

from twisted.internet import defer

from hilltop.hints import parse_hints
from hilltop.transit import records
from hilltop.transit.connection import TransitConnection
from hilltop.transit.plugins import load_transports
from hilltop.transit.runner import TransitRunner

TK = bytes(range(32))


async def connected_pair(reactor, cipher: records.Cipher = records.SECRETBOX):
    def runner(role, **kw):
        return TransitRunner(reactor, role, TK, transports=load_transports(["direct-tcp"]),
                             local_addresses=["127.0.0.1"], **kw)

    s, r = runner("sender"), runner("receiver", no_listen=True)
    s_hints, r_hints = await s.our_hints(), await r.our_hints()
    ws, wr = await defer.gatherResults([
        s.connect(parse_hints([h.to_wire() for h in r_hints])),
        r.connect(parse_hints([h.to_wire() for h in s_hints]))])
    cs = TransitConnection(ws, "sender", TK, cipher)
    cr = TransitConnection(wr, "receiver", TK, cipher)
    return s, r, cs, cr


async def records_carry_on_then_close(s, r, cs, cr) -> None:
    """After a bulk transfer ordinary records still work both ways (the nonce counts carried
    on); then close everything."""
    cr.send_record(b"ack")
    assert await cs.receive_record() == b"ack"
    cs.send_record(b"more")
    assert await cr.receive_record() == b"more"
    await cr.close()
    await cs.when_closed()
    await s.stop()
    await r.stop()


class EndlessSource:
    """Reads forever (so only the peer or a cancel can end the send)."""

    size = 1 << 62  # as announced: far more than will ever be read

    def readinto(self, buffer) -> int:
        buffer[:] = b"\0" * len(buffer)
        return len(buffer)
