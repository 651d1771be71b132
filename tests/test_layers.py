"""Pure protocol modules must stay free of I/O libraries, clocks and ambient randomness."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PURE = [
    "core/codes.py", "core/wordlist.py", "core/key.py", "core/messages.py", "core/mailbox.py",
    "core/capabilities.py", "core/handshake.py", "core/records.py", "core/race.py",
    "core/transfer.py", "core/lanwire.py",
    *[str(p.relative_to(ROOT)) for p in (ROOT / "hints").glob("*.py")],
]
FORBIDDEN_MODULES = {"twisted", "asyncio", "autobahn", "socket", "time", "random", "secrets",
                     "aiortc", "zeroconf", "txtorcon", "threading"}
FORBIDDEN_CALLS = {"os.urandom", "time.time", "time.monotonic"}


def imported_roots(tree: ast.AST) -> set[str]:
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("relpath", PURE)
def test_pure_module_imports_no_io(relpath: str) -> None:
    path = ROOT / relpath
    if not path.exists():
        pytest.skip(f"{relpath} does not exist yet")
    tree = ast.parse(path.read_text(), relpath)
    bad = imported_roots(tree) & FORBIDDEN_MODULES
    assert not bad, f"{relpath} imports {sorted(bad)}"
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert not calls & FORBIDDEN_CALLS, f"{relpath} calls {sorted(calls & FORBIDDEN_CALLS)}"
