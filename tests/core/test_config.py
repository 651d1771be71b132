"""The config file's tables, and that reading one costs a text message no plugin machinery."""

from __future__ import annotations

from pathlib import Path

import pytest
from fresh_interpreter import run_fresh

from hilltop.config import config_path, read_table
from hilltop.errors import LocalError
from hilltop.webrtc.settings import config_servers


def test_tables_missing_file_missing_table_and_broken_ones(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert read_table("webrtc", path) is None  # no file at all
    assert config_servers(path) == {}
    path.write_text('[transports]\ndisabled = ["relay"]\n')
    assert read_table("webrtc", path) == {}
    assert read_table("transports", path) == {"disabled": ["relay"]}
    path.write_text("webrtc = 3\n")
    with pytest.raises(LocalError, match=r"\[webrtc\] must be a table"):
        config_servers(path)
    path.write_text("[webrtc\n")
    with pytest.raises(LocalError, match="cannot read config file"):
        read_table("webrtc", path)


def test_path_follows_xdg_config_home(tmp_path: Path) -> None:
    assert config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "hilltop" / "config.toml"


def test_a_text_send_loads_no_plugin_machinery() -> None:
    probe = (
        "import sys\n"
        "from hilltop.cli.main import cli\n"
        "try:\n"
        "    cli(['--relay-url', 'ws://127.0.0.1:1/v1', 'send', '--text', 'hi'],"
        " prog_name='wormhole')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('pluggy' in sys.modules, 'hilltop.transit.plugins' in sys.modules)\n")
    assert run_fresh(probe).split() == ["False", "False"]


def test_no_config_file_imports_no_toml_parser(tmp_path: Path) -> None:
    """Most runs have no config file: reading its tables then never imports tomllib."""
    (tmp_path / "config.toml").write_text('[transports]\ndisabled = ["relay"]\n')
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from hilltop.config import read_table\n"
        f"print(read_table('transports', Path({str(tmp_path / 'none.toml')!r})))\n"
        "print('tomllib' in sys.modules)\n"
        f"print(read_table('transports', Path({str(tmp_path / 'config.toml')!r})))\n")
    assert run_fresh(probe).split("\n") == ["None", "False", "{'disabled': ['relay']}", ""]
