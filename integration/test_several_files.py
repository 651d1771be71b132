"""Several files with one code (issue 18, part 1): ``wormhole send A B C DIR/``.

hilltop to hilltop (``files-v1``): three files and a folder arrive intact under their own
names, with one line per file and the list shown before the question; the same command
toward official 0.24 and wormhole-william arrives as one folder named after the arguments'
common parent. Refusals (an existing target, two arguments with one name) happen before any
byte, and an interrupted transfer leaves nothing that looks complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
import pytest

if TYPE_CHECKING:
    from conftest import Peers, Result


SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs"
                     / "json-events.schema.json").read_text())


def ok(result: Result) -> Result:
    assert result.returncode == 0, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    return result


def tree_of(root: Path) -> dict[str, str | None]:
    """relative path -> sha256 of a file, None for a folder."""
    return {p.relative_to(root).as_posix(): None if p.is_dir()
            else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))}


def make_sources(root: Path) -> list[str]:
    """Three files and a folder (nested, with an empty folder and an executable) in
    ``root/project``; returns the four arguments, relative to ``root``."""
    project = root / "project"
    (project / "docs" / "deep").mkdir(parents=True)
    (project / "docs" / "empty").mkdir()
    (project / "a.txt").write_text("alpha\n")
    (project / "b.bin").write_bytes(os.urandom(3_000_000))
    (project / "zero").write_bytes(b"")
    (project / "docs" / "readme.md").write_text("# readme\n")
    (project / "docs" / "deep" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (project / "docs" / "deep" / "run.sh").chmod(0o755)
    return ["project/a.txt", "project/b.bin", "project/zero", "project/docs"]


def expected_tree(root: Path) -> dict[str, str | None]:
    project = root / "project"
    out = {}
    for name in ("a.txt", "b.bin", "zero", "docs"):
        item = project / name
        out[name] = None if item.is_dir() else tree_of(project)[name]
        if item.is_dir():
            out.update({f"{name}/{k}": v for k, v in tree_of(item).items()})
    return out


def test_three_files_and_a_folder_between_hilltops(peers: Peers, tmp_path: Path,
                                                   fresh_code: str) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    args = make_sources(src)
    sender = peers.hilltop("send", "--code", fresh_code, *args, cwd=src)
    receiver = peers.hilltop("receive", fresh_code, cwd=dest, stdin="y\n")
    r = ok(receiver.finish(120))
    s = ok(sender.finish(60))
    assert tree_of(dest) == expected_tree(src)
    assert os.access(dest / "docs" / "deep" / "run.sh", os.X_OK)
    # the list before the question: count, size, names
    assert "Receiving 4 items (5 files, 3.0 MB): a.txt, b.bin, zero, docs/" in r.stderr
    assert "ok? (y/N) [saves 3.0 MB as 4 items in .]" in r.stderr
    for line in ("  a.txt (6 bytes)", "  b.bin (3.0 MB)", "  zero (0 bytes)",
                 "  docs/readme.md (9 bytes)", "  docs/deep/run.sh (18 bytes)"):
        assert line in r.stderr, r.describe()
        assert line in s.stderr, s.describe()
    assert "Received 4 items: a.txt, b.bin, zero, docs" in r.stderr
    assert "one folder" not in s.stderr
    assert not [p for p in dest.iterdir() if p.name.startswith(".")]  # no staging left


def validated(stdout: str) -> list[dict[str, Any]]:
    """Every stdout line parsed and checked against docs/json-events.schema.json."""
    events = [json.loads(line) for line in stdout.splitlines()]
    for event in events:
        jsonschema.validate(event, SCHEMA)
    assert events, "no events on stdout"
    return events


def test_hide_progress_and_json_hide_the_file_lines(peers: Peers, tmp_path: Path,
                                                    fresh_code: str) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    args = make_sources(src)
    sender = peers.hilltop("send", "--hide-progress", "--code", fresh_code, *args, cwd=src)
    receiver = peers.hilltop("receive", "--json", "--accept-file", fresh_code, cwd=dest)
    r = ok(receiver.finish(120))
    s = ok(sender.finish(60))
    assert "a.txt (" not in s.stderr and "a.txt (" not in r.stderr
    events = validated(r.stdout)
    files = [(e["name"], e["size"]) for e in events if e["event"] == "file"]
    assert files == [("a.txt", 6), ("b.bin", 3_000_000), ("zero", 0),
                     ("docs/readme.md", 9), ("docs/deep/run.sh", 18)]
    offer = next(e for e in events if e["event"] == "offer")
    assert offer["kind"] == "files" and offer["items"] == ["a.txt", "b.bin", "zero", "docs"]
    assert events[-1]["event"] == "done" and events[-1]["kind"] == "files"
    assert tree_of(dest) == expected_tree(src)


def test_json_events_of_a_sender_toward_an_official_receiver(peers: Peers, tmp_path: Path
                                                              ) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    sender = peers.hilltop("send", "--json", *make_sources(src), cwd=src)
    code = sender.wait_for_line(r'"event": "code".*"code": "([^"]+)"').group(1)
    ok(peers.official("receive", "--accept-file", code, cwd=dest).finish(120))
    events = validated(ok(sender.finish(60)).stdout)
    offers = [e for e in events if e["event"] == "offer"]
    assert [o["kind"] for o in offers] == ["files", "directory"]  # then the folder it became
    assert offers[1]["name"] == "project" and offers[1]["files"] == 5
    assert not [e for e in events if e["event"] == "file"]
    assert events[-1]["event"] == "done" and events[-1]["kind"] == "directory"
    assert "as one folder named 'project'" in sender.output("stderr")


@pytest.mark.parametrize("client", ["official", "william"])
def test_toward_a_v1_receiver_they_arrive_as_one_folder(peers: Peers, tmp_path: Path,
                                                        client: str) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    args = make_sources(src)
    sender = peers.hilltop("send", *args, cwd=src)
    code = sender.wait_for_code()
    receiver = (peers.official("receive", "--accept-file", code, cwd=dest)
                if client == "official"
                else peers.william("receive", "--hide-progress", code, cwd=dest, stdin="y\n"))
    ok(receiver.finish(120))
    s = ok(sender.finish(60))
    assert ("The receiver runs an official or wormhole-william client: sending the 4 items "
            "as one folder named 'project' (a zip).") in s.stderr
    assert [p.name for p in dest.iterdir()] == ["project"]
    got = tree_of(dest / "project")
    want = expected_tree(src)
    if client == "william":  # 1.0.6 writes every zip entry as a file, an empty folder too
        want["docs/empty"] = hashlib.sha256(b"").hexdigest()
    assert got == want


def test_an_existing_target_is_refused_before_any_byte(peers: Peers, tmp_path: Path,
                                                       fresh_code: str) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    args = make_sources(src)
    (dest / "b.bin").write_text("mine\n")
    sender = peers.hilltop("send", "--code", fresh_code, *args, cwd=src)
    receiver = peers.hilltop("receive", "--accept-file", fresh_code, cwd=dest)
    r = receiver.finish(60)
    assert r.returncode == 5, r.describe()
    assert "refusing to overwrite existing" in r.stderr and "b.bin" in r.stderr
    s = sender.finish(60)
    assert s.returncode == 4, s.describe()
    assert sorted(p.name for p in dest.iterdir()) == ["b.bin"]
    assert (dest / "b.bin").read_text() == "mine\n"


def test_two_arguments_with_one_name_are_refused(peers: Peers, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x.txt").write_text("1")
    (tmp_path / "b" / "x.txt").write_text("2")
    r = peers.hilltop("send", "a/x.txt", "b/x.txt", cwd=tmp_path).finish(60)
    assert r.returncode == 1, r.describe()
    assert "cannot send 'a/x.txt' and 'b/x.txt' together: both would arrive as 'x.txt'" \
        in r.stderr
    assert "Wormhole code is" not in r.stderr and "Traceback" not in r.stderr


def test_a_stream_goes_alone(peers: Peers, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("1")
    r = peers.hilltop("send", "a.txt", "-", cwd=tmp_path).finish(60)
    assert r.returncode == 2, r.describe()
    assert "sent on its own" in r.stderr


def test_an_interrupted_transfer_leaves_nothing_complete(peers: Peers, tmp_path: Path,
                                                         fresh_code: str) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    (src / "first.txt").write_text("small and first\n")
    with open(src / "huge.bin", "wb") as f:
        f.truncate(5_000_000_000)  # sparse: cheap to send, seconds to receive
    # over Dilation (durable-v1) the receiver waits --reconnect-grace for a killed sender
    sender = peers.hilltop("send", "--transports", "relay", "--reconnect-grace", "5",
                           "--code", fresh_code, "first.txt", "huge.bin", cwd=src)
    receiver = peers.hilltop("receive", "--accept-file", "--transports", "relay",
                             "--reconnect-grace", "5", "--hide-progress", fresh_code, cwd=dest)
    receiver.wait_for_line("Receiving \\(->", 120)
    deadline = time.monotonic() + 60
    while not any(dest.rglob("first.txt")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert any(dest.rglob("first.txt")), "the first file never reached the staging folder"
    time.sleep(0.5)
    sender.kill()
    r = receiver.finish(120)
    assert r.returncode == 1, r.describe()
    assert "Traceback" not in r.stderr
    assert list(dest.iterdir()) == []  # not first.txt, and no hidden staging folder either


LIBRARY_SENDER = """
import asyncio, os, sys
from hilltop import install_asyncio_reactor

