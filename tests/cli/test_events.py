"""The events layer: JSON lines that match the schema, human lines otherwise, throttled progress."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from hilltop.cli import events, exitcodes
from hilltop.transfer import offers
from hilltop.transit.options import AttemptNote

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "json-events.schema.json").read_text())


@pytest.fixture
def json_mode() -> Iterator[None]:
    events.enable_json()
    try:
        yield
    finally:
        events.enable_json(False)


def lines(text: str) -> list[dict]:
    got = [json.loads(line) for line in text.splitlines()]
    for event in got:
        jsonschema.validate(event, SCHEMA)
    return got


def test_json_mode_writes_only_json_on_stdout(json_mode: None,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    events.emit("code", "Wormhole code is: 7-a-b", code="7-a-b")
    events.emit("code_consumed", stdout="Note: code has been consumed")
    events.human("File sent and confirmed by the receiver.")
    events.offer("receive", offers.FileOffer("x.bin", 10), "Receiving 10 B file named 'x.bin'")
    events.attempt(AttemptNote("direct-tcp", "127.0.0.1:4001", "failed", "refused"))
    events.received_text("evil \x1b]0;title\x07 \ud800")
    out, err = capsys.readouterr()
    assert err == ""  # what restates an event goes away
    got = lines(out)
    assert [e["event"] for e in got] == ["code", "code_consumed", "offer", "transit_attempt",
                                         "text"]
    assert got[-1]["message"] == "evil \x1b]0;title\x07 \ud800"  # exact, once decoded
    assert "\x1b" not in out and out.isascii()  # but inert on the wire


def test_human_mode_prints_the_human_lines(capsys: pytest.CaptureFixture[str]) -> None:
    events.emit("code", "Wormhole code is: 7-a-b", code="7-a-b")
    events.emit("code_consumed", stdout="Note: code has been consumed")
    events.attempt(AttemptNote("direct-tcp", "127.0.0.1:4001", "dialling"))
    out, err = capsys.readouterr()
    assert out == "Note: code has been consumed\n"
    assert err == "Wormhole code is: 7-a-b\n"


def test_progress_is_throttled_to_ten_a_second_and_ends_at_total(json_mode: None,
                                                                  capsys: pytest.CaptureFixture[str]
                                                                  ) -> None:
    now = [100.0]
    shown = events.ProgressEvents(1000, clock=lambda: now[0])
    for _ in range(99):  # 99 updates in 0.99 s
        shown.update(10)
        now[0] += 0.01
    shown.update(10)
    got = lines(capsys.readouterr().out)
    assert 9 <= len(got) <= 11
    assert got[-1]["bytes"] == got[-1]["total"] == 1000
    times = [e["bytes"] for e in got]
    assert times == sorted(times)


def test_error_event_in_json_mode(json_mode: None, capsys: pytest.CaptureFixture[str]) -> None:
    events.error("wrong_code", 3, "wrong code")
    out, err = capsys.readouterr()
    assert lines(out) == [{"event": "error", "time": lines(out)[0]["time"], "code": "wrong_code",
                           "exit_status": 3, "message": "wrong code"}]
    assert err == "ERROR: wrong code\n"


def test_the_schema_lists_exactly_the_error_codes_of_the_table() -> None:
    error = next(s for s in SCHEMA["oneOf"] if s["title"] == "error")
    assert set(error["properties"]["code"]["enum"]) == set(exitcodes.all_codes())
    assert set(error["properties"]["exit_status"]["enum"]) == {
        int(s) for s in exitcodes.all_codes().values()}


def test_an_unknown_event_fails_the_schema() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"event": "surprise", "time": 1.0}, SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"event": "code", "time": 1.0}, SCHEMA)  # no code


def test_a_reader_that_went_away_stops_the_events_not_the_command(tmp_path: Path) -> None:
    """``wormhole --json ... | head -1``: later events go nowhere and nothing is reported."""
    import subprocess
    import sys

    program = ("from hilltop.cli import events\n"
               "events.enable_json()\n"
               "for i in range(2000):\n"
               "    events.emit('progress', bytes=i, total=2000)\n"
               "print('finished', file=__import__('sys').stderr)\n")
    shell = f"{sys.executable} -c \"{program}\" | head -1"
    result = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True,
                            text=True, timeout=60)
    assert json.loads(result.stdout)["event"] == "progress"
    assert result.stderr == "finished\n", result.stderr
    assert result.returncode == 0


def test_a_lost_mailbox_is_said_in_both_modes(json_mode: None,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from hilltop.rendezvous.mailbox import Reconnecting

    events.reconnecting(Reconnecting(retry_in=4.0, give_up_in=112.5, attempt=3))
    [got] = lines(capsys.readouterr().out)
    assert (got["event"], got["retry_in"], got["give_up_in"], got["attempt"]) == (
        "mailbox_reconnecting", 4.0, 112.5, 3)
    events.enable_json(False)
    events.reconnecting(Reconnecting(retry_in=1.0, give_up_in=20.0, attempt=1))
    assert capsys.readouterr().err == ("Lost the connection to the mailbox server; trying "
                                       "again in 1 s (giving up in 20 s)\n")
    events.reconnecting(Reconnecting(retry_in=8.0, give_up_in=1.0, attempt=4))
    assert capsys.readouterr().err == ("Lost the connection to the mailbox server; giving up "
                                       "in 1 s\n")


def test_the_json_help_lists_every_event_and_no_missing_file() -> None:
    """``--json``'s help pointed at docs/json-events.md, which an installed copy lacks; it now
    names the events itself, the schema's list exactly."""
    import re

    kinds = set(re.findall(r'"event": \{"const": "([a-z_]+)"\}', json.dumps(SCHEMA)))
    assert kinds, "the schema's event names were not found"
    listed = set(re.findall(r"[a-z_]+", events.JSON_HELP.split("(", 1)[1].split(")", 1)[0]))
    assert listed == kinds
    assert "docs/" not in events.JSON_HELP
