"""Every event a command reports, rendered for a person or, with ``--json``, as JSON lines.

Why one layer: a script and a person want the same facts (the code, the verifier, the offer,
which connection won, how far it got, how it ended) in different clothes. Each event is
reported once, here, with both renderings side by side, so a feature added later (another
command, several files, pipes) gets its ``--json`` form by calling :func:`emit` instead of
``print``. In ``--json`` mode stdout carries only JSON objects, one per line, and
the human rendering goes away; status lines that are not events (instructions, warnings) and
questions stay on stderr, and so does the ``ERROR:`` line next to the ``error`` event. Human
mode prints what the commands always printed, in the same places.

The schema is ``docs/json-events.schema.json`` (described in ``docs/json-events.md``); the
tests validate every event of real transfers against it. One command runs per process, so
the mode is module state, like :mod:`hilltop.cli.timing`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from hilltop.cli import output

if TYPE_CHECKING:
    from hilltop.rendezvous.mailbox import Reconnecting
    from hilltop.transfer.session import (
        DirectoryOffer,
        FileOffer,
        FilesOffer,
        StreamOffer,
        TextOffer,
    )
    from hilltop.transit.options import AttemptNote

    Offer = TextOffer | FileOffer | DirectoryOffer | StreamOffer | FilesOffer

PROGRESS_INTERVAL = 0.1
"""Seconds between two ``progress`` events at most 10 a second: enough for a live display,
and a 1 GiB transfer on loopback (under a second) cannot flood the reader."""

_state: dict[str, bool] = {"json": False}


def enable_json(on: bool = True) -> None:
    _state["json"] = on


def json_mode() -> bool:
    return _state["json"]


def _json_callback(_ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        enable_json()
    return value


JSON_HELP = ("report every event as one JSON object per line on stdout, its kind in the "
             '"event" field (code, code_consumed, verifier, peer_connected, question, offer, '
             "mailbox_reconnecting, transit_attempt, transit_connected, transit_path, "
             "progress, text, file, ssh_key, ssh_key_added, done, error); human output goes "
             "away")
"""Said without pointing at docs/json-events.md, which an installed copy does not have; the
list is the schema's (tests/cli/test_events.py keeps them equal)."""

def json_flag(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--json`` on the group and on each command: ``wormhole --json send`` and ``wormhole
    send --json`` both work, as scripts are written either way."""
    return click.option("--json", "json_events", is_flag=True, expose_value=False,
                        is_eager=True, callback=_json_callback,
                        help=JSON_HELP)(f)



def emit(event: str, human: str | None = None, *, stdout: str | None = None,
         **fields: Any) -> None:
    """Report ``event``: a JSON line in ``--json`` mode, else ``human`` as a status line on
    stderr and ``stdout`` as a line of data on stdout (either may be None: nothing shown)."""
    if _state["json"]:
        record = {"event": event, "time": round(time.time(), 3), **fields}
        # ensure_ascii: peer text with controls or lone surrogates stays inert, valid JSON
        try:
            sys.stdout.write(json.dumps(record, ensure_ascii=True) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            _reader_gone()
        return
    if human is not None:
        output.status(human)
    if stdout is not None:
        click.echo(output.terminal_safe(stdout, multiline=True))


def _reader_gone() -> None:
    """The program reading the events went away (``| head -1``): the command goes on to its
    own end (a transfer half done helps nobody), and later events go nowhere, as does the
    flush at exit that would otherwise report the broken pipe a second time."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def human(text: str = "") -> None:
    """A status line that only restates an event for a person: nothing in ``--json`` mode."""
    if not _state["json"]:
        output.status(text)


class ProgressEvents:
    """``progress`` events of one transfer of ``total`` bytes, at most 10 a second.

    The last one (every byte counted) is always reported, so a reader sees 100 %.
    """

    def __init__(self, total: int | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.done = 0
        self._clock = clock
        self._last: float | None = None  # when the last event went out
        self._complete = False  # the 100 % event went out

    def update(self, nbytes: int) -> None:
        if not _state["json"] or self._complete:
            return
        self.done += nbytes
        now = self._clock()
        self._complete = self.total is not None and self.done >= self.total
        if self._complete or self._last is None or now - self._last >= PROGRESS_INTERVAL:
            self._last = now
            emit("progress", bytes=self.done, total=self.total)  # None: a stream's length


def error(code: str, status: int, message: str) -> None:
    """The ``ERROR:`` line on stderr (both modes) and, with ``--json``, the ``error`` event."""
    output.error(message)
    if _state["json"]:
        emit("error", code=code, exit_status=status, message=message)


def attempt(note: AttemptNote) -> None:
    """One step of one transit attempt (``transit_attempt``); a person sees only the winner."""
    emit("transit_attempt", transport=note.transport, target=note.target, state=note.state,
         **({"reason": note.reason} if note.reason else {}))


def reconnecting(note: Reconnecting) -> None:
    """The mailbox server was lost (``mailbox_reconnecting``): when we try again, and when
    we give up."""
    if note.retry_in < note.give_up_in:
        said = (f"Lost the connection to the mailbox server; trying again in "
                f"{note.retry_in:g} s (giving up in {note.give_up_in:.0f} s)")
    else:  # the next attempt would come too late
        said = (f"Lost the connection to the mailbox server; giving up in "
                f"{note.give_up_in:.0f} s")
    emit("mailbox_reconnecting", said, retry_in=note.retry_in,
         give_up_in=round(note.give_up_in, 3), attempt=note.attempt)


def offer(direction: str, what: Offer, human: str | None) -> None:
    """What is offered (``direction`` "send") or was offered to us ("receive")."""
    from hilltop.transfer import session as offers

    fields: dict[str, Any]
    if isinstance(what, offers.TextOffer):
        fields = {"kind": "text", "size": len(what.message.encode("utf-8", "surrogatepass"))}
    elif isinstance(what, offers.StreamOffer):
        fields = {"kind": "stream", "name": what.name}  # its length is known only at the end
    elif isinstance(what, offers.FileOffer):
        fields = {"kind": "file", "name": what.filename, "size": what.filesize}
    elif isinstance(what, offers.FilesOffer):
        fields = {"kind": "files", "size": what.numbytes, "files": what.numfiles,
                  "items": [top.name for top in what.tops()]}
    else:
        fields = {"kind": "directory", "name": what.dirname, "size": what.numbytes,
                  "files": what.numfiles, "wire_size": what.zipsize}
    emit("offer", human, direction=direction, **fields)


def received_text(message: str) -> None:
    """A received text message: the ``text`` event, or the message itself on stdout."""
    if _state["json"]:
        emit("text", message=message)
    else:
        output.received_text(message)
