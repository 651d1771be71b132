"""How the ``wormhole`` command ends: with the command's status, after the ``atexit``
handlers and the output, but without the interpreter's teardown (bench/README.md: ~150 ms)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import atexit, sys

class Witness:
    def __del__(self):
        print('teardown ran', flush=True)

witness = Witness()
atexit.register(lambda: print('atexit ran', flush=True))
sys.argv = ['wormhole', 'receive', '--no-such-flag']
from hilltop.cli.launch import main
print('command starts')  # buffered: the exit must flush it
main()
"""


def test_a_command_ends_with_its_status_and_skips_the_teardown() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2, out.stderr  # click's usage error
    assert "no such option" in out.stderr.lower()
    lines = out.stdout.splitlines()
    assert lines == ["command starts", "atexit ran"], lines


GC_PROBE = """
import gc
from hilltop.cli.launch import _import_command
run = _import_command()
print(gc.isenabled(), gc.get_freeze_count() > 10000)
"""


def test_the_cli_is_imported_without_the_collector_and_then_frozen() -> None:
    """The ~60,000 objects of the start-up are frozen, and the collector is back on
    (bench/README.md, "Time budget": 30-50 ms of CPU per process)."""
    out = subprocess.run([sys.executable, "-c", GC_PROBE], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]
