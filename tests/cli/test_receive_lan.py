"""``receive --lan`` command-line rules (the LAN mode itself is tested in integration/)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hilltop.cli.main import cli


@pytest.mark.parametrize("flags", [["--lan"], ["--interface", "eth0"]])
def test_receive_lan_without_a_code_is_a_usage_error(flags: list[str]) -> None:
    """Issue 27, item 10: it exited 1, where the README puts usage errors at 2."""
    result = CliRunner().invoke(cli, ["receive", *flags], prog_name="wormhole")
    assert result.exit_code == 2, result.output
    assert "with --lan, give the code on the command line" in result.output
    assert "Looking for nameplate" not in result.output  # refused before looking
