"""hilltop.transfer.partials: a dead receiver's temporaries are cleared, a live receiver's never
are."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from hilltop.errors import LocalError, ProtocolError, RejectedError
from hilltop.transfer import partials, resume
from hilltop.transfer.filesink import DIRECT_CHUNK, DIRECT_MIN_SIZE, FileSink, ResumableFileSink
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


# --- kept for resuming (resume-v1) --------------------------------------------------------------
def interrupted(box: Path, data: bytes, size: int, name: str = "f") -> None:
    """A resumable receive of ``name`` (offered as ``size`` bytes) interrupted after ``data``."""
    with ResumableFileSink(str(box / name), name, size) as sink:
        sink.write(data)
        sink.abort()
    assert sink.kept_bytes == len(data)


def test_an_interrupted_resumable_receive_keeps_its_partial_and_a_record(box: Path) -> None:
    interrupted(box, b"half", 8)
    assert sorted(os.listdir(box)) == [".f.hilltop-part", ".f.hilltop-resume"]
    assert (box / ".f.hilltop-part").read_bytes() == b"half"
    record = partials.read_record(str(box / ".f.hilltop-part"))
    assert record is not None and record.matches("f", 8) and record.on_disk == 4


def test_the_record_is_there_before_the_first_byte(box: Path) -> None:
    """A SIGKILLed receiver cannot write it on the way out."""
    with ResumableFileSink(str(box / "f"), "f", 8) as sink:
        record = partials.read_record(sink.temp_path)
        assert record is not None and record.matches("f", 8) and record.on_disk == 0
        sink.write(b"x")


def test_the_record_is_kept_current_as_data_is_written(box: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resume, "RECORD_EVERY", 4)
    with ResumableFileSink(str(box / "f"), "f", 20) as sink:
        sink.write(b"abcde")
        record = partials.read_record(sink.temp_path)
        assert record is not None and record.on_disk == 5


def test_a_later_receive_continues_after_a_proven_prefix(box: Path) -> None:
    interrupted(box, b"half", 8)
    with ResumableFileSink(str(box / "f"), "f", 8) as sink:
        assert sink.resume_offset == 4 and sink.restart_reason == ""
        assert sink.temp_path == str(box / ".f.hilltop-part")
        proof = sink.prove_prefix(bytes(32))
        assert proof == hashlib.sha256(bytes(32) + b"half").hexdigest()
        sink.resume_at(4, hashed=False)
        sink.write(b"more")
        digest = sink.finish()
    assert digest == hashlib.sha256(bytes(32) + b"halfmore").hexdigest()  # whole, salted
    assert sorted(os.listdir(box)) == ["f"]
    assert (box / "f").read_bytes() == b"halfmore"


def test_a_refused_prefix_starts_over_in_the_same_partial(box: Path) -> None:
    interrupted(box, b"half", 8)
    with ResumableFileSink(str(box / "f"), "f", 8) as sink:
        sink.prove_prefix(bytes(32))
        sink.resume_at(0, hashed=True)
        assert sink.received == 0
        sink.write(b"12345678")
        assert sink.finish() == hashlib.sha256(b"12345678").hexdigest()
    assert (box / "f").read_bytes() == b"12345678"
    assert sorted(os.listdir(box)) == ["f"]


def test_another_file_of_the_same_name_starts_from_zero(box: Path) -> None:
    interrupted(box, b"half", 8)
    with ResumableFileSink(str(box / "f"), "f", 9) as sink:
        assert sink.resume_offset == 0
        assert "another file" in sink.restart_reason
        assert sink.temp_path == str(box / ".f.hilltop-part")
        assert os.path.getsize(sink.temp_path) == 0


def test_a_kept_partial_survives_a_plain_receive_of_the_same_name(box: Path) -> None:
    interrupted(box, b"half", 8)
    age(box / ".f.hilltop-part")  # stale for a plain leftover, not for a kept one
    with FileSink(str(box / "f"), 1) as sink:
        assert sink.temp_path == str(box / ".f.1.hilltop-part")
    assert (box / ".f.hilltop-part").read_bytes() == b"half"


def test_a_kept_partial_is_cleaned_after_keep_for(box: Path) -> None:
    interrupted(box, b"half", 8)
    age(box / ".f.hilltop-part", resume.KEEP_FOR + 60)
    with FileSink(str(box / "f"), 1) as sink:
        assert sink.temp_path == str(box / ".f.hilltop-part")
    assert os.listdir(box) == []


def test_no_resume_removes_a_kept_partial_at_once(box: Path) -> None:
    interrupted(box, b"half", 8)
    with FileSink(str(box / "f"), 8, drop_kept=True) as sink:
        assert sink.temp_path == str(box / ".f.hilltop-part")
        sink.write(b"12345678")
        sink.finish()
    assert sorted(os.listdir(box)) == ["f"]


def test_a_live_resumable_receive_is_never_taken_over(box: Path) -> None:
    with ResumableFileSink(str(box / "f"), "f", 8) as live:
        live.write(b"half")
        with ResumableFileSink(str(box / "f"), "f", 8) as other:
            assert other.temp_path == str(box / ".f.1.hilltop-part")
            assert other.resume_offset == 0


def test_a_failed_check_keeps_nothing(box: Path) -> None:
    with ResumableFileSink(str(box / "f"), "f", 4) as sink:
        sink.write(b"ab")
        with pytest.raises(ProtocolError):
            sink.write(b"cde")  # more than offered: the data cannot be trusted
    assert os.listdir(box) == []


def test_an_interruption_before_any_byte_keeps_nothing(box: Path) -> None:
    with ResumableFileSink(str(box / "f"), "f", 4):
        pass
    assert os.listdir(box) == []


def test_a_sigkilled_receiver_leaves_what_a_later_one_continues(box: Path) -> None:
    script = (
        "import os, sys, time\n"
        "from hilltop.transfer.filesink import ResumableFileSink\n"
        f"s = ResumableFileSink({str(box / 'f')!r}, 'f', 10)\n"
        "s.write(b'12345')\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with ResumableFileSink(str(box / "f"), "f", 10) as sink:
        assert sink.resume_offset == 5


def test_a_big_kept_partial_continues_from_an_aligned_offset(box: Path) -> None:
    """O_DIRECT writes need an aligned offset: up to 1 MiB of the kept bytes is given back."""
    size = DIRECT_MIN_SIZE + 10
    data = os.urandom(size)
    interrupted(box, data[:3 * DIRECT_CHUNK + 5], size)
    with ResumableFileSink(str(box / "f"), "f", size) as sink:
        assert sink.resume_offset == 3 * DIRECT_CHUNK
        sink.prove_prefix(bytes(32))
        sink.resume_at(sink.resume_offset, hashed=True)
        sink.write(data[3 * DIRECT_CHUNK:])
        assert sink.finish() == hashlib.sha256(bytes(32) + data).hexdigest()
    assert (box / "f").read_bytes() == data


def test_a_complete_receive_removes_the_partial_kept_of_its_name(box: Path) -> None:
    """Issue 27 item 9: a plain receive of the name (official sender, --no-resume peer) used
    the next hidden name and left the kept partial and its record beside the finished file."""
    interrupted(box, b"half", 8)
    sink = FileSink(str(box / "f"), 3)
    assert sink.temp_path == str(box / ".f.1.hilltop-part")
    sink.write(b"new")
    sink.finish()
    assert sorted(os.listdir(box)) == ["f"]
    assert (box / "f").read_bytes() == b"new"
    assert sink.dropped_kept == 4  # the caller says so in one line


def test_a_live_receive_of_the_name_is_left_alone_when_another_completes(box: Path) -> None:
    with ResumableFileSink(str(box / "f"), "f", 8) as live:
        live.write(b"half")
        done = FileSink(str(box / "f"), 1)
        done.write(b"x")
        done.finish()
        assert done.dropped_kept == 0
        assert Path(live.temp_path).read_bytes() == b"half"
        assert partials.read_record(live.temp_path) is not None


# --- created exclusively: nothing planted in the folder is written into (issue 27 item 12) -----
def victim_file(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.write_bytes(b"someone else's file")
    return victim


def forge_record(part: Path, name: str, size: int, of: Path | None) -> None:
    """A record beside ``part`` as a planter would write it: naming ``of``'s inode."""
    st = of.stat() if of is not None else None
    partials.write_record(str(part), resume.PartialRecord(
        name, size, 4, time.time(), *((st.st_dev, st.st_ino) if st else ())))


