"""What a command imports before its first mailbox connection (start-up cost, issue 31):
its own module, not every command's; no Dilation code unless asked; no package-data reader
for a text with a given code.

Run in a fresh interpreter: the test process has imported every command already.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from click.testing import CliRunner
from fresh_interpreter import run_fresh

from hilltop.cli.main import COMMANDS, cli

PROBE = textwrap.dedent("""
    import sys
    from hilltop.cli.main import cli
    try:  # the whole command, up to its first mailbox connection (refused here)
        cli(["--relay-url", "ws://127.0.0.1:1/v1", *sys.argv[1:]], prog_name="wormhole")
    except SystemExit as exit:
        print("exit:", exit.code)
    print(sorted(name for name in sys.modules if name.startswith("hilltop.cli.")))
    print(sorted(name for name in sys.modules if name.split(".")[:2] == ["hilltop", "dilation"]
                 or name == "importlib.resources"))
    print("run:", sorted(name for name in ("hyperlink", "http.cookiejar", "ssl", "asyncio.sslproto",
                                           "bz2", "lzma", "shutil", "pickle", "pty",
                                           "twisted.internet.endpoints",
                                           "twisted.internet.unix", "twisted.internet.udp")
                         if type(sys.modules.get(name)).__name__ == "module"))
""")
CODE = "7-guitarist-revenge"


def test_receive_imports_no_other_command() -> None:
    out = run_fresh(PROBE, "receive", CODE)
    assert "exit: " in out and "exit: 0" not in out, out  # it did run, and failed to connect
    loaded = out.splitlines()[-3]
    assert "'hilltop.cli.receive'" in loaded, loaded
    assert out.splitlines()[-1] == "run: []", out  # deferred, never used: the stack's imports
    for other in ("send", "forward", "ssh", "transports"):  # (completion: its code completer)
        assert f"'{COMMANDS[other]}'" not in loaded, loaded


def test_help_lists_every_command() -> None:
    listing = CliRunner().invoke(cli, ["--help"], prog_name="wormhole").output
    for name in COMMANDS:
        assert f"\n  {name} " in listing, listing


def test_a_text_imports_no_dilation_and_no_package_data_reader() -> None:
    # a receiver says in its version that it can dilate (it follows a `send --durable`): that
    # takes the version fields, never the messages (wire) or the machinery (l2, manager, ...)
    for args, allowed in ((["send", "--code", CODE, "--text", "hi"], "[]"),
                          (["receive", CODE], "['hilltop.dilation', 'hilltop.dilation.versions']")):
        out = run_fresh(PROBE, *args)
        assert "exit: " in out and "exit: 0" not in out, out
        assert out.splitlines()[-2] in ("[]", allowed), (args, out)


COLLECTIONS = textwrap.dedent("""
    import gc, sys
    from hilltop.cli.launch import _import_command
    _import_command()  # as `wormhole` starts: the CLI imported with the collector off, frozen
    from hilltop.cli.main import cli
    seen = []
    gc.callbacks.append(lambda phase, info: phase == "stop" and seen.append(info["generation"]))
    if sys.argv[1:] == ["warm-up"]:  # a file's transit machinery, at key confirmation
        from hilltop._runtime.reactor import install_asyncio_reactor
        from hilltop.transfer.session import warm_up_transit
        from hilltop.transit.options import TransitOptions
        install_asyncio_reactor()
        seen.clear()
        warm_up_transit(TransitOptions())
    else:  # the command's module, the reactor, autobahn: up to a refused mailbox connection
        try:
            cli(["--relay-url", "ws://127.0.0.1:1/v1", *sys.argv[1:]], prog_name="wormhole")
        except SystemExit as exit:
            print("exit:", exit.code)
    print("collections:", len(seen), "older:", sum(1 for generation in seen if generation))
""")


def test_the_imports_after_start_up_run_with_the_collector_paused() -> None:
    # each import batch (command module, reactor, autobahn, transit warm-up) freezes what it
    # made; before, a text's command ran ~22 collections and a warm-up ~16, one of the
    # middle generation each (bench/README.md, "Fourth session")
    for args in (["receive", CODE], ["send", "--code", CODE, "--text", "hi"], ["warm-up"]):
        last = run_fresh(COLLECTIONS, *args).splitlines()[-1].split()
        assert last[0] == "collections:" and int(last[1]) <= 5 and last[3] == "0", (args, last)


def test_loading_the_transports_parses_no_package_metadata() -> None:
    # a file's warm-up tells hilltop's own transports from plugins by their entry points, not
    # by each distribution's METADATA, which the email package parses (~8 ms a side)
    probe = textwrap.dedent("""
        import sys
        import hilltop.cli.main
        from hilltop.transit.plugins import load_configured
        loaded = load_configured()
        print(sorted(t.name for t in loaded.loaded if t.builtin))
        print("email.message" in sys.modules, "importlib.metadata" in sys.modules)
    """)
    builtins, loaded = run_fresh(probe).splitlines()[-2:]
    assert "'direct-tcp'" in builtins and "'relay'" in builtins, builtins
    assert loaded == "False True", loaded


LOADED = textwrap.dedent("""
    import sys
    from hilltop.cli.main import cli
    try:  # the whole command, up to its first mailbox connection (refused here)
        cli(["--relay-url", "ws://127.0.0.1:1/v1", *sys.argv[2:]], prog_name="wormhole")
    except SystemExit as exit:
        print("exit:", exit.code)
    print(sorted(name for name in sys.argv[1].split(",") if name in sys.modules))
""")
NOT_FOR_A_SMALL_TRANSFER = ("hilltop.hints", "hilltop.tor.settings", "hilltop.cli.codeinput",
                            "hilltop.cli.completion", "hilltop.cli.browser")
NOT_FOR_A_TEXT = (*NOT_FOR_A_SMALL_TRANSFER, "hilltop.cli.offerlines", "hilltop.cli.progress",
                  # Twisted's endpoints (deferred: its code unrun) bring these; the mailbox
                  # connection dials without them (hilltop._runtime.sharedport), ~11 ms of CPU
                  "twisted.plugin", "twisted.python.systemd", "twisted.python.zippath", "idna")


def test_a_text_or_a_small_file_loads_no_hints_tor_or_code_prompt(tmp_path: Path) -> None:
    # they were imported by every send and receive, ~20 ms of CPU a side with the stdlib's
    # (hints ~6 ms: a frozen class per hint type, only to check the relay's syntax); the flags'
    # checks still run before the rendezvous (test_relayconfig.py, tests/transports/test_tor.py)
    small = tmp_path / "three"
    small.write_bytes(b"abc")
    for args, deferred in ((["receive", CODE], NOT_FOR_A_TEXT),
                           (["send", "--code", CODE, "--text", "hi"], NOT_FOR_A_TEXT),
                           (["send", "--code", CODE, str(small)], NOT_FOR_A_SMALL_TRANSFER)):
        out = run_fresh(LOADED, ",".join(deferred), "--transit-helper", "tcp:relay.example:4001",
                        *args)
        assert "exit: " in out and "exit: 0" not in out, out  # it ran, and failed to connect
        assert out.splitlines()[-1] == "[]", (args, out)
