"""``wormhole receive``: take a code (argument or typed with completion), accept the offer."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click
from twisted.internet.defer import CancelledError

from hilltop import api
from hilltop.cli import events, output, pipes, prompts, timing
from hilltop.cli import lan as cli_lan
from hilltop.cli.common import GlobalOptions, close_quietly, run, zero_mode_code
from hilltop.cli.debugstate import debug_state_flag
from hilltop.cli.tor import start_tor, tor_chosen, tor_flags
from hilltop.cli.transitopts import (
    app_versions,
    check_transport_names,
    dilation_wanted,
    lan_flags,
    transit_flags,
    transit_options,
    watch_mailbox,
)
from hilltop.errors import HilltopError, RejectedError
from hilltop.transfer import session
from hilltop.units import readable_size

if TYPE_CHECKING:  # the code prompt, its completer and a file's progress: loaded at their use,
    # as a text with a given code needs none of them (bench/README.md, "Sixth session: the
    # text path's imports")
    from click.shell_completion import CompletionItem

    from hilltop.cli.progress import TransferProgress


WAITING_NOTICE = "Waiting for sender..."
WAITING_NOTICE_SECONDS = 1.0
"""Official 0.24's receiver says :data:`WAITING_NOTICE` (on stderr) when the sender's key has
not come 1 s after the code was set, typed or allocated, so a receiver that went first does
not sit there silent; a sender already waiting is usually met well within that second."""


def _complete_code(ctx: click.Context, param: click.Parameter,
                   incomplete: str) -> list[CompletionItem]:
    from hilltop.cli.completion import complete_code

    return complete_code(ctx, param, incomplete)


@click.command()
@click.argument("code", nargs=-1, metavar="[CODE]...", shell_complete=_complete_code)
@click.option("-c", "--code-length", default=2, show_default=True, metavar="NUMWORDS",
              type=click.IntRange(1, 32),
              help="number of words expected in the code, or allocated with --allocate")
@click.option("-a", "--allocate", is_flag=True,
              help="allocate a fresh code and show it, for the sender to type")
@click.option("-0", "zero_mode", is_flag=True,
              help="no-code mode: take the code 0- (from 'wormhole send -0')")
@click.option("-v", "--verify", is_flag=True, help="show the verification string")
@click.option("--hide-progress", is_flag=True, help="do not show a progress bar")
@click.option("-t", "--only-text", is_flag=True, help="refuse file transfers, accept only text")
@click.option("--accept-file", is_flag=True, envvar="WORMHOLE_ACCEPT_FILE", show_envvar=True,
              help="accept a file or directory without asking")
@click.option("-o", "--output-file", metavar="FILENAME|DIRNAME|-", default=None,
              help="name to save as, instead of the sender's; an existing directory "
                   "receives the transfer inside it; '-' writes the data to stdout "
                   "(a folder as its zip archive)")
@click.option("--no-resume", is_flag=True,
              help="start a file over even if an interrupted receive of it was kept "
                   "(and remove that partial); keep nothing if this one is interrupted")
@transit_flags
@tor_flags
@lan_flags
@debug_state_flag
@events.json_flag
@click.pass_obj
def receive(opts: GlobalOptions, code: tuple[str, ...], code_length: int, allocate: bool,
            zero_mode: bool, verify: bool, hide_progress: bool, only_text: bool, accept_file: bool,
            output_file: str | None, no_resume: bool, listen: bool, transports: str | None,
            lan: bool, interface: str | None) -> None:
    """Receive a text message, file, directory, or several files (from 'wormhole send')."""
    typed = "-".join(code) if code else None
    if allocate and (typed is not None or zero_mode or lan or interface):
        raise click.UsageError("--allocate makes the code: give no code, -0 or --lan with it")
    if zero_mode:
        typed = zero_mode_code(typed, bool(lan or interface), "a code")
    if output_file == pipes.TO_STDOUT:
        if events.json_mode():
            raise click.UsageError("--json writes its events to stdout: -o - cannot write the "
                                   "data there too (give a file name)")
        pipes.refuse_terminal_stdout()
    options = transit_options(opts.transit_helpers, listen, transports)
    choices = _Choices(only_text, accept_file, output_file, hide_progress, options)
    choices.no_resume = no_resume
    tor = tor_chosen()
    if tor is not None and (lan or interface):
        raise click.UsageError("--tor and --lan exclude each other")
    if (lan or interface) and typed is None:
        raise click.UsageError("with --lan, give the code on the command line")

    async def main(reactor: Any) -> int:
        check_transport_names(options)
        relay_url, found = opts.relay_url, None
        if lan or interface:
            assert typed is not None  # refused above as a usage error
            from hilltop.lan.service import lan_interfaces  # zeroconf and friends: LAN mode only

            interfaces = lan_interfaces(interface)
            choices.options = cli_lan.lan_transit(options, interfaces, interface,
                                                  opts.default_transit_helper)
            relay_url, found = await cli_lan.find_sender(reactor, interfaces, typed)
        manager = None
        extra_args: dict[str, Any] = {}
        if tor is not None:
            manager, choices.options = await start_tor(reactor, tor, options)
            extra_args["endpoint_factory"] = manager.endpoint_factory
        w = api.Wormhole(opts.appid, relay_url, reactor=reactor,
                         app_versions=app_versions(choices.options),
                         dilation=dilation_wanted(choices.options), **extra_args)
        watch_mailbox(w)
        try:
            with cli_lan.suggest_lan("receive", enabled=found is None and tor is None):
                return await _converse(reactor, w, typed, found)
        finally:
            await close_quietly(w)
            if manager is not None:
                await manager.close()

    async def _converse(reactor: Any, w: api.Wormhole, typed: str | None,
                        found: float | None) -> int:
        timing.watch(w)
        if typed is not None:
            w.set_code(typed)
            events.emit("code", code=typed)
            if found is not None:
                await cli_lan.announce_connected(reactor, w, found)
        elif allocate:
            from hilltop.cli import codeinput

            await codeinput.allocate_code(w, code_length)  # emits the code event
        else:
            from hilltop.cli import codeinput

            events.emit("code", code=await codeinput.read_code(reactor, w, code_length))
        waiting = reactor.callLater(WAITING_NOTICE_SECONDS, events.human, WAITING_NOTICE)
        try:
            verifier = await w.get_verifier()
        finally:
            if waiting.active():
                waiting.cancel()
        events.emit("verifier", f"Verifier {verifier.hex()}." if verify else None,
                    verifier=verifier.hex())
        await w.get_peer_versions()
        events.emit("peer_connected")
        return await _receive(reactor, w, choices)

    run(main)


class _Choices:
    def __init__(self, only_text: bool, accept_file: bool, output_file: str | None,
                 hide_progress: bool, options: session.TransitOptions) -> None:
        self.only_text = only_text
        self.accept_file = accept_file
        self.output_file = output_file
        self.hide_progress = hide_progress
        self.options = options
        self.no_resume = False

    @property
    def to_stdout(self) -> bool:
        return self.output_file == pipes.TO_STDOUT

    def for_session(self) -> session.ReceiveChoices:
        return session.ReceiveChoices(os.getcwd(), output=self.output_file,
                                      to_stdout=self.to_stdout, only_text=self.only_text,
                                      no_resume=self.no_resume)


async def _receive(reactor: Any, w: api.Wormhole, choices: _Choices) -> int:
    incoming = await session.receive_offer(reactor, w, idle_timeout=choices.options.idle_timeout,
                                           transit=choices.options)
    offer = incoming.offer
    if isinstance(offer, session.TextOffer):
        events.offer("receive", offer, None)
        events.received_text(incoming.accept_text())
        events.emit("done", kind="text")
        return 0
    try:
        prepared = session.prepare(offer, choices.for_session(),
                                   resumable=await session.may_resume(w),
                                   stdout_sink=pipes.stdout_sink)
        await _ask(reactor, prepared, choices)
        sink = prepared.open_sink()
    except (HilltopError, CancelledError) as err:  # refused, or Ctrl-C/SIGTERM at the question
        incoming.reject(err)
        raise
    if isinstance(offer, session.FilesOffer):
        from hilltop.cli.several import receive_files

        return await receive_files(incoming, prepared, sink, choices)
    if isinstance(offer, session.StreamOffer):
        return await _receive_stream(incoming, prepared, sink, choices)
    return await _receive_file(incoming, prepared, sink, choices)


async def _ask(reactor: Any, prepared: session.Prepared, choices: _Choices) -> None:
    """Show the offer and ask the user (unless ``--accept-file``)."""
    from hilltop.cli.offerlines import describe_offer

    offer = prepared.offer
    if isinstance(offer, session.FilesOffer):
        from hilltop.cli.several import describe_files

        events.offer("receive", offer, f"Receiving {describe_files(offer)}")
        assert prepared.where is not None
        question = (f"ok? (y/N) [saves {readable_size(offer.numbytes)} as "
                    f"{len(offer.tops())} items in {os.path.relpath(prepared.where)}]: ")
    elif isinstance(offer, session.StreamOffer):
        where = ("to stdout" if prepared.where is None
                 else f"as {os.path.relpath(prepared.where)}")
        events.offer("receive", offer, f"Receiving {pipes.describe_stream(offer)}")
        question = f"ok? (y/N) [writes it {where}]: "
    else:
        assert isinstance(offer, session.FileOffer | session.DirectoryOffer)
        size = readable_size(offer.filesize if isinstance(offer, session.FileOffer)
                             else offer.numbytes)
        events.offer("receive", offer, f"Receiving {describe_offer(offer)}")
        if prepared.where is None:
            if isinstance(offer, session.DirectoryOffer):
                output.status("The folder goes to stdout as the zip archive it travels as.")
            question = f"ok? (y/N) [writes {size} to stdout]: "
        else:
            question = f"ok? (y/N) [saves {size} as {os.path.relpath(prepared.where)}]: "
    if not choices.accept_file and not await prompts.ask_yes_no(reactor, question):
        raise RejectedError("transfer rejected")


def _listener(shown: TransferProgress, progress: Any = None) -> session.Listener:
    from hilltop.cli.offerlines import show_resume

    return session.Listener(
        on_connected=lambda desc: shown.connected(f"Receiving (->{desc})...", desc),
        progress=progress or shown.update,
        on_unacknowledged=lambda why: warn_unacknowledged(shown, why),
        on_path=shown.path,
        on_resume=lambda offset, why: show_resume(shown, offset, why))


async def _receive_file(incoming: session.Incoming, prepared: session.Prepared, sink: Any,
                        choices: _Choices) -> int:
    from hilltop.cli.offerlines import offer_kind
    from hilltop.cli.progress import transfer_progress

    offer = prepared.offer
    size = prepared.size or 0
    restart = getattr(sink, "restart_reason", "")
    if restart:
        output.status(f"Starting from zero: {restart}")
    with transfer_progress(size, choices.hide_progress) as shown:
        try:
            await incoming.receive(sink, choices.options, listener=_listener(shown))
        except BaseException:
            kept = getattr(sink, "kept_bytes", 0)
            if kept:  # said before the error line, which may say "the file was not saved"
                shown.close()
                output.status(f"{os.path.relpath(sink.target)} was not saved; the "
                              f"{readable_size(kept)} of {readable_size(size)} received so far "
                              "are kept (hidden), and receiving this file here again "
                              "continues from there")
            raise
        shown.done("Received", kind=offer_kind(offer),  # type: ignore[arg-type]
                   **({} if choices.to_stdout else {"path": os.path.abspath(sink.target)}))
    events.human("Wrote it to stdout" if choices.to_stdout
                 else f"Received {os.path.relpath(sink.target)}")
    say_dropped_partial(sink)
    return 0


async def _receive_stream(incoming: session.Incoming, prepared: session.Prepared, sink: Any,
                          choices: _Choices) -> int:
    """A stream of unknown length (``stream-v1``): to stdout, or to a file like any other,
    which gets its name only once the sender's end marker and trailer arrived."""
    from hilltop.cli.progress import transfer_progress

    with transfer_progress(None, choices.hide_progress) as shown:
        trailer = await incoming.receive(sink, choices.options, listener=_listener(shown))
        shown.done("Received", kind="stream",
                   **({} if choices.to_stdout else {"path": os.path.abspath(sink.target)}))
    what = f"stream of {trailer.length} bytes"
    events.human(f"Wrote the {what} to stdout" if choices.to_stdout
                 else f"Received the {what} as {os.path.relpath(sink.target)}")
    say_dropped_partial(sink)
    return 0


def say_dropped_partial(sink: object) -> None:
    """One line when a partial kept for resuming this name went: the complete file now
    holds the name, so it could never be continued (see ``FileSink.dropped_kept``)."""
    dropped = getattr(sink, "dropped_kept", 0)
    if dropped:
        events.human(f"Removed the {readable_size(dropped)} kept from an interrupted receive "
                     f"of {os.path.basename(getattr(sink, 'target', ''))}: the complete file "
                     "is in place now")


def warn_unacknowledged(shown: TransferProgress, why: str) -> None:
    shown.close()  # every byte is in: the bar goes, so the warning gets a line of its own
    output.status(f"Warning: everything arrived, but the sender may not know ({why})")
