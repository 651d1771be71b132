"""Meeting the peer: codes, the mailbox protocol, SPAKE2 and the phase keys."""

# The I/O shells; every other module here is pure (tests/test_layers.py).
IO_MODULES = frozenset({"client"})
