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
