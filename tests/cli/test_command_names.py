"""The command names official 0.24 answers to besides its own: aliases and ``help``."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hilltop.cli.main import ALIASES, cli


@pytest.mark.parametrize(("alias", "command"), sorted(ALIASES.items()))
def test_alias_runs_the_command(alias: str, command: str) -> None:
    result = CliRunner().invoke(cli, [alias, "--help"], prog_name="wormhole")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: wormhole {command} "), result.output


def test_alias_errors_name_the_real_command() -> None:
    result = CliRunner().invoke(cli, ["tx", "--no-such-flag"], prog_name="wormhole")
    assert result.exit_code == 2
    assert "wormhole send --help" in result.output


def test_aliases_stay_out_of_the_command_list() -> None:
    listing = CliRunner().invoke(cli, ["--help"], prog_name="wormhole").output
    assert not any(f"  {alias} " in listing for alias in ALIASES)


def test_help_command_prints_the_top_level_help() -> None:
    runner = CliRunner()
    shown = runner.invoke(cli, ["help"], prog_name="wormhole")
    expected = runner.invoke(cli, ["--help"], prog_name="wormhole")
    assert shown.exit_code == 0
    assert shown.output.strip() == expected.output.strip()


@pytest.mark.parametrize("extra", [["7-guitarist-revenge"], ["-0"], ["--lan"]])
def test_receive_allocate_refuses_a_given_code(extra: list[str]) -> None:
    """--allocate makes the code, so a code of the user's (or -0, or LAN mode) contradicts it."""
    result = CliRunner().invoke(cli, ["receive", "--allocate", *extra], prog_name="wormhole")
    assert result.exit_code == 2, result.output
    assert "--allocate makes the code" in result.output
