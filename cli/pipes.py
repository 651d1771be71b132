"""Pipes on the command line: ``send -`` (a stream), ``receive -o -`` (to stdout), ``--text -``.

Decisions (README "Pipes", docs/protocol-extensions.md "Streams"):

* ``wormhole send -`` (or ``/dev/stdin`` on a pipe, or a FIFO) sends a stream of unknown
  length, offered as ``stdin`` or ``--name NAME``. Only hilltop receivers listing
  ``stream-v1`` can take it; official 0.24 and wormhole-william need the size in the offer, so
  toward them the send fails with a message saying why (and the receiver is told), before any
  of the stream is read. We do not spool stdin to a temporary file: that would quietly put an
  unbounded amount of data on the sender's disk, and the user can do it knowingly in one
  command (``cat > f; wormhole send f``). With stdin carrying the stream, ``--verify`` asks on
  ``/dev/tty`` (:func:`answers_for`).
* ``wormhole receive -o -`` writes the data, and only the data, to stdout; every message,
  prompt and progress line goes to stderr as always. A folder is written as the zip archive it
  travels as (``-o - > dir.zip``; official and hilltop folders are ordinary zips), with a
  notice. A terminal on stdout is refused before the code is used: binary data would garble
  it. A transfer that breaks midway exits 1 with the error on stderr, so the consumer can tell.
* ``--text -`` reads at most :data:`TEXT_LIMIT` and refuses more without reading the rest.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from hilltop import api
from hilltop.cli import events, output
from hilltop.errors import LocalError
from hilltop.transfer import session
from hilltop.units import readable_size

if TYPE_CHECKING:
    from hilltop.transfer.session import StreamSink, StreamSource
    from hilltop.transit.options import TransitOptions

TO_STDOUT = "-"
"""``-o -``: the received data goes to stdout."""

TEXT_LIMIT = 1024 * 1024
"""Bytes of UTF-8 that ``--text -`` takes from stdin (1 MiB).

Why this much: a text message is one mailbox message; its JSON escapes (``\\uXXXX``, up to 6
bytes for one) and the hex the mailbox carries it in make it up to ~12 times bigger on the
wire, and hilltop clients before issue 27 refused server frames over 8 MiB; the official
server keeps every message in its database and sends it again on every reconnection. Text of
that size is a file: ``wormhole send -`` streams it without limit.
"""
MAX_TEXT_WIRE = 7 * 512 * 1024
"""Bytes a text offer may take as JSON: 3.5 MiB, so under 8 MiB once sealed and hex-encoded
(every hilltop receiver takes that; now up to ``MAX_FRAME_CHARS``, for official senders).
Any 1 MiB of printable text fits (two-byte letters, the worst case, escape to 3 MiB); only
text full of control characters (six bytes each) can hit this."""


def is_stream_path(path: str) -> bool:
    """Whether ``path`` is ``-`` or names a pipe, socket or character device (``/dev/stdin``
    on a pipe, a FIFO): data of unknown length, sent as a stream. ``/dev/stdin`` redirected
    from a regular file is a file of known size and is sent as one."""
    if path == "-":
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # open_source says why
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def read_stdin_text() -> str:
    """``--text -``: stdin as text, refusing more than :data:`TEXT_LIMIT` bytes without reading
    on (at most ``TEXT_LIMIT + 1`` characters are ever read)."""
    try:
        text = sys.stdin.read(TEXT_LIMIT + 1)
    except UnicodeDecodeError:
        raise LocalError("the text on stdin is not valid text in this locale's encoding; "
                         "send it as a file with 'wormhole send -'") from None
    check_text_size(text)
    return text


TEXT_PROMPT = "Text to send: "
"""What ``wormhole send`` asks when given nothing to send: official 0.24's words."""


