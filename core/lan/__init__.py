"""LAN mode: DNS-SD names and TXT records, the in-process mailbox, mDNS."""

# The I/O shells; every other module here is pure (tests/test_layers.py).
IO_MODULES = frozenset({"service", "guard"})
