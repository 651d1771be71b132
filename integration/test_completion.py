"""Shell completion: commands, flags and live nameplates, driven through the real shells.

bash is driven as bash itself would drive it (COMP_WORDS/COMP_CWORD and the completion
function); fish through ``complete -C``, which runs its completions for a command line; zsh
loads the script under ``compinit`` (its widgets need a terminal to run). Nameplates come from
the test's own mailbox server, where a waiting sender holds one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from nsproc import hilltop_command

if TYPE_CHECKING:
    from conftest import Peers

BIN = str(Path(hilltop_command()[0]).parent)


def script(shell: str) -> str:
    result = subprocess.run([*hilltop_command(), "completion", shell], capture_output=True,
                            text=True, timeout=60, check=True)
    return result.stdout


def env(relay_url: str) -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
            "WORMHOLE_RELAY_URL": relay_url}


def bash_complete(words: list[str], relay_url: str, tmp_path: Path) -> list[str]:
    """COMPREPLY for the command line ``words`` (the last one is being typed)."""
    source = tmp_path / "wormhole.bash"
    source.write_text(script("bash"))
    words_literal = " ".join(f"'{w}'" for w in words)
    program = (f"source {source}\nCOMP_WORDS=({words_literal})\nCOMP_CWORD={len(words) - 1}\n"
               f"_wormhole_completion_nospace {words[0]}\n"
               "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True,
                            timeout=60, env=env(relay_url))
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


@pytest.fixture
def waiting_nameplate(peers: Peers) -> str:
    """A nameplate held on the mailbox by a sender waiting for its receiver."""
    sender = peers.hilltop("send", "--text", "completion test")
    return sender.wait_for_code().split("-")[0]


def test_bash_completes_commands_and_flags(tmp_path: Path) -> None:
    dead = "ws://127.0.0.1:9/v1"  # no server needed for these
    assert bash_complete(["wormhole", "re"], dead, tmp_path) == ["receive"]
    assert set(bash_complete(["wormhole", ""], dead, tmp_path)) >= {
        "send", "receive", "ssh", "completion", "transports", "help"}
    assert set(bash_complete(["wormhole", "send", "--co"], dead, tmp_path)) == {
        "--code", "--code-length"}
    assert set(bash_complete(["hilltop", "ssh", ""], dead, tmp_path)) == {"invite", "accept"}


def test_bash_completes_live_nameplates_then_words(mailbox_url: str, waiting_nameplate: str,
                                                   tmp_path: Path) -> None:
    got = bash_complete(["wormhole", "receive", ""], mailbox_url, tmp_path)
    assert f"{waiting_nameplate}-" in got, got
    got = bash_complete(["wormhole", "receive", f"{waiting_nameplate}-guita"], mailbox_url,
                        tmp_path)
    assert got == [f"{waiting_nameplate}-guitarist-"]
    got = bash_complete(["wormhole", "receive", f"{waiting_nameplate}-guitarist-reve"],
                        mailbox_url, tmp_path)
    assert got == [f"{waiting_nameplate}-guitarist-revenge"]


def test_bash_gets_nothing_quickly_from_a_dead_server(tmp_path: Path) -> None:
    assert bash_complete(["wormhole", "receive", ""], "ws://127.0.0.1:9/v1", tmp_path) == []


def test_fish_completes_live_nameplates(mailbox_url: str, waiting_nameplate: str,
                                        tmp_path: Path) -> None:
    fish = shutil.which("fish")
    if fish is None:
        pytest.fail("fish is not installed (apt-get install fish; .ci/run does)")
    source = tmp_path / "wormhole.fish"
    source.write_text(script("fish"))
    syntax = subprocess.run([fish, "--no-execute", str(source)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    result = subprocess.run(
        [fish, "--no-config", "-c",
         f"source {source}; complete -C 'wormhole rec'; complete -C 'wormhole receive '"],
        capture_output=True, text=True, timeout=60, env=env(mailbox_url))
    assert result.returncode == 0, result.stderr
    lines = [line.split("\t")[0] for line in result.stdout.splitlines()]
    assert "receive" in lines and f"{waiting_nameplate}-" in lines, result.stdout


def test_zsh_loads_the_script(tmp_path: Path) -> None:
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.fail("zsh is not installed (apt-get install zsh; .ci/run does)")
    source = tmp_path / "wormhole.zsh"
    source.write_text(script("zsh"))
    syntax = subprocess.run([zsh, "-n", str(source)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    loaded = subprocess.run(
        [zsh, "-f", "-c", f"autoload -Uz compinit && compinit -u -D && source {source} && "
                          "print -r -- $_comps[wormhole]"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)})
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "_wormhole_completion", loaded.stdout


def test_completion_refuses_an_unknown_shell() -> None:
    result = subprocess.run([*hilltop_command(), "completion", "tcsh"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "tcsh" in result.stderr


def test_bash_registers_both_names(tmp_path: Path) -> None:
    source = tmp_path / "wormhole.bash"
    source.write_text(script("bash"))
    result = subprocess.run(["bash", "-c", f"source {source}; complete -p wormhole hilltop"],
                            capture_output=True, text=True, timeout=60)
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all("-F _wormhole_completion_nospace" in x for x in lines), lines
