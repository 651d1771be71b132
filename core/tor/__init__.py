"""Reaching Tor: finding or launching it, onion services, SOCKS endpoints."""

# The I/O shells; every other module here is pure (tests/test_layers.py).
IO_MODULES = frozenset({"manager"})
