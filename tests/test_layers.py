"""Pure protocol modules stay free of I/O libraries, clocks and ambient randomness.

Purity is stated per package, not in a list kept here: every module of every package under
``core/`` (``hilltop``) and ``hints/`` (``hilltop.hints``) is pure unless its package names it
in ``IO_MODULES`` (a constant in its ``__init__.py``), so a new module is pure by default. A pure
module may import no declared I/O shell of hilltop either, which keeps the I/O out of it through
a helper.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_ROOTS = {"hilltop": ROOT / "core", "hilltop.hints": ROOT / "hints"}
FORBIDDEN_MODULES = {"twisted", "asyncio", "autobahn", "socket", "time", "random", "secrets",
                     "aiortc", "zeroconf", "txtorcon", "threading"}
FORBIDDEN_CALLS = {"os.urandom", "time.time", "time.monotonic"}


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. "hilltop.transit.race"; a package's __init__ is the package
    path: Path
    package: str


def package_modules() -> list[Module]:
    """Every module under PACKAGE_ROOTS, named as it is imported."""
    found: dict[str, Module] = {}
    for top, folder in PACKAGE_ROOTS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [top, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                name = ".".join(parts[:-1])
                package = name
            else:
                name = ".".join(parts)
                package = ".".join(parts[:-1])
            found.setdefault(name, Module(name, path, package))
    return list(found.values())


MODULES = package_modules()
PACKAGES = sorted({m.package for m in MODULES})


def declared_shells(package: str) -> frozenset[str]:
    return frozenset(getattr(importlib.import_module(package), "IO_MODULES", frozenset()))


SHELLS = {f"{package}.{name}" for package in PACKAGES for name in declared_shells(package)}
PURE = [m for m in MODULES if m.name not in SHELLS]


def imported_roots(tree: ast.AST) -> set[str]:
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def runtime_imports(tree: ast.AST) -> set[str]:
    """Every module an import outside ``if TYPE_CHECKING:`` may load: for ``from a import b``
    both ``a`` and ``a.b`` (b may be a submodule)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) in {
                "TYPE_CHECKING", "typing.TYPE_CHECKING"}:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_declared_shells_exist(package: str) -> None:
    modules = {m.name for m in MODULES}
    missing = sorted(n for n in declared_shells(package) if f"{package}.{n}" not in modules)
    assert not missing, f"{package}.IO_MODULES names modules that do not exist: {missing}"


@pytest.mark.parametrize("module", PURE, ids=lambda m: m.name)
def test_pure_module_imports_no_io(module: Module) -> None:
    tree = ast.parse(module.path.read_text(), str(module.path))
    bad = imported_roots(tree) & FORBIDDEN_MODULES
    assert not bad, f"{module.name} imports {sorted(bad)}"
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert not calls & FORBIDDEN_CALLS, f"{module.name} calls {sorted(calls & FORBIDDEN_CALLS)}"
    shells = runtime_imports(tree) & SHELLS
    assert not shells, f"{module.name} is declared pure but imports the I/O shells {sorted(shells)}"


def test_strictly_typed_modules_are_pure() -> None:
    """pyproject.toml types the pure engines strictly (zipreader and zipwriter among them);
    declaring one of them a shell to quiet this file must show up here."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = [pattern for override in config["tool"]["mypy"]["overrides"]
                if override.get("disallow_untyped_defs") for pattern in override["module"]]
    strict = {m.name for m in MODULES if any(fnmatchcase(m.name, p) for p in patterns)}
    assert {"hilltop.transfer.zipreader", "hilltop.transfer.zipwriter"} <= strict
    assert not strict & SHELLS, f"declared shells but typed as pure: {sorted(strict & SHELLS)}"


def test_a_shell_import_is_caught() -> None:
    """The check above sees through ``from package import module`` and lazy imports, and
    lets type-only imports pass."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from hilltop.transit import runner\n"
        "def f():\n    from hilltop.rendezvous import client\n")
    assert runtime_imports(tree) & SHELLS == {"hilltop.rendezvous.client"}
