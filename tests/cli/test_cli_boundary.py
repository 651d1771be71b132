"""The CLI calls one session: it shows events and asks questions, and decides nothing about
offers (issue 28). So nothing under ``cli/`` imports from :mod:`hilltop.transfer` but
:mod:`hilltop.transfer.session`, whose ``__all__`` is what it may use; and ``cli/receive.py``
does not borrow from ``cli/send.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "cli"


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import, also inside functions and TYPE_CHECKING."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name, []) for a in node.names)
    return found


def test_the_cli_uses_only_the_session_of_hilltop_transfer() -> None:
    wrong = []
    for path in sorted(CLI.rglob("*.py")):
        for line, module, names in imports(path):
            if module == "hilltop.transfer" and names == ["session"]:
                continue
            if module == "hilltop.transfer.session" or not (
                    module == "hilltop.transfer" or module.startswith("hilltop.transfer.")):
                continue
            wrong.append(f"{path.name}:{line}: {module} {names}")
    assert not wrong, wrong


def test_names_the_cli_takes_from_the_session_are_its_public_ones() -> None:
    from hilltop.transfer import session

    public = set(session.__all__) | {"Bundle", "Source", "StreamSink", "StreamSource"}
    taken = {name for path in CLI.rglob("*.py") for _line, module, names in imports(path)
             if module == "hilltop.transfer.session" for name in names}
    assert taken <= public, taken - public


def test_receive_borrows_nothing_from_send() -> None:
    modules = {module for _line, module, _names in imports(CLI / "receive.py")}
    assert "hilltop.cli.send" not in modules
