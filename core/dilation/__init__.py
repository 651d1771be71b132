"""Dilation: a durable, multiplexed channel between the two peers (official 0.24's ``dilate``).

Layers, bottom up (docs/dilation.md): :mod:`.versions` (the ``version`` fields), :mod:`.wire`
(the key, the mailbox ``dilate-N`` messages, leader choice), :mod:`.records` (L3 records),
:mod:`.l2` (one L2 connection: relay line, prologue, Noise handshake, KCM, framed records),
:mod:`.manager` (the L3 engine: subchannels, sequence numbers, acks, re-sending after a
reconnect, pings) and the Twisted shell :mod:`.shell`, which races L2 connections over
hilltop's transports and, through :mod:`.takeover`, leaves a relay for a direct path found
later; :mod:`.channel` runs a file transfer on a subchannel (``durable-v1``).
"""

# The I/O shells; every other module here is pure (tests/test_layers.py).
IO_MODULES = frozenset({"shell", "channel", "punchover"})
