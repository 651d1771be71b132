"""The example third-party plugin (examples/hilltop-unix-socket) passes the conformance kit.

The plugin is a separate package; when it is not pip-installed here, its module is loaded
from the source tree so hilltop's own test run still covers it. Whether it installs and registers
through its entry point is checked in integration/test_plugin_install.py.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from hilltop.hints import parse_hints
from hilltop.testing import ConformanceSuite, TransportSubject

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hilltop-unix-socket"
try:
    import hilltop_unix_socket
except ImportError:
    # Load the module from the source tree without putting that tree on sys.path: a stray
    # *.egg-info there would make the plugin's entry point visible to every other test.
    _spec = importlib.util.spec_from_file_location(
        "hilltop_unix_socket", EXAMPLE / "src" / "hilltop_unix_socket" / "__init__.py")
    assert _spec is not None and _spec.loader is not None
    hilltop_unix_socket = importlib.util.module_from_spec(_spec)
    sys.modules["hilltop_unix_socket"] = hilltop_unix_socket
    _spec.loader.exec_module(hilltop_unix_socket)

UnixSocket = hilltop_unix_socket.UnixSocket


class TestUnixSocketConformance(ConformanceSuite):
    @pytest.fixture
    def transport_subject(self, tmp_path: Path) -> TransportSubject:
        options = {"unix-socket": {"dir": str(tmp_path)}}
        return TransportSubject(UnixSocket, sender={"options": options},
                                receiver={"no_listen": True, "options": options},
                                description="unix-socket /")


def test_unclaimed_plugin_hints_are_dropped() -> None:
    """A peer without the plugin simply ignores the new hint type (and so do old peers)."""
    wire = [{"type": "unix-socket-v1", "path": "/tmp/hilltop-x/transit.sock"}]
    assert parse_hints(wire) == []
