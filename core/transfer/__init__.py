"""File-transfer v1: offers, where received files go, sources, sinks and zips."""

# The I/O shells; every other module here is pure (tests/test_layers.py).
IO_MODULES = frozenset({"filesink", "foldersink", "partials", "source", "story"})
