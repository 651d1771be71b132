"""File-transfer v1: offers, where received files go, sources, sinks and zips."""

# The I/O shells; every other module here is pure (tests/test_layers.py). targets only
# reads the filesystem (names, free space), but that is I/O all the same.
IO_MODULES = frozenset({"datapath", "filesink", "foldersink", "manysink", "manysource",
                        "partials", "pipesource", "session", "source",
                        "targets"})
