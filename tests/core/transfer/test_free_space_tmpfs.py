"""The free-space check on a real, small filesystem: a folder needs room for its files only.

A tmpfs of 4 MiB mounted inside the test's own temporary folder (we run as root in CI; the
test skips where mounting is not allowed) and unmounted afterwards.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hilltop.errors import RejectedError
from hilltop.transfer.foldersink import DirectorySink
from hilltop.transfer.source import open_source
from hilltop.transfer.targets import plan_target

TMPFS_BYTES = 4 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs",
                              str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def folder_of(root: Path, files: int, size: int) -> Path:
    root.mkdir()
    for i in range(files):
        (root / f"part{i}.bin").write_bytes(os.urandom(size))
    return root


def test_a_folder_that_fits_once_unpacked_is_accepted_and_arrives(
        tmp_path: Path, small_disk: Path) -> None:
    """3 MB of files into 4 MiB free: refused before ("need 6000304 bytes"), since the check
    counted the zip as well, which is never stored."""
    tree = folder_of(tmp_path / "tree", files=3, size=1_000_000)
    with open_source(str(tree)) as source:
        offer = source.offer
        assert offer.zipsize + offer.numbytes > TMPFS_BYTES  # what the old rule asked for
        target = plan_target(offer, None, str(small_disk))
        with DirectorySink(target, offer) as sink:
            while chunk := source.read(65536):
                sink.write(chunk)
            sink.finish()
    assert sorted(os.listdir(small_disk / "tree")) == ["part0.bin", "part1.bin", "part2.bin"]
    assert all((small_disk / "tree" / name).read_bytes() == (tree / name).read_bytes()
               for name in os.listdir(tree))


def test_a_folder_bigger_than_the_free_space_is_refused_before_any_byte(
        tmp_path: Path, small_disk: Path) -> None:
    tree = folder_of(tmp_path / "tree", files=5, size=1_000_000)
    with open_source(str(tree)) as source, pytest.raises(RejectedError,
                                                          match="not enough free space"):
        plan_target(source.offer, None, str(small_disk))
    assert os.listdir(small_disk) == []
