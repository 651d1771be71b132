"""How a transfer's offer and its resumption are put to the user, on either side."""

from __future__ import annotations

from hilltop.cli import output
from hilltop.cli.progress import TransferProgress
from hilltop.transfer import session
from hilltop.units import readable_size


def describe_offer(offer: session.FileOffer | session.DirectoryOffer | session.FilesOffer) -> str:
    """The offer in a line, sizes first as official 0.24 words it ("1.2 MB file named 'x'")."""
    if isinstance(offer, session.FilesOffer):
        from hilltop.cli.several import describe_files

        return describe_files(offer)
    if isinstance(offer, session.FileOffer):
        return f"{readable_size(offer.filesize)} file named '{offer.filename}'"
    return (f"directory named '{offer.dirname}' ({offer.numfiles} files, "
            f"{readable_size(offer.numbytes)}, {readable_size(offer.zipsize)} on the wire)")


def show_resume(shown: TransferProgress, offset: int, why: str) -> None:
    """Say where the data starts when the receiver asked to resume (both sides)."""
    if offset:
        shown.skip(offset)
        output.status(f"Resuming at {readable_size(offset)} of {readable_size(shown.total or 0)}")
    else:
        output.status(f"Starting from zero: {why}")


def offer_kind(offer: session.FileOffer | session.DirectoryOffer | session.FilesOffer) -> str:
    if isinstance(offer, session.FilesOffer):
        return "files"
    return "file" if isinstance(offer, session.FileOffer) else "directory"
