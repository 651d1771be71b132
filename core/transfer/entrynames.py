"""The rules a received relative path must pass: one place for zip entries and manifests.

A folder's zip (official, wormhole-william, hilltop) and a ``files-v1`` manifest both name
their entries with ``/``-separated paths chosen by the peer, which is hostile input. Both are
held to the same rules, so a name refused in one is refused in the other: no absolute path,
drive letter, backslash or ``..``; no control characters or lone surrogates (JSON can carry
``"\\ud800"``, no file name can); a component of at most
:data:`MAX_NAME_BYTES` and a path of at most :data:`MAX_PATH_BYTES` and
:data:`MAX_PATH_DEPTH` levels.

The case rule, one for every path of a transfer (zip, manifest, and the sender's own walk):
no two names in one folder may share a :func:`clash_key`, whether they are files or
folders: ``README`` beside ``readme`` is refused, and so is ``Dir/a`` beside ``dir/b``.
Why refuse on Linux, where both fit: the receiver may be a Mac or Windows disk (or a
case-folding ext4 folder), where the second name lands on the first; official 0.24's
receiver then overwrites one file silently (``zipfile.extract``, code). A tree arrives the
same on every disk or not at all, and a hilltop sender says so before the code is shown.

Pure: strings in, parts or the caller's error out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Final

MAX_NAME_BYTES: Final = 255
"""NAME_MAX on every common filesystem; longer names would fail later with a cryptic OSError."""
MAX_PATH_BYTES: Final = 4000
"""Refuse entry paths near PATH_MAX (4096 on Linux) instead of failing halfway through."""
MAX_PATH_DEPTH: Final = 256
"""Refuse entry paths nested deeper: os.makedirs and shutil.rmtree (the cleanup) recurse once
per level, and Linux allows 2,000 levels in PATH_MAX (RecursionError, and a folder left)."""

_DRIVE = re.compile(r"^[A-Za-z]:")

Refuse = Callable[[str, str], Exception]
"""``refuse(name, why)``: the caller's error for an entry (``why`` reads "contains '..'")."""


def safe_parts(name: str, refuse: Refuse) -> tuple[str, ...]:
    """Split an entry name into path components, refusing anything that could escape.

    Empty and ``.`` components are dropped (``a//./b`` is ``a/b``); an empty result is the
    caller's to judge (a zip's ``./`` root entry is harmless, a manifest's is not).
    """
    if "\\" in name:
        raise refuse(name, "contains a backslash")
    if name.startswith("/"):
        raise refuse(name, "is an absolute path")
    if _DRIVE.match(name):
        raise refuse(name, "starts with a drive letter")
    parts = tuple(part for part in name.split("/") if part not in ("", "."))
    if ".." in parts:
        raise refuse(name, "contains '..'")
    for part in parts:
        # printable ASCII (nearly every name) has no control characters: skip the slow scan
        if not (part.isascii() and part.isprintable()) and any(
                unicodedata.category(ch) == "Cc" for ch in part):
            raise refuse(name, "contains control characters")
        try:
            size = len(part.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate: valid in JSON, never in UTF-8
            raise refuse(name, "is not valid Unicode (a lone surrogate)") from None
        if size > MAX_NAME_BYTES:
            raise refuse(name, f"has a component longer than {MAX_NAME_BYTES} bytes")
    if len("/".join(parts).encode("utf-8")) > MAX_PATH_BYTES:
        raise refuse(name, "is too long a path")
    if len(parts) > MAX_PATH_DEPTH:
        raise refuse(name, f"is nested more than {MAX_PATH_DEPTH} folders deep")
    return parts


class Claims:
    """The paths of one transfer so far, each new one held to the case rule (module
    docstring), and to no duplicate and no name that is both a file and a folder.

    A tree of names: each node is keyed by a hash chained from its parent's and its own
    :func:`clash_key`, and holds the hash of its exact path and its exact name. Hashes, not
    prefix strings: a path 256 folders deep has 256 prefixes of up to 4,000 bytes each
    (500 KB a path as strings). A collision only refuses.
    """

    def __init__(self) -> None:
        self._nodes: dict[int, tuple[int, str, bool, bool]] = {}
        """key hash -> (exact hash, exact name, is a folder, was named itself)"""

    def claim(self, path: str, is_dir: bool) -> str | None:
        """Record ``path`` (cleaned, "/"-separated) and return None, or return why it is
        refused (``why`` reads "clashes with 'Dir' ...") and record nothing."""
        parts = path.split("/")
        last = len(parts) - 1
        key = exact = 0
        found: list[tuple[int, int, str, bool]] = []
        for depth, part in enumerate(parts):
            key = hash((key, clash_key(part)))
            exact = hash((exact, part))
            as_folder = depth < last or is_dir
            earlier = self._nodes.get(key)
            if earlier is not None:
                earlier_exact, earlier_name, earlier_folder, named = earlier
                if earlier_folder != as_folder:
                    return "is both a file and a folder"
                if earlier_exact != exact:
                    return (f"clashes with {ascii(earlier_name)} (one name on case-insensitive "
                            "or Unicode-normalising disks)")
                if depth == last and (named or not is_dir):
                    return "appears twice"
            found.append((key, exact, part, as_folder))
        for depth, (key, exact, part, as_folder) in enumerate(found):
            named = depth == last or self._nodes.get(key, (0, "", True, False))[3]
            self._nodes[key] = (exact, part, as_folder, named)
        return None


def clash_key(path: str) -> str:
    """The key under which two paths land on one name on a case-insensitive or
    Unicode-normalising disk (macOS, Windows): NFC, then case-folded. ("/" neither composes
    nor folds, so doing it on the joined path equals doing it part by part.)"""
    key = unicodedata.normalize("NFC", path).casefold()
    return path if key == path else key  # one string, not two, for the usual lower-case name
