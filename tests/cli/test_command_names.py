"""The command names official 0.24 answers to besides its own: aliases and ``help``."""

from __future__ import annotations

import subprocess
import sys

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


def test_help_help_shows_no_developer_notes() -> None:
    """``wormhole help --help`` used to show the docstring's note on why the command exists."""
    shown = CliRunner().invoke(cli, ["help", "--help"], prog_name="wormhole")
    assert shown.exit_code == 0, shown.output
    assert "Show this message." in shown.output
    assert "official" not in shown.output and "``" not in shown.output, shown.output


def test_every_help_text_is_for_users() -> None:
    """No command's ``--help`` carries reST markup or a path into the source tree (docs/...
    is not installed with the package)."""
    for args in (["--help"], ["send", "--help"], ["receive", "--help"], ["help", "--help"],
                 ["ssh", "invite", "--help"], ["ssh", "accept", "--help"],
                 ["transports", "--help"], ["completion", "--help"]):
        shown = CliRunner().invoke(cli, args, prog_name="wormhole")
        assert shown.exit_code == 0, (args, shown.output)
        assert "``" not in shown.output and "docs/" not in shown.output, (args, shown.output)


def test_version_names_the_protocol_it_speaks() -> None:
    from hilltop import __version__
    from hilltop.rendezvous import capabilities

    shown = CliRunner().invoke(cli, ["--version"], prog_name="wormhole")
    assert shown.exit_code == 0, shown.output
    first, *rest = shown.output.splitlines()
    assert first == f"hilltop, version {__version__}"  # unchanged: scripts read this line
    said = "\n".join(rest)
    assert "Magic Wormhole v1" in said and "transit v1" in said
    for feature in capabilities.FEATURES:
        assert feature in said, said


def test_version_alone_answers_without_importing_the_cli() -> None:
    """``wormhole --version`` is answered before click, Twisted and the commands are imported
    (~0.4 s of CPU), with the text the full CLI prints."""
    probe = ("import sys\n"
             "sys.argv = ['wormhole', '--version']\n"
             "from hilltop.cli.launch import main\n"
             "main()\n"
             "print(sorted(m for m in ('click', 'twisted', 'hilltop.cli.main', 'hilltop.api')"
             " if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    *text, imported = out.stdout.splitlines()
    assert imported == "[]"
    full = CliRunner().invoke(cli, ["--version"], prog_name="wormhole")
    assert "\n".join(text) + "\n" == full.output
