"""Run a probe script in a fresh interpreter: what a module imports only shows where nothing
was imported before (the test process has imported everything)."""

from __future__ import annotations

import subprocess
import sys


def run_fresh(script: str, *args: str) -> str:
    """``script``'s standard output (``args`` are its ``sys.argv[1:]``); fails the test with
    its standard error if it fails."""
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout
