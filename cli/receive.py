"""``wormhole receive``: take a code (argument or typed with completion), accept the offer."""

from __future__ import annotations

import sys
from typing import Any

import click
from hilltop import api, transfer
from hilltop.cli import codeinput, output
from hilltop.cli.main import GlobalOptions, run
from hilltop.cli.send import _close_quietly
from hilltop.errors import ProtocolError, TransferError


@click.command()
@click.argument("code", nargs=-1, metavar="[CODE]...")
@click.option("-c", "--code-length", default=2, show_default=True, metavar="NUMWORDS",
              type=click.IntRange(1, 32), help="number of words expected in the code")
@click.option("-v", "--verify", is_flag=True, help="show the verification string")
@click.option("--hide-progress", is_flag=True, help="do not show a progress bar")
@click.option("-t", "--only-text", is_flag=True, help="refuse file transfers, accept only text")
@click.pass_obj
def receive(opts: GlobalOptions, code: tuple[str, ...], code_length: int, verify: bool,
            hide_progress: bool, only_text: bool) -> None:
    """Receive a text message, file, or directory (from 'wormhole send')."""
    typed = "-".join(code) if code else None

    async def main(reactor: Any) -> int:
        w = api.Wormhole(opts.appid, opts.relay_url, reactor=reactor)
        try:
            if typed is not None:
                w.set_code(typed)
            else:
                await codeinput.read_code(reactor, w, code_length)
            verifier = await w.get_verifier()
            if verify:
                output.status(f"Verifier {verifier.hex()}.")
            await w.get_peer_versions()
            return await _receive(w, only_text)
        finally:
            await _close_quietly(w)

    run(main)


async def _receive(w: api.Wormhole, only_text: bool) -> int:
    while True:
        try:
            msg = transfer.parse_app_message(await w.get_message())
        except ProtocolError as err:
            w.send_message(transfer.ErrorMsg(str(err)).to_wire())
            raise
        if isinstance(msg, transfer.ErrorMsg):
            raise TransferError(f"the sender abandoned the transfer: {msg.text}")
        if isinstance(msg, transfer.TextOffer):
            sys.stdout.write(msg.message + "\n")
            sys.stdout.flush()
            w.send_message(transfer.Answer(message_ack="ok").to_wire())
            return 0
        if isinstance(msg, transfer.TransitMsg):
            continue  # kept for the file transfer that follows
        if only_text:
            w.send_message(transfer.ErrorMsg("transfer rejected").to_wire())
            raise TransferError("the sender offered a file, but --only-text was given")
        w.send_message(transfer.ErrorMsg("transfer rejected").to_wire())
        raise TransferError("receiving files arrives with the transit layer")
