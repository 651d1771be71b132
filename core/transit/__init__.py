"""Connecting for the bulk: hints, the race of transports, the handshake, records."""

# The I/O shells; every other module here is pure (tests/test_layers.py).
IO_MODULES = frozenset({"bulkpump", "connection", "pipeline", "plugins", "relayconfig", "runner"})
