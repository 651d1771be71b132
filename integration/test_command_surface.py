"""The README's table of official 0.24's commands and flags misses none of them.

The table is how a user of the official client finds what hilltop does with each flag they
know. It is checked against official's own ``--help`` output rather than a list kept here, so
a newer official release with a new flag fails this test until the table says what we do.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

interop = pytest.mark.interop

README = Path(__file__).resolve().parents[1] / "README.md"
TABLE_HEADING = "## Commands and flags of official 0.24"

FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)")
"""A flag in a help line or table cell: ``-c``, ``--code-length``, ``--no-listen``."""

OPTION_LINE = re.compile(r"^  (-.*?)(?:\s{2,}|$)")
"""The flag column of click's ``Options:`` section: two spaces, a dash, up to the help text."""

COMMAND_LINE = re.compile(r"^  ([a-z][\w-]*)\b")

UNIVERSAL = {"--help"}
"""Every command has it; the table does not repeat it on each row."""


def _section(help_text: str, heading: str) -> list[str]:
    """The lines under ``heading:`` up to the next unindented line."""
    lines = help_text.splitlines()
    if f"{heading}:" not in lines:
        return []
    rest = lines[lines.index(f"{heading}:") + 1:]
    end = next((i for i, line in enumerate(rest) if line and not line.startswith(" ")),
               len(rest))
    return rest[:end]


def official_surface(wormhole: Path, path: tuple[str, ...] = ()
                     ) -> set[tuple[tuple[str, ...], str | None]]:
    """(command path, flag) for every flag, and (path, None) for every command, official has."""
    shown = subprocess.run([str(wormhole), *path, "--help"], capture_output=True, text=True,
                           check=True, timeout=60).stdout
    found: set[tuple[tuple[str, ...], str | None]] = {(path, None)}
    for line in _section(shown, "Options"):
        if match := OPTION_LINE.match(line):
            found |= {(path, flag) for flag in FLAG.findall(match.group(1))
                      if flag not in UNIVERSAL}
    for line in _section(shown, "Commands"):
        if match := COMMAND_LINE.match(line):
            found |= official_surface(wormhole, (*path, match.group(1)))
    return found


def table_surface(readme: str) -> set[tuple[tuple[str, ...], str | None]]:
    """The same pairs, read from the first cell of each row of the README table.

    A cell reads ``wormhole send -c, --code-length NUMWORDS``: the words before the first
    flag are the command path, and a row with flags also lists its command.
    """
    assert TABLE_HEADING in readme, f"README.md has no '{TABLE_HEADING}' section"
    body = readme.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    found: set[tuple[tuple[str, ...], str | None]] = set()
    for row in body.splitlines():
        if not row.startswith("| `wormhole"):
            continue
        cell = row.split(" | ", 1)[0].lstrip("| ").replace("`", "").replace("\\|", "|")
        words = cell.split()
        command = []
        for word in words[1:]:
            if word.startswith("-") or not re.fullmatch(r"[a-z][\w-]*,?", word):
                break
            command.append(word.rstrip(","))
            if word.endswith(","):  # "wormhole tx, rx": alternatives, not a deeper command
                break
        path = tuple(command)
        found.add((path, None))
        found |= {(path, flag) for flag in FLAG.findall(cell)}
    return found


def describe(entry: tuple[tuple[str, ...], str | None]) -> str:
    path, flag = entry
    return " ".join(["wormhole", *path, *([flag] if flag else [])])


@interop
def test_readme_table_lists_every_official_command_and_flag(peers_venv: Path) -> None:
    official = official_surface(peers_venv / "bin" / "wormhole")
    assert ((), "--dump-timing") in official and (("receive",), "--allocate") in official
    missing = official - table_surface(README.read_text())
    assert not missing, ("README.md's table of official commands lacks: "
                         + ", ".join(sorted(map(describe, missing))))


def test_table_parser_reads_paths_and_flags() -> None:
    """The parser itself: a row's flags belong to its command, aliases do not nest."""
    readme = (f"{TABLE_HEADING}\n\n| official | hilltop |\n|---|---|\n"
              "| `wormhole receive -o, --output-file FILENAME\\|DIRNAME` | same |\n"
              "| `wormhole tx`, `rx` | same |\n| `wormhole ssh accept CODE -F` | missing |\n"
              "\n## Next\n| `wormhole ignored --flag` | x |\n")
    assert table_surface(readme) == {
        (("receive",), None), (("receive",), "-o"), (("receive",), "--output-file"),
        (("tx",), None), (("ssh", "accept"), None), (("ssh", "accept"), "-F"),
    }
