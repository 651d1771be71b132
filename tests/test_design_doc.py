"""docs/design.md names only what exists: every module, class, function and member it quotes.

The map had drifted (it quoted ``connect_transit(...)``, ``receive_records()`` and events that
no module defined), so the page is checked like code: each backticked ``hilltop.…`` path must
resolve to a module file and, past the module, to names defined in it; each ``Class.member``
must be a member of a class of that name somewhere in the package.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "design.md"
PACKAGE_DIRS = {"hilltop.transports": "transports", "hilltop.hints": "hints",
                "hilltop.cli": "cli", "hilltop": "core"}
QUOTED = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"hilltop(?:\.[A-Za-z_]\w*)+")
MEMBER = re.compile(r"[A-Z]\w*\.[a-z_]\w*")


def module_file(dotted: str) -> Path | None:
    """The source file of module ``dotted`` (a package's ``__init__.py``), or None."""
    for prefix, folder in PACKAGE_DIRS.items():
        if dotted == prefix or dotted.startswith(prefix + "."):
            rest = dotted[len(prefix):].lstrip(".").split(".") if dotted != prefix else []
            base = ROOT / folder / Path(*rest) if rest else ROOT / folder
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    return candidate
            return None
    return None


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def defined_names(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try):  # TYPE_CHECKING blocks, fallbacks
            names |= defined_names(node.body)
    return names


def class_named(path: Path, name: str) -> ast.ClassDef | None:
    return next((n for n in tree(path).body if isinstance(n, ast.ClassDef) and n.name == name),
                None)


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = module_file(".".join(parts[:cut]))
        if path is None:
            continue
        attrs = parts[cut:]
        if not attrs:
            return True
        if attrs[0] not in defined_names(tree(path).body):
            return False
        if len(attrs) == 1:
            return True
        cls = class_named(path, attrs[0])
        return cls is not None and len(attrs) == 2 and attrs[1] in defined_names(cls.body)
    return False


def all_classes() -> dict[str, list[ast.ClassDef]]:
    found: dict[str, list[ast.ClassDef]] = {}
    for folder in PACKAGE_DIRS.values():
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(tree(path)):
                if isinstance(node, ast.ClassDef):
                    found.setdefault(node.name, []).append(node)
    return found


def quoted() -> list[str]:
    return [m.group(1) for m in QUOTED.finditer(DOC.read_text())]


def test_the_page_quotes_modules() -> None:
    assert sum(1 for q in quoted() if DOTTED.search(q)) >= 30


@pytest.mark.parametrize("path", sorted({d for q in quoted() for d in DOTTED.findall(q)}))
def test_quoted_module_path_exists(path: str) -> None:
    assert resolves(path), f"docs/design.md quotes {path}, which does not exist"


@pytest.mark.parametrize("member", sorted({q.split("(")[0] for q in quoted()
                                           if MEMBER.fullmatch(q.split("(")[0])}))
def test_quoted_class_member_exists(member: str) -> None:
    cls, name = member.split(".")
    classes = all_classes().get(cls, [])
    assert classes, f"docs/design.md quotes class {cls}, which no module defines"
    assert any(name in defined_names(c.body) for c in classes), \
        f"docs/design.md quotes {member}, but {cls} has no {name}"
