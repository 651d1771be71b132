"""What the sender is asked to send misbehaves (issue 20, point 3, sender side).

A path that cannot be sent (a symlink loop; in a folder also a FIFO or socket) is refused
with one line before any code is shown; a socket given as the path (a stream, like a FIFO)
fails once the receiver accepts. A file that shrinks, or a folder entry that vanishes, while
the bytes flow: the sender stops with one line naming the file, and the receiver is left
with nothing that looks complete (at most its hidden partial). The big files are sparse:
they cost no disk on the sender's side, and the receiver gets only a few of their megabytes
before the change.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Peer, Peers

BIG = 4 * 1000**3
"""4 GB (sparse): long enough on loopback to change the file after "Sending" appears."""


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    [line] = [ln for ln in stderr.splitlines() if ln.startswith("ERROR:")]
    return line


def visible(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if not name.startswith("."))


def make_unsendable(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / kind
    if kind == "symlink-loop":
        os.symlink(path.name, path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    return path


def test_a_symlink_loop_is_refused_before_any_code(hilltop: Callable[..., Peer],
                                                  tmp_path: Path) -> None:
    path = make_unsendable(tmp_path, "symlink-loop")
    result = hilltop("send", str(path), relay_url="ws://127.0.0.1:9/v1",
                     transit_helper="tcp:127.0.0.1:9").finish(30)
    assert result.returncode == 1, result.describe()
    assert "Too many levels of symbolic links" in one_error_line(result.stderr)
    assert "Wormhole code is" not in result.stderr


def test_a_socket_offered_as_a_stream_fails_clearly_once_accepted(
        hilltop: Callable[..., Peer], fresh_code: str, tmp_path: Path) -> None:
    """A FIFO or socket given as the path is a stream by design (``send <(cmd)``, see
    test_pipes.py); a socket cannot be opened for reading, which is said in one line, and
    the receiver keeps nothing."""
    path = make_unsendable(tmp_path, "socket")
    dest = tmp_path / "dest"
    dest.mkdir()
    sender = hilltop("send", "--code", fresh_code, str(path))
    received = hilltop("receive", "--accept-file", fresh_code, cwd=dest).finish(60)
    sent = sender.finish(60)
    assert sent.returncode == 1, sent.describe()
    assert "socket" in one_error_line(sent.stderr), sent.describe()
    assert received.returncode != 0 and visible(dest) == [], received.describe()


@pytest.mark.parametrize("kind", ["fifo", "socket", "symlink-loop"])
def test_an_unsendable_entry_in_a_folder_is_refused_before_any_code(
        hilltop: Callable[..., Peer], tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "fine.txt").write_text("fine\n")
    make_unsendable(folder, kind)
    result = hilltop("send", str(folder), relay_url="ws://127.0.0.1:9/v1",
                     transit_helper="tcp:127.0.0.1:9").finish(30)
    assert result.returncode == 1, result.describe()
    assert kind in one_error_line(result.stderr), result.describe()


def transfer_then(hilltop: Callable[..., Peer], fresh_code: str, tmp_path: Path, what: Path,
                  change: Callable[[], None], receiver: Callable[..., Peer] | None = None
                  ) -> tuple[Peer, Peer, Path]:
    """Start sending ``what``, call ``change`` once the bytes flow; (sender, receiver, dest).
    ``receiver``: who receives (hilltop unless given)."""
    dest = tmp_path / "dest"
    dest.mkdir()
    sender = hilltop("send", "--code", fresh_code, str(what))
    got = (receiver or hilltop)("receive", "--accept-file", fresh_code, cwd=dest)
    sender.wait_for_line(r"^Sending \(")
    change()
    return sender, got, dest


@pytest.mark.parametrize("receiver", ["hilltop", "official"])
def test_a_file_that_shrinks_while_sent(peers: Peers, fresh_code: str, tmp_path: Path,
                                        receiver: str) -> None:
    """The sender fails locally mid-file: it tells a hilltop receiver why (an ``error``
    message, then it drops the connection), which fails at once naming that reason, far
    inside its idle time-out; an official 0.24 receiver sees the connection drop and ends
    too."""
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(BIG)
    sender, got, dest = transfer_then(peers.hilltop, fresh_code, tmp_path, big,
                                      lambda: os.truncate(big, 1_000_000),
                                      getattr(peers, receiver))
    sent = sender.finish(60)
    failed_at = time.monotonic()
    received = got.finish(60)
    took = time.monotonic() - failed_at
    assert sent.returncode == 1, sent.describe()
    assert "got shorter" in one_error_line(sent.stderr), sent.describe()
    assert received.returncode != 0, received.describe()
    assert took < 10, f"the receiver ended {took:.1f} s after the sender\n{received.describe()}"
    assert "big.bin" not in visible(dest), received.describe()
    if receiver == "hilltop":
        line = one_error_line(received.stderr)
        assert "the sender failed: 'big.bin' got shorter while it was being sent" in line, line
        assert str(tmp_path) not in line, line  # the sender's folders stay its own
        assert visible(dest) == [], received.describe()


def test_a_folder_entry_that_vanishes_while_sent(hilltop: Callable[..., Peer],
                                                 fresh_code: str, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    with open(folder / "a-big.bin", "wb") as f:  # sent first: entries go in name order
        f.truncate(BIG // 10)  # all of it is sent (and written) before the vanished entry
    (folder / "z-later.txt").write_text("gone before its turn\n")
    sender, receiver, dest = transfer_then(hilltop, fresh_code, tmp_path, folder,
                                           lambda: os.unlink(folder / "z-later.txt"))
    sent, received = sender.finish(120), receiver.finish(120)
    assert sent.returncode == 1, sent.describe()
    line = one_error_line(sent.stderr)
    assert "z-later.txt" in line and "No such file" in line, sent.describe()
    assert received.returncode != 0, received.describe()
    one_error_line(received.stderr)
    assert visible(dest) == [], received.describe()


def test_a_file_overwritten_in_place_while_sent(hilltop: Callable[..., Peer], fresh_code: str,
                                                tmp_path: Path) -> None:
    """Issue 27 item 25: same size, new bytes, same inode. The sender notices within 64 MiB
    (source.WATCH_EVERY), says so in one line; the receiver keeps nothing that looks
    complete. (Official 0.24 delivers the mix and both sides report success.)"""
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(BIG)
    old = big.stat().st_mtime - 86400  # any write now moves the mtime, however coarse
    os.utime(big, (old, old))

    def overwrite() -> None:
        with open(big, "r+b") as f:
            f.write(b"new" * 1000)

    sender, receiver, dest = transfer_then(hilltop, fresh_code, tmp_path, big, overwrite)
    sent, received = sender.finish(120), receiver.finish(120)
    assert sent.returncode == 1, sent.describe()
    assert "changed while it was being sent" in one_error_line(sent.stderr), sent.describe()
    assert received.returncode != 0, received.describe()
    one_error_line(received.stderr)
    assert visible(dest) == [], received.describe()


def deep_folder(root: Path, depth: int) -> None:
    """``root/d/.../d/f``, made through directory descriptors (deeper than PATH_MAX)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)


