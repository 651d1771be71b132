"""The transfer's screen: the connection line first, then one bar, then the summary."""

from __future__ import annotations

import io
import re

import pytest

from hilltop.cli import progress
from hilltop.cli.progress import TransferProgress, transfer_progress


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_nothing_is_drawn_before_the_connection_line() -> None:
    screen = FakeTerminal()
    shown = TransferProgress(2_000_000, hide=False, stream=screen)
    shown.update(0)
    assert screen.getvalue() == ""  # no bar (and so no 0% line) before transit connected
    shown.connected("Receiving (->direct-tcp 127.0.0.1:4001)...", "direct-tcp 127.0.0.1:4001")
    first_line, _, rest = screen.getvalue().partition("\n")
    assert first_line == "Receiving (->direct-tcp 127.0.0.1:4001)..."
    assert "%" in rest  # the bar comes after the line, never before
    shown.update(2_000_000)
    shown.summary("Received")


def test_one_bar_per_transfer() -> None:
    screen = FakeTerminal()
    shown = TransferProgress(10, hide=False, stream=screen)
    shown.connected("Sending (direct-tcp)...", "direct-tcp")
    shown.connected("Sending (relay)...", "relay")
    assert screen.getvalue().count("Sending (") == 1
    assert shown.summary("Sent").endswith(" via direct-tcp")


def test_summary_gives_size_time_rate_and_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([100.0, 102.25])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    shown = TransferProgress(1_000_000_000, hide=True, stream=io.StringIO())
    shown.connected("Receiving (->direct-tcp 127.0.0.1:41234)...", "direct-tcp 127.0.0.1:41234")
    assert shown.summary("Received") == (
        "Received 1.0 GB in 2.2 s (444.4 MB/s) via direct-tcp 127.0.0.1:41234")


def test_no_bar_off_a_terminal_or_when_hidden() -> None:
    for hide, screen in ((False, io.StringIO()), (True, FakeTerminal())):
        with transfer_progress(5, hide, screen) as shown:
            shown.connected("Sending (relay)...", "relay")
            shown.update(5)
        assert screen.getvalue() == "Sending (relay)...\n"


def test_the_bar_is_erased_when_the_transfer_fails() -> None:
    screen = FakeTerminal()
    with pytest.raises(RuntimeError), transfer_progress(10, False, screen) as shown:
        shown.connected("Sending (relay)...", "relay")
        shown.update(3)
        raise RuntimeError("peer went away")
    # tqdm with leave=False blanks its line and returns to its start: no stale bar stays
    assert re.search(r"\r +\r+$", screen.getvalue())


def test_the_cursor_waits_at_the_start_of_the_bar_line() -> None:
    """So the "^C" a terminal echoes lands inside the bar and is erased with it; at the end
    of a full-width bar it wrapped to the next line, and the erase missed the bar."""
    screen = FakeTerminal()
    with transfer_progress(10, False, screen) as shown:
        shown.connected("Receiving (->relay)...", "relay")
        shown.update(3)
        drawn = screen.getvalue()
        assert "%|" in drawn and drawn.endswith("\r"), repr(drawn)
        shown.line("a status line above the bar")
        assert "a status line above the bar\r\n" in screen.getvalue()
        assert screen.getvalue().endswith("\r")  # the bar redrawn, the cursor back at its start


@pytest.mark.parametrize("json_mode", [False, True])
def test_the_summary_names_the_path_the_transfer_ended_on(json_mode: bool,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """A durable transfer that moved from the relay to a punched path must not report the
    relay in its ``done`` event (seen in integration/test_durable_punchover.py's events)."""
    from hilltop.cli import events

    events.enable_json(json_mode)
    try:
        shown = TransferProgress(10, hide=True, stream=io.StringIO())
        shown.connected("Sending (relay)...", "relay 127.0.0.1:4001 (dilated)")
        shown.path(None)
        shown.path("tcp-punch 198.18.1.2:5000 (dilated)")
        shown.update(10)
        shown.done("Sent")
    finally:
        events.enable_json(False)
    if json_mode:
        done = [line for line in capsys.readouterr().out.splitlines() if '"done"' in line]
        assert len(done) == 1 and '"via": "tcp-punch 198.18.1.2:5000 (dilated)"' in done[0]
    assert shown.summary("Sent").endswith(" via tcp-punch 198.18.1.2:5000 (dilated)")
