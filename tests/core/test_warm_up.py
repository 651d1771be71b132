"""filetransfer.warm_up: the transit machinery imported ahead, on a thread, and nothing more.

Each case runs in a fresh interpreter: what matters is what ends up in ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROBE = textwrap.dedent("""
    import json, sys, threading
    from twisted.internet import asyncioreactor
    asyncioreactor.install()
    from twisted.internet import reactor
    from hilltop import filetransfer, plugins
    from hilltop.transitoptions import TransitOptions

    if sys.argv[1] == "fail":
        def broken(select=None):
            raise RuntimeError("a plugin blew up")
        plugins.import_builtins = broken
    failures = []
    threading.excepthook = lambda args: failures.append(repr(args.exc_value))
    before = set(sys.modules)
    transports = tuple(sys.argv[2].split(",")) if sys.argv[2] else ()
    thread = filetransfer.warm_up(TransitOptions(transports=transports))
    thread.join(30)
    print(json.dumps({
        "alive": thread.is_alive(), "daemon": thread.daemon, "failures": failures,
        "new": sorted(set(sys.modules) - before),
        "reactor": type(reactor).__name__,
    }))
""")


def _probe(tmp_path: Path, how: str = "ok", select: str = "",
           config: str | None = None) -> dict:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    if config is not None:
        (tmp_path / "hilltop").mkdir()
        (tmp_path / "hilltop" / "config.toml").write_text(config)
    out = subprocess.run([sys.executable, "-c", PROBE, how, select], env=env, check=True,
                         capture_output=True, text=True, timeout=60).stdout
    return json.loads(out)


def test_imports_the_transfer_machinery_on_a_thread(tmp_path: Path) -> None:
    got = _probe(tmp_path)
    assert not got["alive"] and not got["daemon"] and got["failures"] == []
    for module in ("hilltop.runner", "hilltop.filesink", "hilltop.bulkpump",
                   "hilltop.zipreader", "hilltop.race", "ifaddr",
                   "hilltop.transports.direct_tcp", "hilltop.transports.relay"):
        assert module in got["new"]
    assert got["reactor"] == "AsyncioSelectorReactor"  # it never installed another one


@pytest.mark.parametrize(("select", "imported"), [("", False), ("relay", True)])
def test_leaves_out_what_the_config_disables(tmp_path: Path, select: str,
                                             imported: bool) -> None:
    """A transport the config file switches off is not imported, unless named explicitly
    (``--transports``), as the real load does."""
    got = _probe(tmp_path, select=select, config='[transports]\ndisabled = ["relay"]\n')
    assert ("hilltop.transports.relay" in got["new"]) is imported
    assert "hilltop.transports.direct_tcp" in got["new"]


def test_a_failure_is_left_for_the_real_load(tmp_path: Path) -> None:
    got = _probe(tmp_path, how="fail")
    assert not got["alive"] and got["failures"] == []
    assert "hilltop.runner" in got["new"]
