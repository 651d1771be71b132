"""The rules a received relative path must pass: one place for zip entries and manifests.

A folder's zip (official, wormhole-william, hilltop) and a ``files-v1`` manifest both name
their entries with ``/``-separated paths chosen by the peer, which is hostile input. Both are
held to the same rules, so a name refused in one is refused in the other: no absolute path,
drive letter, backslash or ``..``; no control characters or lone surrogates (JSON can carry
``"\\ud800"``, no file name can); a component of at most
:data:`MAX_NAME_BYTES` and a path of at most :data:`MAX_PATH_BYTES` and
:data:`MAX_PATH_DEPTH` levels. Two names that one case-insensitive or Unicode-normalising
disk would merge share a :func:`clash_key`.

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


def clash_key(path: str) -> str:
    """The key under which two paths land on one name on a case-insensitive or
    Unicode-normalising disk (macOS, Windows): NFC, then case-folded. ("/" neither composes
    nor folds, so doing it on the joined path equals doing it part by part.)"""
    key = unicodedata.normalize("NFC", path).casefold()
    return path if key == path else key  # one string, not two, for the usual lower-case name