@pytest.mark.parametrize("record", ["matching", "none-and-old"])
def test_a_hard_link_planted_as_the_partial_is_never_written_into(
        box: Path, tmp_path: Path, record: str) -> None:
    victim = victim_file(tmp_path)
    planted = box / ".x.bin.hilltop-part"
    os.link(victim, planted)
    if record == "matching":
        forge_record(planted, "x.bin", 8, victim)
    else:
        age(planted)
    with ResumableFileSink(str(box / "x.bin"), "x.bin", 8) as sink:
        assert sink.resume_offset == 0
        sink.write(b"received")
        sink.finish()
    assert victim.read_bytes() == b"someone else's file"
    assert (box / "x.bin").read_bytes() == b"received"
    assert not os.path.samestat(os.stat(box / "x.bin"), os.stat(victim))
    assert os.stat(box / "x.bin").st_nlink == 1


def test_a_hard_link_planted_at_the_records_new_name_is_not_written_through(
        box: Path, tmp_path: Path) -> None:
    victim = victim_file(tmp_path)
    os.link(victim, box / ".x.bin.hilltop-resume.new")
    with ResumableFileSink(str(box / "x.bin"), "x.bin", 8) as sink:
        sink.write(b"received")
        sink.finish()
    assert victim.read_bytes() == b"someone else's file"
    assert sorted(os.listdir(box)) == ["x.bin"]


