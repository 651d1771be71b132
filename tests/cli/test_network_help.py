"""``wormhole --help`` says what a default install does on the network, and what it says is
what the code does."""

from __future__ import annotations

from click.testing import CliRunner

from hilltop.cli.main import cli
from hilltop.transit.punch import may_punch
from hilltop.transit.race import RaceConfig


def _help() -> str:
    shown = CliRunner().invoke(cli, ["--help"], prog_name="wormhole")
    assert shown.exit_code == 0, shown.output
    return " ".join(shown.output.split())  # click rewraps the paragraph to the terminal


def test_help_names_what_a_default_install_contacts_and_listens_on() -> None:
    text = _help()
    for fact in ("contacts the mailbox server (--relay-url)",
                 "listens on one TCP port on every address",
                 f"transit relays {RaceConfig().relay_delay:g} s later",
                 "punches a hole through both, from the public address the mailbox server",
                 "no STUN server is contacted unless you give --stun"):
        assert fact in text, (fact, text)


def test_help_says_what_no_listen_and_tor_turn_off() -> None:
    text = _help()
    assert "--no-listen: no listener, no address sent, no punch, no STUN." in text, text
    assert "--tor: everything through Tor; no punch, no STUN." in text, text
    assert not may_punch(no_listen=True, tor=False) and not may_punch(no_listen=False, tor=True)
