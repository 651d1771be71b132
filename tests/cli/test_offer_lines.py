"""The offer as the sender's and receiver's first status line shows it: sizes readable."""

from __future__ import annotations

from hilltop.cli.offerlines import describe_offer
from hilltop.transfer.offers import DirectoryOffer, FileOffer


def test_a_file_offer_reads_like_official() -> None:
    assert describe_offer(FileOffer("report.pdf", 1_234_567)) == (
        "1.2 MB file named 'report.pdf'")


def test_a_directory_offer_gives_both_sizes() -> None:
    offer = DirectoryOffer("photos", zipsize=30_000_352, numbytes=29_999_000, numfiles=12)
    assert describe_offer(offer) == (
        "directory named 'photos' (12 files, 30.0 MB, 30.0 MB on the wire)")
