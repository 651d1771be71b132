"""Process plumbing every layer may use: the reactor, awaitables, TLS, memory."""
