"""The CLI's single error exit: expected errors are one line, bugs are one line and a file."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hilltop.cli.common import report_unexpected

_SCRIPT = """
from hilltop.cli.common import run
from hilltop.errors import LocalError

async def main(reactor):
    raise {error}

run(main)
"""


def _run(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter whose temporary files go to ``tmp_path``."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )


def _run_failing(error: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return _run(_SCRIPT.format(error=error), tmp_path)


def test_an_expected_error_is_its_own_sentence(tmp_path: Path) -> None:
    result = _run_failing("LocalError('that file is not there')", tmp_path)
    assert result.returncode == 1
    assert result.stderr == "ERROR: that file is not there\n"
    assert list(tmp_path.iterdir()) == []


def test_a_bug_is_one_line_with_the_traceback_kept_in_a_file(tmp_path: Path) -> None:
    result = _run_failing("KeyError('offer')", tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("ERROR: unexpected KeyError: 'offer'; this is a bug in hilltop")
    found = re.search(r"details in (\S+)$", line)
    assert found, line
    report = Path(found.group(1))
    assert report.parent == tmp_path
    text = report.read_text()
    assert text.startswith("Traceback") and "KeyError: 'offer'" in text and "in main" in text


def test_without_a_place_for_the_file_the_traceback_is_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_space(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", no_space)
    report_unexpected(RuntimeError(), "Traceback (most recent call last):\n  ...\nRuntimeError\n")
    err = capsys.readouterr().err
    assert err.startswith("ERROR: unexpected RuntimeError (a bug in hilltop)\nTraceback")


def test_a_failure_nobody_handled_is_a_warning_line_not_a_traceback(tmp_path: Path) -> None:
    """Twisted reports a failed Deferred that nobody handled when it is collected; before
    logging began it printed that with a traceback. The command still ends as it would."""
    script = """
import gc, warnings
from hilltop.cli.common import run
from twisted.internet.defer import fail

async def main(reactor):
    lost = fail(RuntimeError("nobody looked"))
    del lost
    gc.collect()
    warnings.warn("still shown", UserWarning)
    return 0

run(main)
"""
    result = _run(script, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Unhandled error" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Warning: unexpected RuntimeError: nobody looked; this is a bug")
    [report] = tmp_path.iterdir()
    assert "RuntimeError: nobody looked" in report.read_text()
    assert lines[1].endswith("UserWarning: still shown")


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_as_the_command_ends_is_not_a_bug(signame: str, tmp_path: Path) -> None:
    """A SIGTERM or Ctrl-C that arrives while the command is already ending (here: just
    before ``main`` fails) must not stop the reactor a second time: Twisted's own handler did,
    and its ReactorNotRunning was reported as "a bug in hilltop"."""
    script = f"""
import os, signal
from hilltop.cli.common import run
from hilltop.errors import LocalError

async def main(reactor):
    os.kill(os.getpid(), signal.{signame})
    raise LocalError("the peer went away")

run(main)
"""
    result = _run(script, tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr == "ERROR: the peer went away\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("error", [
    "OSError(24, 'Too many open files')",
    "LocalError('cannot reach the mailbox server') from "
    "__import__('twisted.internet.error').internet.error.ConnectError(24, 'no fd')",
])
def test_out_of_descriptors_is_a_limit_not_a_bug(error: str, tmp_path: Path) -> None:
    """Under ``ulimit -n 256`` a flood of connections made the sender die with "unexpected
    OSError: [Errno 24] ... this is a bug in hilltop": it is one line and exit status 1."""
    script = _SCRIPT.replace("    raise {error}",
                             "    import resource\n"
                             "    resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))\n"
                             "    raise {error}")
    result = _run(script.format(error=error), tmp_path)
    assert result.returncode == 1
    assert result.stderr == ("ERROR: too many open files: hilltop reached this process's limit "
                             "(200); raise it (ulimit -n) or close other programs, and try "
                             "again\n")
    assert list(tmp_path.iterdir()) == []  # no bug report written


def test_the_system_running_out_of_files_says_so() -> None:
    from hilltop.cli.common import known_error
    from hilltop.errors import OutOfFileDescriptors

    known = known_error(OSError(23, "Too many open files in system"))
    assert isinstance(known, OutOfFileDescriptors) and "the system" in str(known)
    other = OSError(2, "No such file")
    assert known_error(other) is other


def test_a_logged_failure_out_of_descriptors_is_a_plain_warning(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    report_unexpected(OSError(24, "Too many open files"), "Traceback ...", fatal=False)
    assert capsys.readouterr().err.startswith("Warning: too many open files: ")
    assert list(tmp_path.iterdir()) == []