def read_typed_text() -> str:
    """``wormhole send`` with nothing to send (or ``--text ''``): one line, typed or piped, as
    official 0.24 reads it (without its newline; an empty line is an empty message).

    The question goes to stderr like every other (official puts it on stdout, where hilltop
    keeps only data and "code has been consumed"). Ctrl-C here ends the command with 130 and
    the error on a line of its own; a closed stdin (Ctrl-D) is "no text was entered", where
    official shows an EOFError traceback.
    """
    from hilltop.cli import exitcodes

    events.emit("question", question=TEXT_PROMPT.strip())
    sys.stderr.write(TEXT_PROMPT)
    sys.stderr.flush()
    try:
        line = sys.stdin.readline(TEXT_LIMIT + 2)  # room for the newline, and one byte over
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        gone = exitcodes.INTERRUPTED
        events.error(gone.code, gone.status, "interrupted before the transfer finished")
        sys.exit(gone.status)
    except UnicodeDecodeError:
        raise LocalError("the typed text is not valid text in this locale's encoding") from None
    if not line or not sys.stdin.isatty():  # nothing echoed the answer's newline
        sys.stderr.write("\n")
    if not line:
        raise LocalError("no text was entered")
    text = line.removesuffix("\n")
    check_text_size(text)
    return text


def check_text_size(text: str) -> None:
    """Refuse a text message bigger than :data:`TEXT_LIMIT` (or, escaped, than the mailbox
    takes), naming the way that has no limit."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if len(text) > TEXT_LIMIT or size > TEXT_LIMIT:
        raise LocalError(f"the text message is over {readable_size(TEXT_LIMIT)} "
                         f"({TEXT_LIMIT} bytes), the most one mailbox message carries here; "
                         "send it as a stream instead: ... | wormhole send -")
    if len(session.TextOffer(text).to_wire()) > MAX_TEXT_WIRE:
        raise LocalError("the text message is too big once escaped for the mailbox "
                         f"(over {readable_size(MAX_TEXT_WIRE)}); send it as a stream instead: "
                         "... | wormhole send -")


def refuse_terminal_stdout() -> None:
    """``-o -`` with stdout on a terminal: refuse before the code is used."""
    if sys.stdout.isatty():
        raise click.UsageError("-o - writes the received data to stdout, which is a terminal "
                               "here: redirect it (> FILE) or pipe it into a program")


def describe_stream(offer: session.StreamOffer) -> str:
    return f"a stream of unknown length named '{offer.name}'"


def stdout_sink(size: int) -> StreamSink:
    """A sink writing exactly ``size`` bytes (``UNKNOWN_SIZE`` for a stream) to stdout."""
    sys.stdout.flush()  # nothing of ours may land in the middle of the data
    return session.writer_sink(sys.stdout.fileno(), size)


# --- send -----------------------------------------------------------------------------------
@contextlib.contextmanager
def answers_for(path: str, verify: bool) -> Iterator[int]:
    """Where ``send --verify`` reads its yes or no while streaming ``path``: stdin, unless the
    stream is stdin, then the terminal (``/dev/tty``). Without one, refuse: the answer would
    be read from the data."""
    if not verify or not session.reads_our_stdin(path):
        yield 0
        return
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        raise LocalError("--verify needs a terminal to answer on: stdin carries the stream "
                         "(give the data as a FIFO, or leave out --verify)") from None
    try:
        yield fd
    finally:
        os.close(fd)


async def send_stream(reactor: Any, w: api.Wormhole, source: StreamSource,
                      options: TransitOptions, how: Any, hide_progress: bool,
                      answer_fd: int = 0) -> int:
    """The CLI side of sending a stream (:func:`hilltop.transfer.session.send`; ``how``: the
    send command's ``Announcement``)."""
    from hilltop.cli.progress import transfer_progress
    from hilltop.cli.send import announce_code, confirm_key

    events.offer("send", source.offer, f"Sending {describe_stream(source.offer)}")
    if source.path == "-" and os.isatty(0):
        output.status("(reading it from the terminal: end it with Ctrl-D)")
    await announce_code(w, how)
    await confirm_key(reactor, w, how.verify, answer_fd, transit_follows=options)
    with transfer_progress(None, hide_progress) as shown:
        trailer = await session.send(reactor, w, source, options, listener=session.Listener(
            on_connected=lambda desc: shown.connected(f"Sending ({desc})...", desc),
            progress=shown.update, on_path=shown.path))
        shown.done("Sent", kind="stream")
    events.human(f"Stream of {trailer.length} bytes sent and confirmed by the receiver. "
                 "Transfer complete.")
    return 0
