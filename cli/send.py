"""``wormhole send``: get a code, tell the user, then hand the payload to the peer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from hilltop import api
from hilltop._values import value
from hilltop.cli import events, output, pipes, prompts, timing
from hilltop.cli import lan as cli_lan
from hilltop.cli.common import GlobalOptions, close_quietly, exit_with, run, zero_mode_code
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
from hilltop.errors import HilltopError, PeerRejectedError, RejectedError, TransferError
from hilltop.rendezvous.codes import parse_code
from hilltop.transfer import session
from hilltop.transit.options import TransitOptions
from hilltop.units import readable_size

if TYPE_CHECKING:  # imported where a file is sent: a text message needs none of it
    from hilltop.cli import browser as cli_browser  # (nor --browser's page, offerlines, progress)
    from hilltop.transfer.session import Source

VERIFY_REJECTED = "sender rejected verification check, abandoned transfer"
"""The ``error`` text official 0.24 sends when its user answers "no" to the verifier; official
receivers print it as it is, so the same words reach the peer whichever client it runs."""

CODE_CONSUMED = "Note: code has been consumed and can no longer be used."
"""What official 0.24's sender prints on stdout once the receiver came and the server freed
the nameplate; scripts that wait for the code to be used watch for it."""


def browser_flags(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--browser`` and ``--browser-address``; :mod:`hilltop.cli.browser` loads only with them."""
    f = click.option("--browser-address", metavar="HOST[:PORT]",
                     help="with --browser: where to serve the page (default: this machine's "
                          "first network address, any free port)")(f)
    return click.option("--browser", is_flag=True,
                        help="serve a web page that receives it: open the printed URL "
                             "(or its QR code) on a phone or computer with nothing "
                             "installed")(f)


@click.command()
@click.argument("paths", nargs=-1, metavar="[WHAT]...")
@click.option("--text", metavar="MESSAGE",
              help="text message to send, instead of a file; '-' reads it from stdin")
@click.option("--code", metavar="CODE", help="use this code instead of allocating one")
@click.option("-c", "--code-length", default=2, show_default=True, metavar="NUMWORDS",
              type=click.IntRange(1, 32), help="number of words in an allocated code")
@click.option("-0", "zero_mode", is_flag=True,
              help="no-code mode: the code is 0- and the receiver runs 'wormhole receive -0'"
                   " (anyone on the server can join: for tests and demonstrations)")
@click.option("-v", "--verify", is_flag=True,
              help="show the verification string and wait for approval")
@click.option("--hide-progress", is_flag=True, help="do not show a progress bar")
@click.option("--qr/--no-qr", default=True, envvar="WORMHOLE_QR", show_envvar=True,
              help="also show the code as a QR code (wormhole-transfer:CODE, for phone apps)")
@click.option("--name", "stream_name", metavar="NAME",
              help="with '-' (stdin) or a FIFO: the name the stream is offered under "
                   "(default: stdin, or the FIFO's name)")
@click.option("--ignore-unsendable-files", is_flag=True,
              help="leave out files that cannot be read instead of failing")
