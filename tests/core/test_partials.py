"""hilltop.transfer.partials: a dead receiver's temporaries are cleared, a live receiver's never
are."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from hilltop.errors import RejectedError
from hilltop.transfer import partials
from hilltop.transfer.filesink import FileSink
from hilltop.transfer.foldersink import DirectorySink
from hilltop.transfer.offers import DirectoryOffer

pytestmark = pytest.mark.skipif(partials.fcntl is None, reason="no flock on this platform")


@pytest.fixture
def box(tmp_path: Path) -> Path:
    d = tmp_path / "box"
    d.mkdir()
    return d


def age(path: Path, seconds: float = partials.STALE_AFTER + 5) -> None:
    """Make ``path`` look unchanged for ``seconds``."""
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def one_file_zip(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(name, data)
    return buf.getvalue()


def test_an_old_unlocked_leftover_file_is_removed_and_its_name_reused(box: Path) -> None:
    leftover = box / ".f.hilltop-part"
    leftover.write_bytes(b"half of an earlier transfer")
    age(leftover)
    sink = FileSink(str(box / "f"), 1)
    assert sink.temp_path == str(leftover)
    sink.write(b"x")
    sink.finish()
    assert os.listdir(box) == ["f"]
    assert (box / "f").read_bytes() == b"x"


def test_a_leftover_a_live_receiver_holds_is_kept(box: Path) -> None:
    with FileSink(str(box / "f"), 2) as live:
        live.write(b"a")
        age(Path(live.temp_path))  # a receiver waiting long for its sender
        with FileSink(str(box / "f"), 2) as other:
            assert other.temp_path == str(box / ".f.1.hilltop-part")
            assert Path(live.temp_path).read_bytes() == b"a"
        live.write(b"b")
        live.finish()
    assert os.listdir(box) == ["f"]
    assert (box / "f").read_bytes() == b"ab"


def test_a_recent_leftover_is_kept_even_unlocked(box: Path) -> None:
    """The age closes the instant between a receiver creating its name and locking it."""
    leftover = box / ".f.hilltop-part"
    leftover.write_bytes(b"just made")
    with FileSink(str(box / "f"), 1) as sink:
        assert sink.temp_path == str(box / ".f.1.hilltop-part")
    assert leftover.read_bytes() == b"just made"


def test_a_leftover_of_another_kind_is_kept(box: Path, tmp_path: Path) -> None:
    (box / ".f.hilltop-part").mkdir()  # a folder where a file temporary would be
    age(box / ".f.hilltop-part")
    outside = tmp_path / "outside"
    outside.write_text("not ours")
    (box / ".g.hilltop-part").symlink_to(outside)
    age(box / ".g.hilltop-part")
    with FileSink(str(box / "f"), 1) as f, FileSink(str(box / "g"), 1) as g:
        assert f.temp_path.endswith(".f.1.hilltop-part")
        assert g.temp_path.endswith(".g.1.hilltop-part")
    assert (box / ".f.hilltop-part").is_dir()
    assert os.path.islink(box / ".g.hilltop-part") and outside.read_text() == "not ours"


def test_an_old_leftover_folder_is_removed_with_everything_in_it(box: Path) -> None:
    leftover = box / ".recv.hilltop-dir"
    (leftover / "sub").mkdir(parents=True)
    (leftover / "sub" / "half").write_bytes(b"x" * 1000)
    (leftover / "sub").chmod(0o500)  # a received mode that makes removal harder
    age(leftover)
    data = one_file_zip("new", b"fresh")
    sink = DirectorySink(str(box / "recv"), DirectoryOffer("recv", len(data), 5, 1))
    assert sink.temp_path == str(leftover)
    assert os.listdir(leftover) == []
    sink.write(data)
    sink.finish()
    assert os.listdir(box) == ["recv"]
    assert os.listdir(box / "recv") == ["new"]


def test_a_live_folder_receive_keeps_its_lock_until_renamed(box: Path) -> None:
    data = one_file_zip("a", b"1")
    offer = DirectoryOffer("recv", len(data), 1, 1)
    live = DirectorySink(str(box / "recv"), offer)
    age(Path(live.temp_path))
    other = DirectorySink(str(box / "recv"), offer)
    assert other.temp_path == str(box / ".recv.1.hilltop-dir")
    live.write(data)
    live.finish()
    other.write(data)
    with pytest.raises(RejectedError):
        other.finish()  # "recv" exists now: never overwritten
    assert os.listdir(box) == ["recv"]


def test_the_temporary_of_a_killed_receiver_is_cleared_by_the_next(box: Path) -> None:
    """The real case: SIGKILL leaves the file, and the kernel drops the dead process's lock."""
    script = (
        "import sys, time\n"
        "from hilltop.transfer.filesink import FileSink\n"
        f"sink = FileSink({str(box / 'f')!r}, 10)\n"
        "sink.write(b'12345')\n"
        "print(sink.temp_path, flush=True)\n"
        "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        temp = Path(proc.stdout.readline().strip())  # type: ignore[union-attr]
        age(temp)
        with FileSink(str(box / "f"), 1) as alive:
            assert alive.temp_path != str(temp)  # still locked by the sleeping receiver
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert temp.read_bytes() == b"12345"
        sink = FileSink(str(box / "f"), 1)
        assert sink.temp_path == str(temp)
        sink.write(b"x")
        sink.finish()
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
    assert os.listdir(box) == ["f"]
