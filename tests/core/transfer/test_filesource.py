"""hilltop.transfer.source: offers and byte streams for files and directories (sized zip)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hilltop.errors import UnsendableError
from hilltop.transfer import source as source_module
from hilltop.transfer.manysource import open_bundle
from hilltop.transfer.offers import DirectoryOffer, FileOffer
from hilltop.transfer.source import DirectorySource, FileSource, open_source
from hilltop.transfer.zipwriter import SMALL_MEMBER


def _permissions_are_bypassed() -> bool:
    """True for root with CAP_DAC_OVERRIDE: it reads mode-000 files, so those tests cannot fail."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe"
        probe.write_text("x")
        probe.chmod(0)
        try:
            probe.read_text()
        except PermissionError:
            return False
        return True


ROOT = _permissions_are_bypassed()


def read_all(source, n: int = 16384) -> bytes:
    out = bytearray()
    while chunk := source.read(n):
        assert len(chunk) <= n
        out += chunk
    assert source.read(n) == b""
    return bytes(out)


def make_tree(root: Path) -> Path:
    """A small tree with nested folders, an empty folder, an empty file and non-ASCII names."""
    (root / "a" / "b").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "a" / "b" / "deep.txt").write_bytes(b"deep\n" * 1000)
    (root / "a" / "run.sh").write_bytes(b"#!/bin/sh\n")
    (root / "a" / "run.sh").chmod(0o755)
    (root / "zero").write_bytes(b"")
    (root / "über ☃.txt").write_text("snow")
    (root / "secret").write_bytes(b"s")
    (root / "secret").chmod(0o600)
    (root / "a").chmod(0o750)
    return root


# --- files ---------------------------------------------------------------------------------------

def test_file_offer_and_bytes(tmp_path: Path) -> None:
    data = os.urandom(3 * 16384 + 5)
    (tmp_path / "blob.bin").write_bytes(data)
    with open_source("blob.bin", cwd=str(tmp_path)) as source:
        assert isinstance(source, FileSource)
        assert source.offer == FileOffer("blob.bin", len(data))
        assert source.size == len(data)
        assert read_all(source, 1000) == data


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "e").write_bytes(b"")
    with open_source(str(tmp_path / "e")) as source:
        assert source.offer == FileOffer("e", 0)
        assert read_all(source) == b""