async def main(code, paths):
    from hilltop import TransitOptions, Wormhole
    w = Wormhole(relay_url=os.environ["WORMHOLE_RELAY_URL"])
    try:
        w.set_code(code)
        helper = os.environ["WORMHOLE_TRANSIT_HELPER"]
        await w.send_files(paths, transit=TransitOptions(transit_helpers=[helper]))
        print("sent", flush=True)
    finally:
        await w.close()

loop = asyncio.new_event_loop()
install_asyncio_reactor(loop)
loop.run_until_complete(main(sys.argv[1], sys.argv[2:]))
"""


def test_the_library_sends_several_files(peers: Peers, tmp_path: Path,
                                         fresh_code: str) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    args = make_sources(src)
    receiver = peers.hilltop("receive", "--accept-file", fresh_code, cwd=dest)
    env = dict(os.environ, WORMHOLE_RELAY_URL=peers.servers.relay_url,
               WORMHOLE_TRANSIT_HELPER=peers.servers.transit_helper)
    lib = subprocess.run([sys.executable, "-c", LIBRARY_SENDER, fresh_code, *args], cwd=src,
                         env=env, capture_output=True, text=True, timeout=120)
    assert lib.returncode == 0, lib.stderr
    assert lib.stdout.strip() == "sent"
    ok(receiver.finish(60))
    assert tree_of(dest) == expected_tree(src)


LIBRARY_RECEIVER = """
import asyncio, os, sys
from hilltop import install_asyncio_reactor

async def main(code, directory):
    from hilltop import TransitOptions, Wormhole
    w = Wormhole(relay_url=os.environ["WORMHOLE_RELAY_URL"])
    try:
        w.set_code(code)
        helper = os.environ["WORMHOLE_TRANSIT_HELPER"]
        seen = []
        path = await w.receive_file(directory, accept=lambda offer: seen.append(offer) or True,
                                    transit=TransitOptions(transit_helpers=[helper]))
        print(type(seen[0]).__name__, len(seen[0].entries), os.path.basename(path), flush=True)
    finally:
        await w.close()

loop = asyncio.new_event_loop()
install_asyncio_reactor(loop)
loop.run_until_complete(main(sys.argv[1], sys.argv[2]))
"""


def test_the_library_receives_several_files(peers: Peers, tmp_path: Path,
                                            fresh_code: str) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    args = make_sources(src)
    sender = peers.hilltop("send", "--code", fresh_code, *args, cwd=src)
    env = dict(os.environ, WORMHOLE_RELAY_URL=peers.servers.relay_url,
               WORMHOLE_TRANSIT_HELPER=peers.servers.transit_helper)
    lib = subprocess.run([sys.executable, "-c", LIBRARY_RECEIVER, fresh_code, str(dest)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert lib.returncode == 0, lib.stderr
    assert lib.stdout.split() == ["FilesOffer", "6", "dest"]
    ok(sender.finish(60))
    assert tree_of(dest) == expected_tree(src)


HOSTILE_MANIFEST = """
import asyncio, json, os, sys
from hilltop import install_asyncio_reactor