def remove_deep_folder(root: Path) -> None:
    """Without paths longer than PATH_MAX, and without recursion."""
    while (root / "d").exists():
        if (root / "d" / "d").exists():
            os.rename(root / "d" / "d", root / "next")
        for name in os.listdir(root / "d"):
            os.unlink(root / "d" / name)
        os.rmdir(root / "d")
        if (root / "next").exists():
            os.rename(root / "next", root / "d")


@pytest.mark.parametrize("case", ["10000-deep", "case-twins"])
def test_a_tree_no_receiver_takes_is_refused_before_any_code(
        hilltop: Callable[..., Peer], tmp_path: Path, case: str) -> None:
    """Issue 27 items 24 (was RecursionError, "a bug in hilltop") and 23."""
    folder = tmp_path / "folder"
    if case == "10000-deep":
        deep_folder(folder, 10_000)
        expected = "nested more than 256 folders deep"
    else:
        folder.mkdir()
        (folder / "README").write_text("one\n")
        (folder / "readme").write_text("two\n")
        expected = "readme: clashes with 'README'"
    try:
        result = hilltop("send", str(folder), relay_url="ws://127.0.0.1:9/v1",
                         transit_helper="tcp:127.0.0.1:9").finish(60)
    finally:
        remove_deep_folder(folder)
    assert result.returncode == 1, result.describe()
    assert expected in one_error_line(result.stderr), result.describe()
    assert "Wormhole code is" not in result.stderr
