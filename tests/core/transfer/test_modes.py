"""hilltop.transfer.modes: a sent mode may add one executable bit and otherwise only narrow."""

from __future__ import annotations

import pytest

from hilltop.transfer.modes import received_mode

FILE = 0o100000
FOLDER = 0o040000


@pytest.mark.parametrize(("sent", "umask", "want"), [
    (0o644, 0o022, 0o644),
    (0o755, 0o022, 0o755),
    (0o777, 0o022, 0o755),  # world-writable as sent: not here
    (0o7777, 0o022, 0o755),  # setuid, setgid, sticky: never
    (0o4755, 0o022, 0o755),  # a setuid program arrives as a plain executable
    (0o2755, 0o022, 0o755),
    (0o666, 0o022, 0o644),
    (0o600, 0o022, 0o600),  # a private file stays private
    (0o640, 0o022, 0o640),
    (0o700, 0o022, 0o700),
    (0o000, 0o022, 0o600),  # unreadable as sent: the owner can still read and write it
    (0o011, 0o022, 0o600),  # others may run it, its owner not: not executable
    (0o100, 0o022, 0o700),  # executable for its owner only
    (FILE | 0o4755, 0o022, 0o755),  # the file-type bits of external_attr are ignored
    (FILE | 0o644, 0o022, 0o644),
    (None, 0o022, 0o644),  # no mode sent (a zip made on Windows)
    (0o7777, 0o002, 0o775),  # group-writable only where the umask allows it
    (0o644, 0o002, 0o644),  # the umask allows group write, the sender did not give it
    (0o7777, 0o077, 0o700),
    (0o644, 0o077, 0o600),
    (0o7777, 0o000, 0o777),  # umask 0: world-writable is the receiver's own choice
    (0o4755, 0o177, 0o600),  # the umask may take even the owner's execute bit away
    (0o600, 0o000, 0o600),  # umask 0 does not widen what the sender narrowed
    (0o755, 0o7022, 0o755),  # a umask with high bits set changes nothing more
])
def test_received_file_mode(sent: int | None, umask: int, want: int) -> None:
    assert oct(received_mode(sent, umask=umask, is_dir=False)) == oct(want)


@pytest.mark.parametrize("sent", [None, 0o7777, FOLDER | 0o1777, 0o555, 0o100, 0o000, 0o700])
@pytest.mark.parametrize(("umask", "want"), [(0o022, 0o755), (0o002, 0o775), (0o077, 0o700)])
def test_received_folder_mode_ignores_the_sender(sent: int | None, umask: int, want: int) -> None:
    assert oct(received_mode(sent, umask=umask, is_dir=True)) == oct(want)


@pytest.mark.parametrize("umask", range(0, 0o1000, 0o7))
@pytest.mark.parametrize("sent", [0o7777, 0o4777, 0o2777, 0o1777, 0o777, None])
def test_never_more_than_the_umask_allows(sent: int | None, umask: int) -> None:
    for is_dir in (False, True):
        mode = received_mode(sent, umask=umask, is_dir=is_dir)
        assert mode & ~0o777 == 0 and mode & umask == 0
