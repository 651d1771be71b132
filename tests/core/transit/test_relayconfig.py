"""Where our relays come from: ``--transit-helper`` flags, else ``[relay]``, else the public
relay; and the ``[relay]`` table's checks."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from hilltop.api import TRANSIT_HELPER
from hilltop.cli.transitopts import relay_choices
from hilltop.errors import LocalError
from hilltop.transit.relayconfig import RelaySettings, read_relay_config


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "hilltop" / "config.toml"
    path.parent.mkdir()
    return path


def test_flags_beat_the_config_which_beats_the_public_relay(config: Path) -> None:
    assert relay_choices(()) == ([TRANSIT_HELPER], RelaySettings())
    config.write_text('[relay]\nhelpers = ["tcp:a.example:4001,wss://a.example/", '
                      '"ws://b.example:8080/"]\n')
    assert relay_choices(())[0] == ["tcp:a.example:4001,wss://a.example/",
                                    "ws://b.example:8080/"]
    assert relay_choices(("tcp:c.example:1", "wss://d.example/"))[0] == [
        "tcp:c.example:1", "wss://d.example/"]
    assert relay_choices(("",))[0] == []  # --transit-helper '': no relay at all
    config.write_text("[relay]\nhelpers = []\n")
    assert relay_choices(())[0] == []


def test_ca_file_becomes_the_relay_setting(config: Path) -> None:
    ca = config.parent / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    config.write_text(f'[relay]\nca-file = "{ca}"\n')
    helpers, settings = relay_choices(())
    assert helpers == [TRANSIT_HELPER] and settings == RelaySettings(str(ca))
    assert settings.ca_pem() == b"-----BEGIN CERTIFICATE-----\n"
    ca.unlink()
    with pytest.raises(LocalError, match="cannot read the relay CA file"):
        settings.ca_pem()


@pytest.mark.parametrize("table,message", [
    ('helpers = ["tcp:nohost"]', r"\[relay\] helpers: bad transit helper"),
    ("helpers = 4001", r"\[relay\] helpers must be a list"),
    ('ca-file = "/nonexistent/ca.pem"', "is not a file"),
    ("ca-file = 3", "ca-file must be a file name"),
    ('helper = ["tcp:a:1"]', "has no setting 'helper'"),
])
def test_a_broken_table_is_one_clear_error(config: Path, table: str, message: str) -> None:
    config.write_text(f"[relay]\n{table}\n")
    with pytest.raises(LocalError, match=message):
        read_relay_config()
    with pytest.raises(click.UsageError, match=message):  # the CLI: one line, exit status 2
        relay_choices(())


def test_a_bad_flag_is_refused_before_any_rendezvous(config: Path) -> None:
    with pytest.raises(click.UsageError, match="bad transit helper 'udp:h:1'"):
        relay_choices(("tcp:ok.example:1", "udp:h:1"))
