"""Test modules are importable in one run of ``tests/`` and ``integration/`` together.

pytest imports test modules by basename (no ``__init__.py``, the default import mode), so two
``test_pipes.py`` files stop the whole run at collection: CI failed that way once, with exit 2.
Every ``conftest.py`` is imported as the module ``conftest``, so a run-time
``from conftest import ...`` gets whichever was loaded last: CI failed that way too.
"""

from __future__ import annotations

import ast
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


def _runtime_conftest_imports(tree: ast.Module) -> list[int]:
    """Lines importing ``conftest`` outside ``if TYPE_CHECKING:`` (those never run)."""
    found: list[int] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module == "conftest":
            found.append(node.lineno)
        if isinstance(node, ast.Import) and any(a.name == "conftest" for a in node.names):
            found.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _a_script(tree: ast.Module) -> bool:
    """A file run as a program (``if __name__ == "__main__":``) outside pytest, such as
    ``integration/official_faults.py``: there ``conftest`` is the one beside it on its path."""
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
               for node in tree.body)


def test_nothing_imports_conftest_at_run_time() -> None:
    offenders = {}
    for folder in ("tests", "integration", "bench", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            if _a_script(tree) and not path.name.startswith("test_"):
                continue
            lines = _runtime_conftest_imports(tree)
            if lines:
                offenders[str(path.relative_to(ROOT))] = lines
    assert not offenders, f"import from a kit module (e.g. serverkit) instead: {offenders}"
