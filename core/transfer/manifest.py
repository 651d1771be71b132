"""The ``hilltop-files`` offer (feature ``files-v1``): several files and folders, one code.

Between two hilltop peers that both list ``files-v1``, ``wormhole send a.txt b.txt DIR/``
offers a manifest instead of a zip:

    {"offer": {"hilltop-files": {"entries": [
        {"path": "a.txt", "size": 12, "mode": 420},
        {"path": "DIR/notes/todo.txt", "size": 80, "mode": 493},
        {"path": "DIR/empty/", "size": 0}]}}}

and then sends the files' bytes back to back, in entry order, over the one transit
connection: ``size`` says where each ends, so no header, padding or marker crosses.

Decisions:

* Entry names follow the zip entry rules (:mod:`hilltop.transfer.entrynames`), checked here
  when the offer is parsed, so an unsafe manifest is refused before anything is accepted;
  as in a zip, only *empty* folders have an entry (``"DIR/empty/"``), others are implied by
  their files. Two names in one folder that one disk would merge (case, Unicode
  normalisation: ``README`` and ``readme``, ``Dir/a`` and ``dir/b``), a name that is both a
  file and a folder, and a duplicate are refused too.
* ``mode`` (optional) is a wish, as a zip's is: :func:`hilltop.transfer.modes.received_mode`.
* Why not a zip: the receiver then knows every name, size and count before it says yes (a
  zip's names come only as its bytes do), and there is nothing to parse on the data path.
* At most :data:`MAX_MANIFEST_BYTES` of JSON (one mailbox message, hex-encoded, stays well
  under 8 MiB, the frames every hilltop client accepts); a sender with more entries sends one
  folder.

Pure: dataclasses and JSON, no filesystem.
"""

from __future__ import annotations

import json
from typing import Any, Final

from hilltop._values import value
from hilltop.errors import ProtocolError, UnsafeOfferError
from hilltop.transfer.entrynames import Claims, safe_parts

FILES_KIND: Final = "hilltop-files"
MAX_MANIFEST_BYTES: Final = 7 * 512 * 1024
"""JSON bytes a manifest may take (3.5 MiB, about 60,000 entries): sealed and hex-encoded it
is under 8 MiB, the largest mailbox frame hilltop clients read before issue 27."""
MAX_ENTRIES: Final = 100_000
"""Entries a received manifest may list (a cheap bound before the names are checked)."""
MAX_MODE: Final = 0o7777


@value
class ManifestEntry:
    """One file (``path`` without a trailing "/") or one empty folder (with one, size 0).

    ``path`` is relative and "/"-separated; ``mode`` the sender's permission bits, or None.
    """

    path: str
    size: int = 0
    mode: int | None = None

    @property
    def is_dir(self) -> bool:
        return self.path.endswith("/")

    @property
    def top(self) -> str:
        """The first component: the item the receiver places in its folder."""
        return self.path.split("/", 1)[0]

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"path": self.path, "size": self.size}
        if self.mode is not None:
            body["mode"] = self.mode
        return body


@value
class TopItem:
    """A first-level name of the manifest, and whether it is a folder (implied or not)."""

    name: str
    is_dir: bool


@value
class FilesOffer:
    """``{"offer": {"hilltop-files": {"entries": [...]}}}``: see the module docstring.

    Build one with :func:`checked_offer` (or parse one with :func:`files_from_body`): both
    apply every rule, so an instance always holds a safe, clash-free manifest.
    """

    entries: tuple[ManifestEntry, ...]

    @property
    def numbytes(self) -> int:
        """Bytes on the wire: the files' sizes added up."""
        return sum(e.size for e in self.entries)

    @property
    def numfiles(self) -> int:
        return sum(1 for e in self.entries if not e.is_dir)

    @property
    def files(self) -> tuple[ManifestEntry, ...]:
        return tuple(e for e in self.entries if not e.is_dir)

    def tops(self) -> tuple[TopItem, ...]:
        """The first-level items in manifest order (a folder once, however many entries)."""
        found: dict[str, bool] = {}
        for entry in self.entries:
            is_dir = entry.is_dir or "/" in entry.path
            found[entry.top] = found.get(entry.top, False) or is_dir
        return tuple(TopItem(name, is_dir) for name, is_dir in found.items())

    def to_wire(self) -> bytes:
        return json.dumps({"offer": {FILES_KIND: {
            "entries": [e.to_json() for e in self.entries]}}}).encode("utf-8")


def _refuse(name: str, why: str) -> UnsafeOfferError:
    """An entry whose name we will not create (exit status 5, as an unsafe file name)."""
    return UnsafeOfferError(f"refusing the offered files: entry {_shown(name)} {why}")


def _malformed(name: str, why: str) -> ProtocolError:
    """An entry that breaks the manifest's shape (a bad size or mode)."""
    return ProtocolError(f"refusing the offered files: entry {_shown(name)} {why}")


def _shown(name: str) -> str:
    return ascii(name if len(name) <= 80 else name[:77] + "...")


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _entry_from_json(item: object) -> ManifestEntry:
    if not isinstance(item, dict):
        raise ProtocolError("peer sent a files offer with an entry that is not an object")
    path, size, mode = item.get("path"), item.get("size", 0), item.get("mode")
    if not isinstance(path, str):
        raise ProtocolError(f"peer sent a files offer with a bad 'path': {path!r}")
    if not _is_count(size):
        raise _malformed(path, f"has a bad size {size!r}")
    if mode is not None and not (_is_count(mode) and mode <= MAX_MODE):
        raise _malformed(path, f"has a bad mode {mode!r}")
    return ManifestEntry(path, size, mode)


def checked_offer(entries: tuple[ManifestEntry, ...]) -> FilesOffer:
    """A :class:`FilesOffer` for ``entries`` once every rule holds, else UnsafeOfferError
    (a name we will not create) or ProtocolError (a malformed manifest).

    Each path is normalised (``a//./b`` is ``a/b``); a folder entry must be empty-handed
    (size 0); no two names in one folder may clash, and no name may be both a file and a
    folder (explicit, or implied by a longer path): :class:`Claims`.
    """
    if not entries:
        raise ProtocolError("peer sent a files offer with no entries")
    if len(entries) > MAX_ENTRIES:
        raise ProtocolError(f"peer sent a files offer of more than {MAX_ENTRIES} entries")
    cleaned: list[ManifestEntry] = []
    claims = Claims()
    for entry in entries:
        parts = safe_parts(entry.path, _refuse)
        if not parts:
            raise _refuse(entry.path, "has an empty name")
        path = "/".join(parts)
        if entry.is_dir and entry.size:
            raise _malformed(entry.path, "is a folder with a size")
        why = claims.claim(path, entry.is_dir)
        if why is not None:
            raise _refuse(entry.path, why)
        cleaned.append(ManifestEntry(path + "/" if entry.is_dir else path, entry.size,
                                     entry.mode))
    return FilesOffer(tuple(cleaned))


def files_from_body(body: object) -> FilesOffer:
    """The offer inside ``{"hilltop-files": body}``; unknown keys are ignored (later
    versions may add optional ones)."""
    if not isinstance(body, dict):
        raise ProtocolError("peer sent a files offer that is not an object")
    items = body.get("entries")
    if not isinstance(items, list):
        raise ProtocolError("peer sent a files offer without a list of entries")
    if len(items) > MAX_ENTRIES:
        raise ProtocolError(f"peer sent a files offer of more than {MAX_ENTRIES} entries")
    return checked_offer(tuple(_entry_from_json(item) for item in items))
