"""The page's JavaScript under node: known-answer tests against python-spake2, fresh each run.

``tests/web/make_vectors.py`` computes SPAKE2 exchanges (python-spake2, with random entropy
and codes) and key schedules (hilltop's, itself checked against official 0.24 by
tests/vectors/) from a new seed; ``node --test web/test/`` must reproduce every value. A
second check: the bundle shipped in ``cli/browser_page`` is what ``web/`` builds to.

Needs node and ``web/node_modules`` (``cd web && npm ci``); .ci/run provides both. Without
them these tests fail rather than skip under CI, so a missing toolchain cannot pass for green.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"


def _node() -> str:
    node = shutil.which("node")
    ready = node is not None and (WEB / "node_modules" / "@noble" / "curves").exists()
    if not ready:
        why = "node and web/node_modules are needed (apt-get install nodejs npm; cd web && npm ci)"
        if os.environ.get("CI"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    assert node is not None
    return node


def test_known_answers_against_python_spake2(tmp_path: Path) -> None:
    node = _node()
    seed = random.randrange(1 << 30)
    vectors = tmp_path / "vectors.json"
    made = subprocess.run([sys.executable, str(ROOT / "tests/web/make_vectors.py"), str(seed)],
                          capture_output=True, text=True, check=True, timeout=60)
    vectors.write_text(made.stdout)
    cases = json.loads(made.stdout)
    assert len(cases["spake2"]) >= 10 and len(cases["schedule"]) >= 4
    run = subprocess.run([node, "--test", "test/"], cwd=WEB, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "HILLTOP_WEB_VECTORS": str(vectors)})
    assert run.returncode == 0, f"seed {seed}\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
    summary = dict(line[2:].split(" ", 1) for line in run.stdout.splitlines()
                   if line.startswith("# ") and line[2:].split(" ")[0] in ("pass", "fail"))
    assert int(summary["fail"]) == 0
    assert int(summary["pass"]) >= len(cases["spake2"]) + len(cases["schedule"])


def test_shipped_page_is_the_build_of_web() -> None:
    node = _node()
    run = subprocess.run([node, "build.mjs", "--check"], cwd=WEB, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
