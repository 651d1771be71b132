"""Every test module has a basename of its own across ``tests/`` and ``integration/``.

pytest imports test modules by basename (no ``__init__.py``, the default import mode), so two
``test_pipes.py`` files stop the whole run at collection: CI failed that way once, with exit 2.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    seen: defaultdict[str, list[str]] = defaultdict(list)
    for folder in ("tests", "integration"):
        for path in (ROOT / folder).rglob("test_*.py"):
            seen[path.name].append(str(path.relative_to(ROOT)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
