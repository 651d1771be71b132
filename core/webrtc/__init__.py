"""The WebRTC transport's signalling and settings (aiortc stays in the transport)."""

# The I/O shells; every other module here is pure (tests/test_layers.py). settings reads
# the [webrtc] table of the config file.
IO_MODULES = frozenset({"settings"})
