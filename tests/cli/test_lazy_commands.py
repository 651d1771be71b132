"""A command imports its own module, not every command's (start-up cost, issue 31).

Run in a fresh interpreter: the test process has imported every command already.
"""

from __future__ import annotations

import textwrap

from click.testing import CliRunner
from fresh_interpreter import run_fresh

from hilltop.cli.main import COMMANDS, cli

RECEIVE = textwrap.dedent("""
    import sys
    from hilltop.cli.main import cli
    try:  # the whole receive command, up to its first mailbox connection (refused here)
        cli(["--relay-url", "ws://127.0.0.1:1/v1", "receive", "7-guitarist-revenge"],
            prog_name="wormhole")
    except SystemExit as exit:
        print("exit:", exit.code)
    print(sorted(name for name in sys.modules if name.startswith("hilltop.cli.")))
""")


def test_receive_imports_no_other_command() -> None:
    out = run_fresh(RECEIVE)
    assert "exit: " in out and "exit: 0" not in out, out  # it did run, and failed to connect
    loaded = out.splitlines()[-1]
    assert "'hilltop.cli.receive'" in loaded, loaded
    for other in ("send", "forward", "ssh", "transports"):  # (completion: its code completer)
        assert f"'{COMMANDS[other]}'" not in loaded, loaded


def test_help_lists_every_command() -> None:
    listing = CliRunner().invoke(cli, ["--help"], prog_name="wormhole").output
    for name in COMMANDS:
        assert f"\n  {name} " in listing, listing
