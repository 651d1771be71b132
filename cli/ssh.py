"""``wormhole ssh invite`` / ``ssh accept``: deliver an SSH public key into authorized_keys.

The same conversation as official 0.24 (``cmd_ssh.py`` over ``xfer_util``), so either side
may be official: the inviter allocates a code and waits; the accepter sends its public key as
a v1 text offer ``{"offer": {"message": KEY}}``; the inviter answers ``message_ack`` and
appends the key. Both use the appid ``lothar.com/wormhole/ssh-add`` unless ``--appid`` is
given, and print official's lines on stdout, where its users' scripts look. Where official is
unsafe we are not: what is added must be one plain key line, and the file is written without
following symlinks, appended, with 0700/0600 modes (:mod:`hilltop.cli.sshkeys`).
"""

from __future__ import annotations

from typing import Any

import click

from hilltop import api
from hilltop.cli import events, prompts, sshkeys, timing
from hilltop.cli.common import GlobalOptions, close_quietly, run
from hilltop.cli.tor import start_tor, tor_chosen, tor_flags
from hilltop.cli.transitopts import transit_options, watch_mailbox
from hilltop.errors import PeerRejectedError, ProtocolError, RejectedError
from hilltop.transfer import session

SSH_APPID = "lothar.com/wormhole/ssh-add"
"""Official 0.24's appid for ``wormhole ssh`` when ``--appid`` is not given: an official peer
on the other side is only found under it."""


def _appid(ctx: click.Context, opts: GlobalOptions) -> str:
    root = ctx.find_root()
    explicit = root.get_parameter_source("appid") not in (
        click.core.ParameterSource.DEFAULT, None)
    return opts.appid if explicit else SSH_APPID


async def _open(reactor: Any, opts: GlobalOptions, appid: str) -> tuple[api.Wormhole, Any]:
    """A wormhole for a text conversation, through Tor if a Tor flag was given."""
    tor = tor_chosen()
    manager = None
    extra: dict[str, Any] = {}
    if tor is not None:
        manager, _ = await start_tor(reactor, tor, transit_options("", False, None))
        extra["endpoint_factory"] = manager.endpoint_factory
    w = api.Wormhole(appid, opts.relay_url, reactor=reactor, **extra)
    timing.watch(w)
    watch_mailbox(w)
    return w, manager


@click.group()
def ssh() -> None:
    """Facilitate sending/receiving SSH public keys."""


@ssh.command(name="invite")
@click.option("-c", "--code-length", default=2, show_default=True, metavar="NUMWORDS",
              type=click.IntRange(1, 32), help="number of words in the code")
@click.option("-u", "--user", default=None, metavar="USER",
              help="add to USER's ~/.ssh/authorized_keys")
@tor_flags
@events.json_flag
@click.pass_context
def invite(ctx: click.Context, code_length: int, user: str | None) -> None:
    """Add a public-key to a ~/.ssh/authorized_keys file."""
    opts: GlobalOptions = ctx.obj
    appid = _appid(ctx, opts)
    ssh_path = sshkeys.ssh_dir(user)
    for note in sshkeys.check_writable(ssh_path):  # refuse before a code is handed out
        events.human(note)

    async def main(reactor: Any) -> int:
        w, manager = await _open(reactor, opts, appid)
        try:
            code = await w.allocate_code(code_length)
            events.emit("code", code=code,
                        stdout=f"Now tell the other user to run:\n\n"
                               f"wormhole ssh accept {code}\n")
            msg = session.parse_app_message(await w.get_message())
            events.emit("peer_connected")
            if isinstance(msg, session.ErrorMsg):
                raise PeerRejectedError(f"the other side abandoned: {msg.text}")
            if not isinstance(msg, session.TextOffer):
                w.send_message(session.ErrorMsg("expected an SSH public key").to_wire())
                raise ProtocolError("the other side sent something other than an SSH key")
            events.offer("receive", msg, None)
            try:
                key = sshkeys.parse_public_key(msg.message)
            except RejectedError:
                w.send_message(session.ErrorMsg("key refused").to_wire())
                raise
            w.send_message(session.Answer(session.MESSAGE_ACK).to_wire())
            where = ssh_path / "authorized_keys"
            options = sshkeys.append_key(ssh_path, key, owner=user)
            described = f"key type='{key.kind}' id='{key.keyid}'"
            if options is None:
                said = f"Appended {described} to '{where}'"
            elif options:
                said = (f"Already present: {described} in '{where}', on a line with options "
                        f"{options!r}; that line is kept as it is")
            else:
                said = f"Already present: {described} in '{where}'"
            extra = {"options": options} if options else {}
            events.emit("ssh_key_added", key_type=key.kind, key_id=key.keyid,
                        path=str(where), appended=options is None, **extra, stdout=said)
            events.emit("done", kind="ssh_key")
            return 0
        finally:
            await close_quietly(w)
            if manager is not None:
                await manager.close()

    run(main)


@ssh.command(name="accept")
@click.argument("code")
@click.option("-F", "--key-file", default=None, metavar="PATH",
              help="the public key to send: a .pub file, or a directory holding it "
                   "(default ~/.ssh)")
@click.option("-y", "--yes", is_flag=True, help="skip confirmation prompt to send key")
@tor_flags
@events.json_flag
@click.pass_context
def accept(ctx: click.Context, code: str, key_file: str | None, yes: bool) -> None:
    """Send your SSH public-key.

    In response to a 'wormhole ssh invite' this will send the public key you specify (if
    there's only one in ~/.ssh/* that will be sent).
    """
    opts: GlobalOptions = ctx.obj
    appid = _appid(ctx, opts)
    candidates = sshkeys.public_key_files(key_file)
    path = candidates[0] if len(candidates) == 1 else _choose(candidates)
    key = sshkeys.read_public_key(path)
    events.emit("ssh_key", key_type=key.kind, key_id=key.keyid, path=str(path),
                stdout=f"Sending public key type='{key.kind}' keyid='{key.keyid}'")

    async def main(reactor: Any) -> int:
        if not yes and not await prompts.ask_yes_no(
                reactor, f"Really send public key '{key.keyid}' ? [y/N]: "):
            raise RejectedError("not sent: the key was not confirmed")
        w, manager = await _open(reactor, opts, appid)
        try:
            w.set_code(code)
            events.emit("code", code=code)
            w.send_message(session.TextOffer(key.line() + "\n").to_wire())
            reply = session.parse_app_message(await w.get_message())
            events.emit("peer_connected")
            if isinstance(reply, session.ErrorMsg):
                raise PeerRejectedError(f"the other side refused the key: {reply.text}")
            if not (isinstance(reply, session.Answer) and reply.kind == session.MESSAGE_ACK):
                raise ProtocolError("the other side did not acknowledge the key")
            events.emit("done", kind="ssh_key", stdout="Key sent.")
            return 0
        finally:
            await close_quietly(w)
            if manager is not None:
                await manager.close()

    run(main)


def _choose(candidates: list[Any]) -> Any:
    """Official asks which of several keys to send, by number; so do we (before any network)."""
    listing = "\n".join(f"  {i}: {p.name}" for i, p in enumerate(candidates))
    while True:
        answer = click.prompt(f"Multiple public-keys found:\n{listing}\nSend which one?",
                              err=True, default="", show_default=False)
        if answer.strip().isdigit() and int(answer) < len(candidates):
            return candidates[int(answer)]
        if not answer.strip():
            raise click.UsageError("no key chosen; give one with -F/--key-file")
