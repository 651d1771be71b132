"""Process plumbing every layer may use: the reactor, awaitables, TLS, memory, HTTP guards."""

# The I/O shells (tests/test_layers.py): here all of them, since each acts on the process (the
# reactor, Deferreds, which modules import, the C heap).
IO_MODULES = frozenset({"awaitable", "httpguard", "lazyimport", "lazytls", "memory", "reactor",
                        "sharedport"})