async def main(code, path):
    from hilltop import Wormhole
    w = Wormhole(relay_url=os.environ["WORMHOLE_RELAY_URL"])
    try:
        w.set_code(code)
        await w.get_peer_versions()
        w.send_message(b'{"transit": {"abilities-v1": [], "hints-v1": []}}')
        entries = [{"path": "innocent.txt", "size": 4}, {"path": json.loads(path), "size": 7}]
        w.send_message(json.dumps({"offer": {"hilltop-files": {"entries": entries}}}).encode())
        print(json.loads(await w.get_message())["error"], flush=True)
    finally:
        await w.close()

loop = asyncio.new_event_loop()
install_asyncio_reactor(loop)
loop.run_until_complete(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.parametrize(("path", "why"), [("../escaped.txt", "contains '..'"),
                                           ("/tmp/absolute.txt", "is an absolute path"),
                                           ("INNOCENT.txt", "clashes with"),
                                           ("a/\ud800.txt", "is not valid Unicode")],
                         ids=["dotdot", "absolute", "case-clash", "lone-surrogate"])
def test_a_hostile_manifest_is_refused_before_anything_is_written(
        peers: Peers, tmp_path: Path, fresh_code: str, path: str, why: str) -> None:
    dest = tmp_path / "dest" / "inner"
    dest.mkdir(parents=True)
    receiver = peers.hilltop("receive", "--accept-file", fresh_code, cwd=dest)
    env = dict(os.environ, WORMHOLE_RELAY_URL=peers.servers.relay_url)
    evil = subprocess.run([sys.executable, "-c", HOSTILE_MANIFEST, fresh_code, json.dumps(path)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert evil.returncode == 0, evil.stderr
    assert why in evil.stdout  # the sender is told why
    r = receiver.finish(60)
    assert r.returncode == 5, r.describe()  # refused as unsafe, like an unsafe file name
    assert f"refusing the offered files: entry {path!r} {why}" in r.stderr
    assert "Traceback" not in r.stderr and "bug in hilltop" not in r.stderr, r.describe()
    assert list((tmp_path / "dest").rglob("*")) == [dest]  # nothing inside or beside it


def test_output_names_the_folder_they_go_into(peers: Peers, tmp_path: Path,
                                              fresh_code: str) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    (dest / "inbox").mkdir(parents=True)
    args = make_sources(src)
    sender = peers.hilltop("send", "--code", fresh_code, *args, cwd=src)
    receiver = peers.hilltop("receive", "--accept-file", "-o", "inbox", fresh_code, cwd=dest)
    ok(receiver.finish(120))
    ok(sender.finish(60))
    assert tree_of(dest / "inbox") == expected_tree(src)
    assert [p.name for p in dest.iterdir()] == ["inbox"]


def test_output_that_is_not_a_folder_is_refused(peers: Peers, tmp_path: Path,
                                                fresh_code: str) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    args = make_sources(src)
    sender = peers.hilltop("send", "--code", fresh_code, *args, cwd=src)
    receiver = peers.hilltop("receive", "--accept-file", "-o", "new", fresh_code, cwd=dest)
    r = receiver.finish(60)
    assert r.returncode == 5, r.describe()
    assert "with several files, -o must name an existing folder" in r.stderr
    assert sender.finish(60).returncode == 4
    assert list(dest.iterdir()) == []
