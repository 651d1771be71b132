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
    no config file; a LocalError when it cannot be read or the table is not a table."""
    import tomllib

    path = config_path() if path is None else path
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return None
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise LocalError(f"cannot read config file {path}: {err}") from None
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise LocalError(f"config file {path}: [{name}] must be a table")
    return table
