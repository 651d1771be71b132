"""Acceptance for third-party transports: the example plugin, pip-installed beside hilltop,
is listed by ``wormhole transports`` and carries a real CLI transfer, with no change to hilltop.

pip installs ``examples/hilltop-unix-socket`` (a copy, so the source tree stays clean) into a
directory of its own with ``--target``; the hilltop CLI then runs with that directory on
``PYTHONPATH``, so the plugin's entry point is visible to it and to nothing else in this
session. Everything works offline (``--no-index --no-deps --no-build-isolation``): hilltop's
``test`` extra brings a setuptools that builds wheels by itself. The same check with a fresh
venv and dependencies from PyPI is the manual recipe in docs/plugins.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hilltop-unix-socket"


def ok(result: Any) -> Any:
    assert result.returncode == 0, result.describe()
    return result


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the pip-installed example plugin and its dist-info."""
    work = tmp_path_factory.mktemp("plugin")
    source = work / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns(
        "*.egg-info", "build", "__pycache__", ".pytest_cache"))
    site = work / "site"
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "--no-index", "--no-deps", "--no-build-isolation", "--target", str(site),
           str(source)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"pip could not install the example plugin:\n{done.stderr}"
    assert (site / "hilltop_unix_socket").is_dir()
    return site


@pytest.fixture
def with_plugin(plugin_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make hilltop processes started from now on see the plugin (and no user config)."""
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(plugin_site), path])))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return plugin_site


def test_plugin_is_listed(with_plugin: Path, hilltop: Callable[..., Any]) -> None:
    listed = ok(hilltop("transports", flags=False, relay_url="ws://127.0.0.1:9/v1").finish(30))
    [line] = [ln for ln in listed.stdout.splitlines() if ln.startswith("unix-socket ")]
    assert line.split()[1:4] == ["unix-socket-v1", "plugin", "(hilltop_unix_socket)"], line
    assert line.endswith("usable"), line
    plain = ok(hilltop("transports", "--no-plugins", flags=False,
                       relay_url="ws://127.0.0.1:9/v1").finish(30))
    [line] = [ln for ln in plain.stdout.splitlines() if ln.startswith("unix-socket ")]
    assert line.endswith("disabled by --no-plugins"), plain.stdout


def test_plugin_carries_a_file_transfer(with_plugin: Path, hilltop: Callable[..., Any],
                                        fresh_code: str, tmp_path: Path) -> None:
    payload = tmp_path / "payload.bin"
    payload.write_bytes(os.urandom(1_500_000))
    dest = tmp_path / "dest"
    dest.mkdir()
    s = hilltop("send", "--hide-progress", "--code", fresh_code, "--transports", "unix-socket",
                str(payload))
    r = hilltop("receive", "--accept-file", "--hide-progress", "--transports", "unix-socket",
                fresh_code, cwd=dest)
    received, sent = ok(r.finish(60)), ok(s.finish(60))
    assert "Receiving (->unix-socket /" in received.stderr, received.describe()
    assert "Sending (unix-socket /" in sent.stderr, sent.describe()
    assert (dest / "payload.bin").read_bytes() == payload.read_bytes()


def test_disabled_by_config_file(with_plugin: Path, hilltop: Callable[..., Any],
                                 fresh_code: str, tmp_path: Path) -> None:
    config = tmp_path / "config" / "hilltop" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[transports]\ndisabled = ["unix-socket"]\n')
    listed = ok(hilltop("transports", flags=False, relay_url="ws://127.0.0.1:9/v1").finish(30))
    [line] = [ln for ln in listed.stdout.splitlines() if ln.startswith("unix-socket ")]
    assert f"disabled by config file {config}" in line, listed.stdout
