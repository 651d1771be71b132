"""``--json``: every event of real transfers (file, folder, text, failures) matches the schema,
and every exit status of ``hilltop.cli.exitcodes`` comes out of a real run, in JSON mode too."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
import pytest
from nsproc import hilltop_command

if TYPE_CHECKING:
    from conftest import Peers, Result

interop = pytest.mark.interop

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs"
                     / "json-events.schema.json").read_text())


def validated(stdout: str) -> list[dict[str, Any]]:
    """Every stdout line parsed and checked against the schema: nothing else may be there."""
    events = []
    for line in stdout.splitlines():
        event = json.loads(line)
        jsonschema.validate(event, SCHEMA)
        events.append(event)
    assert events, "no events on stdout"
    return events


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["event"] for e in events]


def finished(peer: Any) -> tuple[Result, list[dict[str, Any]]]:
    result = peer.finish()
    return result, validated(result.stdout)


@interop
def test_file_transfer_events(peers: Peers, tmp_path: Path, fresh_code: str) -> None:
    source = tmp_path / "data.bin"
    source.write_bytes(bytes(range(256)) * 4000)
    sender = peers.hilltop("--json", "send", "--code", fresh_code, str(source))
    receiver = peers.hilltop("receive", "--json", "--accept-file", fresh_code)
    (received, r_events), (sent, s_events) = finished(receiver), finished(sender)
    assert received.returncode == 0 and sent.returncode == 0, received.describe()
    for events, direction in ((s_events, "send"), (r_events, "receive")):
        names = kinds(events)
        assert names[-1] == "done" and "error" not in names
        for needed in ("verifier", "peer_connected", "offer", "transit_attempt",
                       "transit_connected", "progress"):
            assert needed in names, (needed, names)
        offer = next(e for e in events if e["event"] == "offer")
        assert offer == {**offer, "direction": direction, "kind": "file", "name": "data.bin",
                         "size": 1_024_000}
        assert any(e["event"] == "transit_attempt" and e["state"] == "won" for e in events)
        progress = [e for e in events if e["event"] == "progress"]
        assert progress[-1]["bytes"] == progress[-1]["total"] == 1_024_000
        assert events[-1]["bytes"] == 1_024_000 and events[-1]["kind"] == "file"
    assert s_events[kinds(s_events).index("code")]["code"] == fresh_code
    assert "code_consumed" in kinds(s_events)
    assert {e["verifier"] for e in s_events + r_events if e["event"] == "verifier"}.__len__() == 1
    assert Path(r_events[-1]["path"]).read_bytes() == source.read_bytes()


@interop
def test_folder_transfer_events_with_an_official_sender(peers: Peers, tmp_path: Path,
                                                        fresh_code: str) -> None:
    folder = tmp_path / "album"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("a" * 1000)
    (folder / "sub" / "b.txt").write_text("b" * 2000)
    sender = peers.official("send", "--code", fresh_code, "--hide-progress", str(folder))
    receiver = peers.hilltop("--json", "receive", "--accept-file", fresh_code)
    (received, events), sent = finished(receiver), sender.finish()
    assert received.returncode == 0 and sent.returncode == 0, received.describe()
    offer = next(e for e in events if e["event"] == "offer")
    assert (offer["kind"], offer["name"], offer["files"], offer["size"]) == (
        "directory", "album", 2, 3000)
    assert events[-1]["event"] == "done" and events[-1]["kind"] == "directory"
    assert (Path(events[-1]["path"]) / "sub" / "b.txt").read_text() == "b" * 2000


@interop
def test_text_events_keep_hostile_text_exact_and_inert(peers: Peers, fresh_code: str) -> None:
    text = "hello \x1b]0;pwned\x07 \u202eevil\nline two"
    sender = peers.official("send", "--code", fresh_code, "--text", text)
    receiver = peers.hilltop("receive", "--json", fresh_code)
    (received, events), sent = finished(receiver), sender.finish()
    assert received.returncode == 0 and sent.returncode == 0, received.describe()
    assert received.stdout.isascii() and "\x1b" not in received.stdout
    [message] = [e["message"] for e in events if e["event"] == "text"]
    assert message == text
    assert kinds(events)[-1] == "done"


@interop
def test_wrong_code_is_status_3_on_both_sides(peers: Peers, fresh_code: str) -> None:
    nameplate = fresh_code.split("-")[0]
    sender = peers.hilltop("--json", "send", "--code", fresh_code, "--text", "x")
    receiver = peers.hilltop("--json", "receive", f"{nameplate}-wrong-words")
    for result, events in (finished(receiver), finished(sender)):
        assert result.returncode == 3, result.describe()
        assert events[-1]["event"] == "error"
        assert (events[-1]["code"], events[-1]["exit_status"]) == ("wrong_code", 3)
        assert "ERROR:" in result.stderr


@interop
def test_declined_offer_is_5_here_and_4_for_the_peer(peers: Peers, tmp_path: Path,
                                                     fresh_code: str) -> None:
    source = tmp_path / "unwanted.bin"
    source.write_bytes(b"x" * 5000)
    sender = peers.hilltop("--json", "send", "--code", fresh_code, str(source))
    receiver = peers.hilltop("--json", "receive", fresh_code, stdin="n\n")
    (received, r_events), (sent, s_events) = finished(receiver), finished(sender)
    assert received.returncode == 5, received.describe()
    assert r_events[-1]["code"] == "declined"
    assert "question" in kinds(r_events)  # a script sees what it is asked
    assert sent.returncode == 4, sent.describe()
    assert (s_events[-1]["code"], s_events[-1]["exit_status"]) == ("peer_rejected", 4)


@interop
def test_official_receiver_declining_is_status_4(peers: Peers, tmp_path: Path,
                                                 fresh_code: str) -> None:
    source = tmp_path / "unwanted.bin"
    source.write_bytes(b"x" * 5000)
    sender = peers.hilltop("send", "--code", fresh_code, str(source))
    receiver = peers.official("receive", fresh_code, stdin="n\n")
    sent = sender.finish()
    receiver.finish()
    assert sent.returncode == 4, sent.describe()


def test_usage_errors_are_status_2_with_an_error_event(peers: Peers) -> None:
    dead = "ws://127.0.0.1:9/v1"
    for args in (["--json", "receive", "--allocate", "1-foo-bar"],
                 ["send", "--json", "--code-length", "0", "--text", "x"],
                 ["--json", "receive", "not-a-code"]):
        result = peers.hilltop(*args, relay_url=dead, transit_helper="tcp:127.0.0.1:9").finish()
        assert result.returncode == 2, result.describe()
        [event] = validated(result.stdout)
        assert event["event"] == "error" and event["exit_status"] == 2
        assert event["code"] in ("usage", "bad_code")


def test_unreachable_server_is_status_1(peers: Peers) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"ws://127.0.0.1:{s.getsockname()[1]}/v1"
    result = peers.hilltop("--json", "send", "--text", "x", relay_url=dead,
                           transit_helper="tcp:127.0.0.1:9").finish()
    assert result.returncode == 1, result.describe()
    events = validated(result.stdout)
    assert (events[-1]["event"], events[-1]["code"]) == ("error", "server_unreachable")


def test_interrupted_is_status_130_with_an_error_event(peers: Peers, fresh_code: str) -> None:
    proc = subprocess.Popen(
        [*hilltop_command(), "--relay-url", peers.servers.relay_url, "--json", "receive",
         fresh_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(3.0)  # waiting for the sender
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    events = validated(out.decode())
    assert (events[-1]["code"], events[-1]["exit_status"]) == ("interrupted", 130)


def test_a_stream_from_stdin_reports_events_without_a_total(peers: Peers, tmp_path: Path,
                                                            fresh_code: str) -> None:
    data = bytes(range(256)) * 2000
    sender = peers.hilltop("--json", "send", "--code", fresh_code, "-", stdin=data)
    receiver = peers.hilltop("--json", "receive", "--accept-file", "-o", "piped.bin",
                             fresh_code)
    (received, r_events), (sent, s_events) = finished(receiver), finished(sender)
    assert received.returncode == 0 and sent.returncode == 0, received.describe()
    for events in (s_events, r_events):
        offer = next(e for e in events if e["event"] == "offer")
        assert (offer["kind"], offer["name"]) == ("stream", "stdin") and "size" not in offer
        assert events[-1]["event"] == "done" and events[-1]["kind"] == "stream"
        assert events[-1]["bytes"] == len(data)
        assert all(e["total"] is None for e in events if e["event"] == "progress")
    assert Path(r_events[-1]["path"]).read_bytes() == data


def test_json_and_data_on_stdout_exclude_each_other(peers: Peers) -> None:
    result = peers.hilltop("--json", "receive", "-o", "-", "7-guitarist-revenge",
                           relay_url="ws://127.0.0.1:9/v1", transit_helper="tcp:127.0.0.1:9"
                           ).finish()
    assert result.returncode == 2, result.describe()
    [event] = validated(result.stdout)
    assert event["code"] == "usage" and "-o -" in event["message"]