@transit_flags
@tor_flags
@lan_flags
@browser_flags
@debug_state_flag
@events.json_flag
@click.pass_obj
def send(opts: GlobalOptions, paths: tuple[str, ...], text: str | None, code: str | None,
         code_length: int, zero_mode: bool, verify: bool, hide_progress: bool, qr: bool,
         stream_name: str | None, ignore_unsendable_files: bool, listen: bool,
         transports: str | None, lan: bool, interface: str | None, browser: bool,
         browser_address: str | None) -> None:
    """Send a text message, file, directory, or several of them (one folder for official
    and wormhole-william receivers); '-' streams stdin (hilltop receivers only)."""
    what = paths[0] if len(paths) == 1 else None
    several = len(paths) > 1
    if several:
        _check_several(paths, text, stream_name)
    if text and paths:
        raise click.UsageError("give either --text or a file, not both")
    if zero_mode:
        code = zero_mode_code(code, bool(lan or interface), "--code")
    try:
        if code is not None:  # before anything is said about what will be sent
            parse_code(code)
        if not text and not paths:  # official 0.24 asks too, also for --text ''
            text = pipes.read_typed_text()
        elif text == "-":
            output.status("Reading text message from stdin..")
            text = pipes.read_stdin_text()
        elif text is not None:
            pipes.check_text_size(text)
    except HilltopError as err:  # before run(), which reports the others the same way
        exit_with(err)
    streamed = what is not None and pipes.is_stream_path(what)
    if stream_name is not None and not streamed:
        raise click.UsageError("--name names a stream ('-' or a FIFO); a file or directory "
                               "is offered under its own name")
    options = transit_options(opts.transit_helpers, listen, transports)
    tor = tor_chosen()
    if tor is not None and (lan or interface):
        raise click.UsageError("--tor and --lan exclude each other")

    if browser_address is not None and not browser:
        raise click.UsageError("--browser-address goes with --browser")
    if browser:
        from hilltop.cli import browser as cli_browser

        where = cli_browser.parse_address(browser_address)
        try:
            from hilltop.webrtc.settings import WebRTCSettings

            cli_browser.refuse_unsupported(
                tor=tor is not None, streamed=streamed, file=bool(paths),
                transports=transports, webrtc=options.settings.get(WebRTCSettings),
                no_listen=options.no_listen,
                relays=cli_browser.page_relays(options.transit_helpers))
        except HilltopError as err:
            exit_with(err)
    announcement = Announcement(code, code_length, verify, qr=qr, zero_mode=zero_mode)

    async def payload(reactor: Any, w: api.Wormhole, options: TransitOptions,
                      announcement: Announcement) -> int:
        source = None
        if streamed:
            assert what is not None
            with session.stream_source(what, stream_name) as stream, \
                    pipes.answers_for(what, verify) as answer_fd:
                return await pipes.send_stream(reactor, w, stream, options, announcement,
                                               hide_progress, answer_fd)
        if several:
            from hilltop.cli.several import send_files
            bundle = session.open_bundle(list(paths), skip_unsendable=ignore_unsendable_files)
            return await send_files(reactor, w, bundle, options, announcement, hide_progress)
        if what is not None:
            # the zip writer loads only to send a file
            source = session.open_source(what, skip_unsendable=ignore_unsendable_files)
        if source is not None:
            with source:
                return await _send_file(reactor, w, source, options, announcement,
                                        hide_progress)
        assert text is not None
        return await _send_text(reactor, w, text, announcement)

    async def main(reactor: Any) -> int:
        check_transport_names(options)
        if not browser:
            return await start(reactor, announcement)
        lan_hosts: tuple[str, ...] = ()
        if lan or interface:
            from hilltop.lan.service import lan_interfaces

            lan_hosts = tuple(lan_interfaces(interface).addresses)
        served = where.or_host(
            lambda: lan_hosts[0] if lan_hosts else cli_browser.default_host())
        from hilltop.cli.pageserver import PageServer
        from hilltop.webrtc.settings import WebRTCSettings

        server = PageServer(reactor, served.host, served.port)
        port = server.start()
        cli_browser.check_reachable(served.host)
        page = cli_browser.BrowserPage(cli_browser.BrowserAddress(served.host, port),
                                       options.settings.get(WebRTCSettings), qr, lan_hosts,
                                       cli_browser.page_relays(options.transit_helpers))
        try:
            return await start(reactor, dataclasses.replace(announcement, page=page))
        finally:
            await server.stop()

    async def start(reactor: Any, announcement: Announcement) -> int:
        if lan or interface:
            from hilltop.lan.service import lan_interfaces  # zeroconf and friends: LAN mode only

            interfaces = lan_interfaces(interface)
            lan_options = cli_lan.lan_transit(options, interfaces, interface,
                                              opts.default_transit_helper)
            return await cli_lan.send_lan(
                reactor, opts, interfaces,
                lambda w, c: payload(reactor, w, lan_options, dataclasses.replace(
                    announcement, code=c, receive_command="wormhole receive --lan", qr=False)),
                code, code_length)
        manager, chosen = None, options
        extra_args: dict[str, Any] = {}
        if tor is not None:
            manager, chosen = await start_tor(reactor, tor, options)
            extra_args["endpoint_factory"] = manager.endpoint_factory
        # a file that may ride in its offer (inline-file-v1) announces no transit
        small = not streamed and not several and session.may_go_inline(what, chosen)
        w = api.Wormhole(opts.appid, opts.relay_url, reactor=reactor,
                         app_versions=app_versions(chosen,
                                                   transit_follows=text is None and not small),
                         # only a sender asked for --durable can choose it
                         dilation=text is None and chosen.durable is True
                         and dilation_wanted(chosen),
                         **extra_args)
        try:
            with cli_lan.suggest_lan("send", enabled=tor is None):
                return await payload(reactor, w, chosen, announcement)
        finally:
            await close_quietly(w)
            if manager is not None:
                await manager.close()

    run(main)


def _check_several(paths: tuple[str, ...], text: str | None, stream_name: str | None) -> None:
    """Several paths: files and folders only (a stream has no size to list)."""
    if text is not None:
        raise click.UsageError("give either --text or files, not both")
    if stream_name is not None or any(pipes.is_stream_path(p) for p in paths):
        raise click.UsageError("a stream ('-', /dev/stdin on a pipe, a FIFO) is sent on its "
                               "own, not with other files")


@value
class Announcement:
    """The flags of ``send`` that say how the code is chosen and shown."""

    code: str | None  # --code; None allocates one
    code_length: int
    verify: bool
    receive_command: str = "wormhole receive"
    qr: bool = False  # the official client shows one by default; LAN mode never does
    zero_mode: bool = False  # -0: the code is known, so it is neither shown nor drawn
    page: cli_browser.BrowserPage | None = None  # --browser: the page's URL is shown too


