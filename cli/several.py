"""Several files with one code: ``wormhole send a.txt b.txt DIR/`` and its receiving side.

Decisions (README, docs/protocol-extensions.md "Several files"):

* Toward a hilltop peer listing ``files-v1`` the paths go as a manifest and one stream of
  bytes (:mod:`hilltop.transfer.manysource`, :mod:`hilltop.transfer.manysink`); the
  receiver sees the count, total size and names before it says yes, and every first-level
  item appears under its own name only once all of them arrived.
* Toward any other peer the same command sends one folder (a zip), and says so in one line
  before the data moves, so it works with every peer.
* A line per file (``  DIR/sub/x.txt (1.2 kB)``) as each one finishes, above one progress bar
  for the whole transfer; ``--hide-progress`` hides both, and ``--json`` reports a ``file``
  event instead.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from hilltop import api
from hilltop.cli import events, output
from hilltop.cli.progress import TransferProgress, transfer_progress
from hilltop.rendezvous import capabilities
from hilltop.transfer import session
from hilltop.transfer.session import FilesOffer, ManifestEntry
from hilltop.units import readable_size

if TYPE_CHECKING:
    from hilltop.transfer.session import Bundle, TransitOptions

LISTED = 20
"""Names the receiver lists before its question; more are counted, not shown."""


def describe_files(offer: FilesOffer) -> str:
    """``3 items (4 files, 1.2 MB): a.txt, b.txt, DIR/``."""
    tops = offer.tops()
    names = ", ".join(top.name + ("/" if top.is_dir else "") for top in tops[:LISTED])
    more = f" and {len(tops) - LISTED} more" if len(tops) > LISTED else ""
    return (f"{len(tops)} items ({offer.numfiles} files, {readable_size(offer.numbytes)}): "
            f"{names}{more}")


class FileLines:
    """Says each file's line once the byte count passes its end, in manifest order.

    Fed the same counts as the progress bar (on the reactor thread), so no file is named
    before its last byte moved; files of 0 bytes are named as the count passes them.
    """

    def __init__(self, entries: tuple[ManifestEntry, ...], direction: str,
                 shown: TransferProgress, hide: bool) -> None:
        self._files = [e for e in entries if not e.is_dir]
        self._direction = direction
        self._shown = shown
        self._hide = hide
        self._moved = 0
        self._next = 0
        self._end = self._files[0].size if self._files else 0

    def update(self, nbytes: int) -> None:
        self._shown.update(nbytes)
        self._moved += nbytes
        self._say_through(self._moved)

    def finish(self) -> None:
        """Every byte moved (a transfer of only empty files moves none)."""
        self._say_through(None)

    def _say_through(self, moved: int | None) -> None:
        while self._next < len(self._files) and (moved is None or self._end <= moved):
            entry = self._files[self._next]
            self._next += 1
            if self._next < len(self._files):
                self._end += self._files[self._next].size
            if events.json_mode():
                events.emit("file", direction=self._direction, name=entry.path,
                            size=entry.size)
            elif not self._hide:
                self._shown.line(f"  {entry.path} ({readable_size(entry.size)})")


# --- send -----------------------------------------------------------------------------------
async def send_files(reactor: Any, w: api.Wormhole, bundle: Bundle,
                     options: TransitOptions, how: Any, hide_progress: bool) -> int:
    """``wormhole send A B ...`` (``how``: the send command's ``Announcement``)."""
    from hilltop.cli.offerlines import show_resume
    from hilltop.cli.send import announce_code, confirm_key

    for skipped in bundle.skipped:
        output.status(f"left out (unreadable): {skipped}")
    manifest = bundle.manifest()
    events.offer("send", manifest, f"Sending {describe_files(manifest)}")
    await announce_code(w, how)
    versions = await confirm_key(reactor, w, how.verify, transit_follows=options)
    ours = capabilities.from_app_versions(w.app_versions).features
    peer = capabilities.from_app_versions(versions)
    source = bundle.source_for(ours, peer)
    as_files = isinstance(source.offer, FilesOffer)
    if not as_files:
        output.status(f"The receiver {bundle.folder_reason(ours, peer)}: sending the "
                      f"{len(bundle.items)} items as one folder named '{bundle.label}' "
                      "(a zip).")
        events.offer("send", source.offer, None)
    with source, transfer_progress(source.size, hide_progress) as shown:
        lines = FileLines(manifest.entries, "send", shown, hide_progress) if as_files else None
        await session.send(reactor, w, source, options, listener=session.Listener(
            on_connected=lambda desc: shown.connected(f"Sending ({desc})...", desc),
            progress=lines.update if lines is not None else shown.update,
            on_path=shown.path,
            on_resume=lambda offset, why: show_resume(shown, offset, why)))
        if lines is not None:
            lines.finish()
        shown.done("Sent", kind="files" if as_files else "directory")
    events.human("Files sent and confirmed by the receiver. Transfer complete.")
    return 0


# --- receive --------------------------------------------------------------------------------
async def receive_files(incoming: session.Incoming, prepared: session.Prepared, sink: Any,
                        choices: Any) -> int:
    """Receive several files the session allowed (``choices``: the receive command's)."""
    from hilltop.cli.receive import _listener

    offer = prepared.offer
    assert isinstance(offer, FilesOffer) and prepared.where is not None
    with transfer_progress(offer.numbytes, choices.hide_progress) as shown:
        lines = FileLines(offer.entries, "receive", shown, choices.hide_progress)
        await incoming.receive(sink, choices.options, listener=_listener(shown, lines.update))
        lines.finish()
        shown.done("Received", kind="files", path=prepared.where)
    names = ", ".join(os.path.relpath(t) for t in sink.targets[:LISTED])
    events.human(f"Received {len(sink.targets)} items: {names}"
                 + (" ..." if len(sink.targets) > LISTED else ""))
    return 0
