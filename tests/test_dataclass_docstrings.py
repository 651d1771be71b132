"""Every dataclass in hilltop has a docstring of its own.

It says what the class is for, and it spares a start-up cost: without one, ``dataclasses``
builds ``__doc__`` with ``inspect.signature`` when the class is created (60-110 us a class on
Python 3.11; a small transfer creates ~110 dataclasses: bench/README.md, "Fifth
session"). Read from the source, so the check imports nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("core", "cli", "hints", "transports")


DECORATORS = {"dataclass", "value"}  # value: hilltop._values, a dataclass with shared methods


def _is_dataclass(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ((isinstance(target, ast.Name) and target.id in DECORATORS)
            or (isinstance(target, ast.Attribute) and target.attr in DECORATORS))


def undocumented_dataclasses(source: str, where: str) -> list[str]:
    """``where:line Name`` for each dataclass in ``source`` without a docstring."""
    return [f"{where}:{node.lineno} {node.name}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ClassDef) and any(map(_is_dataclass, node.decorator_list))
            and ast.get_docstring(node) is None]


def test_every_dataclass_has_a_docstring() -> None:
    missing = [found for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))
               for found in undocumented_dataclasses(path.read_text(),
                                                     str(path.relative_to(ROOT)))]
    assert not missing, f"give these dataclasses a docstring: {missing}"


@pytest.mark.parametrize("source", [
    "@dataclass\nclass A:\n    x: int\n",
    "@dataclass(frozen=True)\nclass A:\n    x: int\n",
    "@dataclasses.dataclass(slots=True)\nclass A:\n    x: int  # a comment is no docstring\n",
    "@value\nclass A:\n    x: int\n",
    "@value(frozen=False)\nclass A:\n    x: int\n",
])
def test_a_dataclass_without_a_docstring_is_caught(source: str) -> None:
    assert undocumented_dataclasses(source, "m.py") == ["m.py:2 A"]


def test_a_documented_dataclass_passes() -> None:
    assert undocumented_dataclasses('@dataclass\nclass A:\n    """Why."""\n    x: int\n', "m") == []
