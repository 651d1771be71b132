"""The WebRTC transport's signalling and settings (aiortc stays in the transport)."""
