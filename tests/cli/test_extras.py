"""The command that adds an extra to this installation (hilltop is not on the package index)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from hilltop.cli.extras import Origin, add_extra_command, install_origin

PIP = f"{shlex.quote(sys.executable)} -m pip install"


def test_an_editable_checkout_is_installed_again_editable(tmp_path: Path) -> None:
    origin = Origin(url=tmp_path.as_uri(), editable=True)
    assert add_extra_command("webrtc", origin) == f"{PIP} -e '{tmp_path}[webrtc]'"


def test_a_wheel_is_installed_again_with_the_extra(tmp_path: Path) -> None:
    wheel = tmp_path / "my dist" / "hilltop-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.touch()
    assert add_extra_command("webrtc", Origin(url=wheel.as_uri())) \
        == f"{PIP} '{wheel}[webrtc]'"


def test_a_source_that_is_gone_is_named_not_guessed(tmp_path: Path) -> None:
    command = add_extra_command("webrtc", Origin(url=(tmp_path / "gone").as_uri()))
    assert f"({tmp_path / 'gone'} is gone)" in command and "'PATH[webrtc]'" in command


def test_a_vcs_install_is_named_by_its_url_and_commit() -> None:
    origin = Origin(url="https://example.org/hilltop.git", vcs="git", commit="abc123")
    assert add_extra_command("webrtc", origin) \
        == f"{PIP} 'hilltop[webrtc] @ git+https://example.org/hilltop.git@abc123'"


def test_without_a_record_the_command_is_a_template() -> None:
    command = add_extra_command("webrtc", None)
    assert "'CHECKOUT[webrtc]'" in command and ".whl[webrtc]" in command
    assert "'hilltop[webrtc]'" not in command  # the name the index does not have


def test_the_origin_is_read_from_pip_s_record(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    stray = tmp_path / "a" / "hilltop.egg-info"  # a build leftover in the checkout: no record
    stray.mkdir(parents=True)
    (stray / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: hilltop\nVersion: 0.1.0\n")
    real = tmp_path / "b" / "hilltop-0.1.0.dist-info"
    real.mkdir(parents=True)
    (real / "METADATA").write_text("Metadata-Version: 2.1\nName: hilltop\nVersion: 0.1.0\n")
    (real / "direct_url.json").write_text(json.dumps(
        {"url": "file:///src/hilltop", "dir_info": {"editable": True}}))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "a"), str(tmp_path / "b")])
    assert install_origin() == Origin(url="file:///src/hilltop", editable=True)
    (real / "direct_url.json").write_text("{not json")
    assert install_origin() is None
