"""Connecting for the bulk: hints, the race of transports, the handshake, records."""