def test_symlink_offers_the_link_name(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("content")
    os.symlink("real.txt", tmp_path / "alias.txt")
    with open_source("alias.txt", cwd=str(tmp_path)) as source:
        assert source.offer == FileOffer("alias.txt", 7)
        assert read_all(source) == b"content"


def test_trailing_slash_still_names_the_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with open_source("d/", cwd=str(tmp_path)) as source:
        assert source.offer.dirname == "d"


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(UnsendableError, match="no file or directory named 'nope'"):
        open_source("nope", cwd=str(tmp_path))


def test_fifo_is_unsendable(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(UnsendableError, match="not a regular file"):
        open_source(str(tmp_path / "pipe"))


@pytest.mark.parametrize("swapped_in", ["fifo", "folder"])
def test_file_swapped_between_stat_and_open(tmp_path: Path, swapped_in: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The path is a file when looked at and something else when opened: a FIFO must not
    hang the sender waiting for a writer, a folder must not be read as a file."""
    target = tmp_path / "f"
    if swapped_in == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    (tmp_path / "file").write_bytes(b"x" * 10)
    file_stat = os.stat(tmp_path / "file")
    real_stat = os.stat

    def stat_sees_a_file(path: object, *args: object, **kwargs: object) -> os.stat_result:
        return file_stat if str(path) == str(target) else real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat_sees_a_file)
    outcome: list[BaseException | None] = []

    def open_it() -> None:
        try:
            open_source(str(target)).close()
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - checked below
            outcome.append(err)

    opener = threading.Thread(target=open_it, daemon=True)  # a hang must fail, not stall
    opener.start()
    opener.join(10)
    assert outcome, "opening the FIFO hung"
    assert isinstance(outcome[0], UnsendableError), outcome
    assert "not a regular file" in str(outcome[0])


@pytest.mark.skipif(ROOT, reason="root can read everything")
def test_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "locked").write_text("x")
    (tmp_path / "locked").chmod(0)
    with pytest.raises(UnsendableError, match="Permission denied"):
        open_source(str(tmp_path / "locked"))


def test_file_that_shrinks_while_sending(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 100)
    with open_source(str(tmp_path / "f")) as source:
        (tmp_path / "f").write_bytes(b"x" * 10)
        with pytest.raises(UnsendableError, match="got shorter"):
            read_all(source)


def test_file_that_grows_while_sending_fails(tmp_path: Path) -> None:
    """Was: sent up to the offered size. Appending and overwriting look alike to stat, so a
    file written while it is read fails the send (issue 27 item 25)."""
    (tmp_path / "f").write_bytes(b"x" * 10)
    make_old(tmp_path / "f")
    with open_source(str(tmp_path / "f")) as source:
        with open(tmp_path / "f", "ab") as grow:
            grow.write(b"y" * 10)
        with pytest.raises(UnsendableError, match="changed while it was being sent"):
            read_all(source)


# --- directories ---------------------------------------------------------------------------------

def zip_of(source) -> tuple[bytes, zipfile.ZipFile]:
    data = read_all(source, 777)
    assert len(data) == source.offer.zipsize
    return data, zipfile.ZipFile(io.BytesIO(data))


def test_directory_offer_matches_the_zip(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    with open_source("tree", cwd=str(tmp_path)) as source:
        assert isinstance(source, DirectorySource)
        offer = source.offer
        assert isinstance(offer, DirectoryOffer)
        assert (offer.dirname, offer.mode) == ("tree", "zipfile/deflated")
        _, zf = zip_of(source)
    assert zf.testzip() is None
    files = [i for i in zf.infolist() if not i.is_dir()]
    assert offer.numfiles == len(files) == 5
    assert offer.numbytes == sum(i.file_size for i in files) == 5000 + 10 + 0 + 4 + 1
    assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())
    names = zf.namelist()
    # Like official 0.24, only empty directories get entries (see hilltop.transfer.source).
    assert set(names) == {"a/b/deep.txt", "a/run.sh", "empty/", "secret", "zero", "über ☃.txt"}
    assert zf.read("a/b/deep.txt") == b"deep\n" * 1000
    assert zf.read("über ☃.txt") == b"snow"


def test_directory_modes_go_in_external_attributes(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    with open_source(str(tmp_path / "tree")) as source:
        _, zf = zip_of(source)
    modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
    assert stat.S_IMODE(modes["a/run.sh"]) == 0o755
    assert stat.S_IMODE(modes["secret"]) == 0o600
    assert stat.S_ISDIR(modes["empty/"]) and stat.S_ISREG(modes["zero"])


def test_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "nothing").mkdir()
    with open_source(str(tmp_path / "nothing")) as source:
        assert source.offer == DirectoryOffer("nothing", zipsize=22, numbytes=0, numfiles=0)
        _, zf = zip_of(source)
    assert zf.namelist() == []


def test_symlinks_inside_are_followed_and_loops_cut(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "d").mkdir(parents=True)
    (tree / "d" / "f.txt").write_text("f")
    os.symlink("d/f.txt", tree / "link.txt")
    os.symlink("..", tree / "d" / "up")          # a loop back to the top
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.txt").write_text("o")
    os.symlink(outside, tree / "ext")
    with open_source(str(tree)) as source:
        _, zf = zip_of(source)
    assert sorted(zf.namelist()) == ["d/f.txt", "ext/o.txt", "link.txt"]
    assert zf.read("link.txt") == b"f"
    assert not any(stat.S_ISLNK(i.external_attr >> 16) for i in zf.infolist())


def test_broken_symlink_is_unsendable_or_skipped(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "ok").write_text("ok")
    os.symlink("missing", tree / "dangling")
    with pytest.raises(UnsendableError, match="dangling: broken symlink"):
        open_source(str(tree))
    with open_source(str(tree), skip_unsendable=True) as source:
        assert len(source.skipped) == 1 and "dangling" in source.skipped[0]
        assert source.offer.numfiles == 1
        _, zf = zip_of(source)
    assert zf.namelist() == ["ok"]


def test_fifo_inside_directory_is_unsendable_or_skipped(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    os.mkfifo(tree / "pipe")
    with pytest.raises(UnsendableError, match="pipe: not a regular file"):
        open_source(str(tree))
    with open_source(str(tree), skip_unsendable=True) as source:
        _, zf = zip_of(source)
    assert zf.namelist() == []


def test_directory_left_empty_by_skipping_still_arrives(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    os.mkfifo(tree / "sub" / "pipe")
    with open_source(str(tree), skip_unsendable=True) as source:
        _, zf = zip_of(source)
    assert zf.namelist() == ["sub/"]


@pytest.mark.skipif(ROOT, reason="root can read everything")
def test_unreadable_entries_inside_directory(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "closed").mkdir(parents=True)
    (tree / "closed" / "x").write_text("x")
    (tree / "locked").write_text("x")
    (tree / "locked").chmod(0)
    (tree / "closed").chmod(0)
    try:
        with pytest.raises(UnsendableError, match="Permission denied"):
            open_source(str(tree))
        with open_source(str(tree), skip_unsendable=True) as source:
            _, zf = zip_of(source)
        assert zf.namelist() == []
        assert len(source.skipped) == 2
    finally:
        (tree / "closed").chmod(0o755)


@pytest.mark.skipif(not hasattr(os, "setuid") or os.geteuid() != 0,
                    reason="needs root to become another user")
def test_unreadable_entries_seen_by_an_ordinary_user() -> None:
    """The same as above where the tests run as root (CI): a forked child becomes nobody."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        tree = Path(top) / "tree"
        (tree / "closed").mkdir(parents=True)
        (tree / "closed" / "x").write_text("x")
        (tree / "locked").write_text("x")
        (tree / "open").write_text("x")
        (tree / "locked").chmod(0)
        (tree / "closed").chmod(0)
        tree.chmod(0o755)
        (tree / "open").chmod(0o644)
        # the child may not read the interpreter's or the venv's files: import first
        import encodings.cp437  # noqa: F401

        import zipstream  # noqa: F401

        reading, writing = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            try:
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
                try:
                    open_source(str(tree))
                    refused = "no error"
                except UnsendableError as err:
                    refused = str(err)
                try:  # the unreadable file itself, as test_unreadable_file (skipped as root)
                    open_source(str(tree / "locked"))
                    refused_file = "no error"
                except UnsendableError as err:
                    refused_file = str(err)
                with open_source(str(tree), skip_unsendable=True) as source:
                    _, zf = zip_of(source)
                report = f"{refused}|{zf.namelist()}|{len(source.skipped)}|{refused_file}"
                os.write(writing, report.encode())
            except BaseException as err:  # noqa: BLE001 - reported to the parent
                os.write(writing, f"child failed: {err!r}".encode())
            finally:
                os._exit(0)
        os.close(writing)
        with os.fdopen(reading) as r:
            report = r.read()
        os.waitpid(pid, 0)
        (tree / "closed").chmod(0o755)
    assert report.count("|") == 3, report
    refused, names, skipped, refused_file = report.split("|")
    assert "Permission denied" in refused and "Permission denied" in refused_file
    assert names == "['open']" and skipped == "2"


BIG = SMALL_MEMBER + 1000  # streamed with a data descriptor, read straight into the buffer


def test_big_and_small_files_in_one_directory(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree")
    big = os.urandom(BIG)
    (tree / "a" / "big.bin").write_bytes(big)
    with open_source(str(tree)) as source:
        data, zf = zip_of(source)
    assert zf.testzip() is None
    assert zf.read("a/big.bin") == big and zf.read("a/b/deep.txt") == b"deep\n" * 1000
    assert zf.getinfo("a/big.bin").flag_bits & 0x8  # the one member with a descriptor
    assert not zf.getinfo("a/b/deep.txt").flag_bits & 0x8


@pytest.mark.parametrize("size", [100, BIG])
@pytest.mark.parametrize("change", [+100, -50])
def test_file_changing_size_inside_directory(tmp_path: Path, size: int, change: int) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_bytes(b"x" * size)
    with open_source(str(tree)) as source:
        (tree / "f").write_bytes(b"x" * (size + change))
        with pytest.raises(UnsendableError, match="changed"):
            read_all(source)


@pytest.mark.parametrize("size", [100, BIG])
def test_file_swapped_for_a_fifo_inside_directory(tmp_path: Path, size: int) -> None:
    """Opening a FIFO for reading would wait for a writer forever; the send fails instead."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_bytes(b"x" * size)
    source = open_source(str(tree))
    (tree / "f").unlink()
    os.mkfifo(tree / "f")
    outcome: list[BaseException | None] = []

    def send() -> None:
        try:
            read_all(source)
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - checked below
            outcome.append(err)

    sender = threading.Thread(target=send, daemon=True)  # a hang must fail, not stall pytest
    sender.start()
    sender.join(10)
    assert outcome, "reading the FIFO hung"
    assert isinstance(outcome[0], UnsendableError) and "changed" in str(outcome[0])
    source.close()


def test_file_vanishing_inside_directory(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_bytes(b"x" * 100)
    with open_source(str(tree)) as source:
        (tree / "f").unlink()
        with pytest.raises(UnsendableError, match="No such file"):
            read_all(source)


def _open_descriptors_of(path: Path) -> int:
    fds = os.listdir("/proc/self/fd")
    return sum(os.path.realpath(f"/proc/self/fd/{fd}") == os.path.realpath(path) for fd in fds)


def test_close_before_reading_everything(tmp_path: Path) -> None:
    """A transfer cut short closes the big file being streamed, and a second close is a no-op."""
    make_tree(tmp_path / "tree")
    big = tmp_path / "tree" / "big.bin"
    big.write_bytes(b"b" * BIG)
    source = open_source(str(tmp_path / "tree"))
    while _open_descriptors_of(big) == 0 and source.position < source.size:
        source.read(64 * 1024)
    assert _open_descriptors_of(big) == 1, "never got into the big file"
    assert source.position < source.size
    source.close()
    assert _open_descriptors_of(big) == 0
    source.close()
    assert _open_descriptors_of(big) == 0


# --- files written while they are read (issue 27 item 25) ------------------------------------

def make_old(path: Path) -> None:
    """Date ``path`` back a day: a write during the test then moves its mtime whatever the
    filesystem's timestamp resolution (a coarse clock could otherwise hide a quick write)."""
    old = path.stat().st_mtime - 86400
    os.utime(path, (old, old))


def overwrite_in_place(path: Path, data: bytes) -> None:
    """Same size, new bytes, same inode: what an editor or a database does to a file."""
    with open(path, "r+b") as f:
        f.write(data)


def test_a_file_overwritten_while_sent_fails_before_its_last_bytes(tmp_path: Path) -> None:
    size = 300_000
    (tmp_path / "f").write_bytes(b"a" * size)
    make_old(tmp_path / "f")
    with open_source(str(tmp_path / "f")) as source:
        first = source.read(100_000)
        overwrite_in_place(tmp_path / "f", b"b" * size)
        with pytest.raises(UnsendableError, match="changed while it was being sent"):
            while source.read(100_000):
                pass
        assert first == b"a" * 100_000
        assert source.position < size  # the last bytes never left: no complete mix


def test_an_unchanged_file_is_sent_whole(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"a" * 300_000)
    make_old(tmp_path / "f")
    with open_source(str(tmp_path / "f")) as source:
        buffer = bytearray(65536)
        got = bytearray()
        while n := source.readinto(buffer):
            got += buffer[:n]
        assert bytes(got) == b"a" * 300_000


@pytest.mark.parametrize("size", [1000, SMALL_MEMBER + 1], ids=["small", "streamed"])
def test_a_folder_file_overwritten_while_read_fails_the_zip(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """A small file is read whole in one go, a big one streamed: the rewrite lands between
    two reads of it either way (after its first read)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_bytes(b"a" * size)
    make_old(tree / "f")
    real_read_into = source_module._read_into
    rewritten = []

    def read_then_rewrite(fd: int, path: str, view: memoryview) -> int:
        n = real_read_into(fd, path, view[:100])
        if path.endswith("f") and not rewritten:
            rewritten.append(path)
            overwrite_in_place(tree / "f", b"b" * size)
        return n

    monkeypatch.setattr(source_module, "_read_into", read_then_rewrite)
    with open_source(str(tree)) as source:
        with pytest.raises(UnsendableError, match="'.*/f' changed while it was being sent"):
            read_all(source, 4096)
        assert rewritten and source.position < source.size


def test_a_manifest_file_overwritten_while_read_fails_before_its_last_bytes(
        tmp_path: Path) -> None:
    for name in ("a.bin", "b.bin"):
        (tmp_path / name).write_bytes(name[:1].encode() * 50_000)
        make_old(tmp_path / name)
    bundle = open_bundle(["a.bin", "b.bin"], cwd=str(tmp_path))
    with bundle.files_source() as source:
        buffer = bytearray(60_000)
        assert source.readinto(buffer) == 60_000  # all of a.bin and the start of b.bin
        overwrite_in_place(tmp_path / "b.bin", b"x" * 50_000)
        with pytest.raises(UnsendableError, match="b.bin' changed while it was being sent"):
            source.readinto(buffer)
        assert source.position == 60_000


# --- the case rule on the sender (issue 27 item 23) ------------------------------------------

@pytest.mark.parametrize(("names", "clash"), [
    (["README", "readme"], "/readme: clashes with 'README'"),
    (["Dir/a", "dir/b"], "/dir: clashes with 'Dir'"),
    (["cafe\u0301.txt", "caf\u00e9.txt"], "clashes with 'cafe\\u0301.txt'"),
    (["Notes", "notes/x"], "/notes: clashes with 'Notes'"),
])
def test_names_one_disk_would_merge_are_refused_before_the_offer(
        tmp_path: Path, names: list[str], clash: str) -> None:
    """A hilltop receiver refuses them (:mod:`hilltop.transfer.entrynames`): say so before
    the code is shown, or leave the later name out with --ignore-unsendable-files."""
    tree = tmp_path / "tree"
    for name in names:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(name)
    with pytest.raises(UnsendableError, match=re.escape(clash)):
        open_source(str(tree))
    with open_source(str(tree), skip_unsendable=True) as source:
        assert len(source.skipped) == 1 and "clashes with" in source.skipped[0]
        _, zf = zip_of(source)
        assert zf.namelist() == [names[0]]


def test_the_case_rule_holds_inside_an_argument_of_several(tmp_path: Path) -> None:
    (tmp_path / "docs" / "Guide").mkdir(parents=True)
    (tmp_path / "docs" / "guide").mkdir()
    (tmp_path / "docs" / "Guide" / "a").write_text("a")
    (tmp_path / "docs" / "guide" / "b").write_text("b")
    (tmp_path / "other.txt").write_text("x")
    with pytest.raises(UnsendableError, match="/guide: clashes with 'Guide'"):
        open_bundle(["docs", "other.txt"], cwd=str(tmp_path))


# --- deep trees (issue 27 item 24) -----------------------------------------------------------

@contextlib.contextmanager
def deep_tree(root: Path, depth: int) -> Iterator[None]:
    """``root/d/d/.../d/f.txt``, ``depth`` folders deep, made through directory descriptors
    (paths that long exceed PATH_MAX), and removed afterwards without deep paths either (the
    tmp_path clean-up, shutil.rmtree, would recurse once per level)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open("f.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    try:
        yield
    finally:
        # lift the grandchild up one level at a time, removing the child in between
        while (root / "d").exists():
            if (root / "d" / "d").exists():
                os.rename(root / "d" / "d", root / "next")
            for name in os.listdir(root / "d"):
                os.unlink(root / "d" / name)
            os.rmdir(root / "d")
            if (root / "next").exists():
                os.rename(root / "next", root / "d")


@pytest.mark.parametrize("depth", [1_500, 10_000])
def test_a_tree_deeper_than_the_limit_is_refused_clearly(tmp_path: Path, depth: int) -> None:
    """os.walk recursed once per level: RecursionError, "a bug in hilltop"."""
    with deep_tree(tmp_path / "tree", depth):
        with pytest.raises(UnsendableError, match="nested more than 256 folders deep") as err:
            open_source(str(tmp_path / "tree"))
        assert len(str(err.value)) < 300  # one readable line, not a 20,000-byte path
        with pytest.raises(UnsendableError, match="nested more than 256 folders deep"):
            open_bundle(["tree"], cwd=str(tmp_path))


def test_the_deepest_tree_a_receiver_takes_is_sent(tmp_path: Path) -> None:
    """A path of 256 names (the receivers' limit, entrynames.MAX_PATH_DEPTH) goes; one more
    level is refused, in a folder and with the argument's name in front of it."""
    with deep_tree(tmp_path / "tree", 255):
        with open_source(str(tmp_path / "tree")) as source:
            _, zf = zip_of(source)
            assert zf.namelist() == ["d/" * 255 + "f.txt"]
        with pytest.raises(UnsendableError, match="nested more than 256 folders deep"):
            open_bundle(["tree"], cwd=str(tmp_path))  # "tree/" + 255 folders + "f.txt"


def test_a_big_file_written_while_sent_fails_long_before_its_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Looked at every WATCH_EVERY bytes (64 MiB; 1,000 here), not only at the end."""
    monkeypatch.setattr(source_module, "WATCH_EVERY", 1000)
    (tmp_path / "f").write_bytes(b"a" * 300_000)
    make_old(tmp_path / "f")
    with open_source(str(tmp_path / "f")) as source:
        assert source.read(100_000) == b"a" * 100_000
        overwrite_in_place(tmp_path / "f", b"b" * 10)
        with pytest.raises(UnsendableError, match="changed while it was being sent"):
            source.read(100_000)
        assert source.position == 100_000