async def announce_code(w: api.Wormhole, how: Announcement) -> str:
    """Set or allocate the code and tell the user what the other side must type."""
    timing.watch(w)
    watch_mailbox(w)
    if how.code is not None:
        w.set_code(how.code)
        code = await w.get_code()
    else:
        code = await w.allocate_code(how.code_length)
    w.when_code_consumed().addCallbacks(lambda _: events.emit("code_consumed",
                                                              stdout=CODE_CONSUMED),
                                        lambda _: None)  # closed first: nothing to say
    events.emit("code", None if how.zero_mode else f"Wormhole code is: {code}", code=code)
    if events.json_mode():
        if how.page is not None:  # on stderr, beside the events: a script may open it
            output.status(how.page.url(code, w.relay_url))
        return code  # the event is the announcement; a script has no use for the QR picture
    if how.qr and not how.zero_mode:
        output.qr_code(f"wormhole-transfer:{code}")
    output.status("On the other computer, please run:")
    output.status()
    command = how.receive_command + (" --verify" if how.verify else "")
    output.status(f"{command} -0" if how.zero_mode else f"{command} {code}")
    output.status()
    if how.page is not None:
        how.page.announce(code, w.relay_url)
    return code


async def confirm_key(reactor: Any, w: api.Wormhole, verify: bool,
                      answer_fd: int = prompts.STDIN, *,
                      transit_follows: TransitOptions | None = None) -> dict:
    """Wait until the peer confirmed the key; with --verify let the user compare verifiers.

    A sender whose offer needs transit (``transit_follows``: its options) loads that
    machinery once the key is established, while the versions cross, instead of after the
    peer's version arrived: one mailbox round trip of its ~40-60 ms (bench/README.md, "Time
    budget").

    The question comes only once the peer's ``version`` arrived, as in official 0.24 (whose
    verifier fires then): a wrong code fails before anyone is asked, and a "no" leaves at once.
    Asked earlier, the rejection waited in the outbox for that confirmation, and the close
    that follows the "no" dropped it, so the receiver waited forever. The answer is read off
    the reactor thread (:func:`prompts.ask_yes_no`), so the mailbox keeps running meanwhile.
    """
    verifier = await w.get_verifier()
    if transit_follows is not None:  # load it while the versions cross (after ours left)
        reactor.callLater(0, session.warm_up_transit, transit_follows)
    events.emit("verifier", verifier=verifier.hex())
    versions = await w.get_peer_versions()
    events.emit("peer_connected")
    if verify and not await prompts.ask_yes_no(
            reactor, f"Verifier {verifier.hex()}. ok? (yes/no): ", answer_fd):
        w.send_message(session.ErrorMsg(VERIFY_REJECTED).to_wire())
        raise RejectedError("verification rejected: the transfer was abandoned "
                            "and the receiver was told")
    return versions


async def _send_text(reactor: Any, w: api.Wormhole, text: str,
                     how: Announcement) -> int:
    events.offer("send", session.TextOffer(text),
                 f"Sending text message ({readable_size(len(text.encode('utf-8')))})")
    await announce_code(w, how)
    await confirm_key(reactor, w, how.verify)
    w.send_message(session.TextOffer(text).to_wire())
    reply = session.parse_app_message(await w.get_message())
    if isinstance(reply, session.ErrorMsg):
        raise PeerRejectedError(f"the receiver refused: {reply.text}")
    if not (isinstance(reply, session.Answer) and reply.kind == session.MESSAGE_ACK
            and reply.ok):
        raise TransferError("the receiver did not acknowledge the message")
    events.emit("done", "text message sent", kind="text")
    return 0


async def _send_file(reactor: Any, w: api.Wormhole, source: Source,
                     options: TransitOptions, how: Announcement,
                     hide_progress: bool) -> int:
    from hilltop.cli.offerlines import describe_offer, offer_kind, show_resume
    from hilltop.cli.progress import transfer_progress

    for skipped in source.skipped:
        output.status(f"left out (unreadable): {skipped}")
    events.offer("send", source.offer, f"Sending {describe_offer(source.offer)}")
    await announce_code(w, how)
    # a file that may ride in its offer warms up transit only if the peer cannot take it so
    small = session.inline_eligible(source, options)
    await confirm_key(reactor, w, how.verify, transit_follows=None if small else options)
    with transfer_progress(source.size, hide_progress) as shown:
        await session.send(reactor, w, source, options, listener=session.Listener(
            on_connected=lambda desc: shown.connected(f"Sending ({desc})...", desc),
            progress=shown.update, on_path=shown.path,
            on_resume=lambda offset, why: show_resume(shown, offset, why)))
        shown.done("Sent", kind=offer_kind(source.offer))
    events.human("File sent and confirmed by the receiver. Transfer complete.")
    return 0
