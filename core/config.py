"""The config file: where it lives and how one of its tables is read.

Kept apart from the plugin machinery so that reading the ``[webrtc]`` table while the command
line is parsed (every command does) imports no pluggy: a text message never loads a plugin.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hilltop.errors import LocalError


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/hilltop/config.toml`` (``~/.config`` when the variable is unset)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "hilltop" / "config.toml"


def read_table(name: str, path: Path | None = None) -> dict[str, Any] | None:
    """The ``[name]`` table of the config file ({} if the file has none), None when there is
    no config file; a LocalError when it cannot be read or the table is not a table.

    tomllib is imported only when there is a file to parse: most runs have none, and each
    reads up to three tables, while the import compiles tomllib's patterns (~3 ms).
    """
    path = config_path() if path is None else path
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below, once tomllib is imported
    except FileNotFoundError:
        return None
    except OSError as err:
        raise LocalError(f"cannot read config file {path}: {err}") from None
    import tomllib

    try:
        with f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise LocalError(f"cannot read config file {path}: {err}") from None
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise LocalError(f"config file {path}: [{name}] must be a table")
    return table