def test_a_partial_swapped_for_another_file_is_not_continued(box: Path, tmp_path: Path) -> None:
    """The record names its partial's inode: a file renamed over the partial fails it."""
    interrupted(box, b"half", 8, name="x.bin")
    other = tmp_path / "other"
    other.write_bytes(b"half")
    os.replace(other, box / ".x.bin.hilltop-part")
    with ResumableFileSink(str(box / "x.bin"), "x.bin", 8) as sink:
        assert sink.resume_offset == 0
        assert sink.temp_path == str(box / ".x.bin.1.hilltop-part")
    assert (box / ".x.bin.hilltop-part").read_bytes() == b"half"


def test_a_partial_owned_by_someone_else_is_not_continued(
        box: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    interrupted(box, b"half", 8, name="x.bin")
    euid = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: euid + 1)
    with ResumableFileSink(str(box / "x.bin"), "x.bin", 8) as sink:
        assert sink.resume_offset == 0
        assert sink.temp_path == str(box / ".x.bin.1.hilltop-part")
    assert (box / ".x.bin.hilltop-part").read_bytes() == b"half"


def test_the_record_names_the_partial_it_belongs_to(box: Path) -> None:
    with ResumableFileSink(str(box / "f"), "f", 8) as sink:
        record = partials.read_record(sink.temp_path)
        st = os.stat(sink.temp_path)
        assert record is not None and record.names_file(st.st_dev, st.st_ino)


def test_a_resumed_receive_from_a_v1_paced_sender_may_decline_direct_io(box: Path) -> None:
    """Issue 27 item 17: a peer listing resume-v1 but not big-records sends v1 records, so
    the receiver declines O_DIRECT (story.receive_into); the kept bytes counted as data that
    had arrived and every resume failed with an internal error."""
    interrupted(box, b"half", 8)
    with ResumableFileSink(str(box / "f"), "f", 8) as sink:
        assert sink.resume_offset == 4
        sink.without_direct_io()
        sink.prove_prefix(bytes(32))
        sink.resume_at(4, hashed=True)
        sink.write(b"more")
        with pytest.raises(LocalError, match="after data arrived"):
            sink.without_direct_io()  # still refused once this receive's data came
        assert sink.finish() == hashlib.sha256(bytes(32) + b"halfmore").hexdigest()
    assert (box / "f").read_bytes() == b"halfmore"
