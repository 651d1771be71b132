"""Several files (``files-v1``) on disk: the sender's bundle and the receiver's staging."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from hilltop.errors import LocalError, RejectedError, UnsendableError
from hilltop.rendezvous import capabilities
from hilltop.transfer import filesink
from hilltop.transfer.manifest import FilesOffer
from hilltop.transfer.manysink import FilesSink
from hilltop.transfer.manysource import FilesSource, folder_label, open_bundle
from hilltop.transfer.offers import DirectoryOffer
from hilltop.transfer.targets import plan_files

HILLTOP = capabilities.from_app_versions(
    capabilities.advertisement("0.1.0", [], capabilities.FEATURES))


def sources(root: Path) -> list[str]:
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "void").mkdir()
    (root / "one.txt").write_bytes(b"1" * 10)
    (root / "none").write_bytes(b"")
    (root / "d" / "sub" / "x.bin").write_bytes(bytes(range(256)) * 4)
    (root / "d" / "sub" / "x.bin").chmod(0o755)
    (root / "e").mkdir()
    return ["one.txt", "none", "d", "e"]


def read_all(source: FilesSource, step: int) -> bytes:
    out = bytearray()
    buffer = bytearray(step)
    while got := source.readinto(buffer):
        out += buffer[:got]
    return bytes(out)


def test_the_bundle_lists_every_entry_and_reads_them_back_to_back(tmp_path: Path) -> None:
    bundle = open_bundle(sources(tmp_path), cwd=str(tmp_path))
    offer = bundle.manifest()
    assert [e.path for e in offer.entries] == ["one.txt", "none", "d/sub/x.bin", "d/void/",
                                               "e/"]
    assert offer.entries[2].mode == 0o755
    with bundle.source_for(capabilities.FEATURES, HILLTOP) as source:
        assert isinstance(source, FilesSource)
        assert source.size == 10 + 1024
        assert read_all(source, 7) == b"1" * 10 + bytes(range(256)) * 4


def test_a_v1_peer_gets_one_folder_with_the_same_entries(tmp_path: Path) -> None:
    bundle = open_bundle(sources(tmp_path), cwd=str(tmp_path))
    assert bundle.folder_reason(capabilities.FEATURES, capabilities.V1_PEER) == \
        "runs an official or wormhole-william client"
    with bundle.source_for(capabilities.FEATURES, capabilities.V1_PEER) as source:
        assert isinstance(source.offer, DirectoryOffer)
        assert source.offer.dirname == tmp_path.name
        assert source.offer.numfiles == 3 and source.offer.numbytes == 10 + 1024


def test_a_file_that_changed_size_stops_the_send(tmp_path: Path) -> None:
    bundle = open_bundle(sources(tmp_path), cwd=str(tmp_path))
    (tmp_path / "one.txt").write_bytes(b"1" * 11)
    with bundle.files_source() as source, pytest.raises(UnsendableError, match="changed while"):
        read_all(source, 64)


def test_two_arguments_with_one_name_are_refused(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "X.txt").write_text(folder)
    (tmp_path / "b" / "x.txt").write_text("b")
    with pytest.raises(UnsendableError, match="both would arrive as 'x.txt'"):
        open_bundle(["a/X.txt", "b/x.txt"], cwd=str(tmp_path))


def test_the_folder_label_is_the_common_parent_or_a_count() -> None:
    assert folder_label(["/home/u/project", "/home/u/project/docs"], 2) == "project"
    assert folder_label(["/", "/"], 2) == "wormhole-2-items"


def receive(tmp_path: Path, chunks: int = 5) -> tuple[Path, FilesSink, bytes]:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    bundle = open_bundle(sources(src), cwd=str(src))
    with bundle.files_source() as source:
        data = read_all(source, 1 << 16)
    sink = FilesSink(str(dest), bundle.manifest())
    step = max(1, len(data) // chunks)
    for i in range(0, len(data), step):
        sink.write(data[i:i + step])
    return dest, sink, data


def test_the_sink_places_every_item_only_at_the_end(tmp_path: Path) -> None:
    dest, sink, _ = receive(tmp_path)
    assert [p.name for p in dest.iterdir()] == [".wormhole-4-items.hilltop-dir"]
    sink.finish()
    assert sorted(p.name for p in dest.iterdir()) == ["d", "e", "none", "one.txt"]
    assert (dest / "one.txt").read_bytes() == b"1" * 10
    assert (dest / "none").read_bytes() == b""
    assert (dest / "d" / "sub" / "x.bin").read_bytes() == bytes(range(256)) * 4
    assert os.access(dest / "d" / "sub" / "x.bin", os.X_OK)
    assert not os.access(dest / "one.txt", os.X_OK)
    assert (dest / "d" / "void").is_dir() and (dest / "e").is_dir()


def test_an_aborted_receive_leaves_nothing(tmp_path: Path) -> None:
    dest, sink, _ = receive(tmp_path)
    sink.abort()
    assert list(dest.iterdir()) == []


def test_the_items_are_synced_to_disk_before_they_count_as_received(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ack follows ``finish``, and an acknowledged transfer may be deleted at the sender:
    the staging folder is synced once every byte is in, before any item is published."""
    synced: list[tuple[str, list[str]]] = []
    real_sync = filesink.sync_filesystem

    def watching_sync(path: str) -> None:
        synced.append((os.path.basename(path), sorted(os.listdir(tmp_path / "dest"))))
        real_sync(path)

    monkeypatch.setattr(filesink, "sync_filesystem", watching_sync)
    dest, sink, _ = receive(tmp_path)
    sink.finish()
    assert synced == [(".wormhole-4-items.hilltop-dir", [".wormhole-4-items.hilltop-dir"])]
    assert sorted(p.name for p in dest.iterdir()) == ["d", "e", "none", "one.txt"]


def test_items_that_cannot_be_synced_are_not_received(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_sync(_path: str) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(filesink, "sync_filesystem", failing_sync)
    dest, sink, _ = receive(tmp_path)
    with pytest.raises(LocalError, match="writing the received files to disk"):
        sink.finish()
    assert list(dest.iterdir()) == []


def test_a_short_transfer_is_refused_and_removed(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    bundle = open_bundle(sources(src), cwd=str(src))
    sink = FilesSink(str(dest), bundle.manifest())
    sink.write(b"1" * 10)
    with pytest.raises(Exception, match="ended early"):
        sink.finish()
    assert list(dest.iterdir()) == []


def test_a_target_that_appears_meanwhile_is_not_overwritten(tmp_path: Path) -> None:
    dest, sink, _ = receive(tmp_path)
    (dest / "one.txt").write_text("mine")
    with pytest.raises(RejectedError, match="appeared while receiving"):
        sink.finish()
    assert (dest / "one.txt").read_text() == "mine"
    assert not [p for p in dest.iterdir() if p.name.startswith(".")]


def test_plan_files_refuses_existing_items_and_a_missing_folder(tmp_path: Path) -> None:
    offer = open_bundle(sources(tmp_path), cwd=str(tmp_path)).manifest()
    assert isinstance(offer, FilesOffer)
    out = tmp_path / "out"
    out.mkdir()
    assert plan_files(offer, "out", str(tmp_path)) == str(out)
    with pytest.raises(RejectedError, match="refusing to overwrite existing"):
        plan_files(offer, None, str(tmp_path))
    with pytest.raises(RejectedError, match="-o must name an existing folder"):
        plan_files(offer, "missing", str(tmp_path))
