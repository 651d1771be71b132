"""``wormhole send --lan`` / ``wormhole receive --lan``: transfers with no server at all.

The sender runs the official mailbox server in-process on its LAN addresses and announces it
over mDNS under the nameplate alone; the receiver looks that nameplate up, connects, and from
then on everything is the ordinary protocol (PAKE, hints, direct TCP) that ``send``/``receive``
already speak, so this module only sets the stage and hands over to them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hilltop import api
from hilltop.cli import output
from hilltop.cli.common import GlobalOptions
from hilltop.errors import (
    LocalError,
    RemoteError,
    ServerUnreachableError,
    WrongCodeError,
    WrongCodeOnLan,
)
from hilltop.rendezvous import codes
from hilltop.transit.options import TransitOptions

if TYPE_CHECKING:  # every command imports this module for suggest_lan(); LAN mode itself
    # (mDNS, the in-process mailbox, the transport names) is imported only when used
    from hilltop.lan.service import LanInterfaces, LanMailbox, Mdns

FIND_TIMEOUT = 60.0
"""How long ``receive --lan`` looks for the sender before giving up."""

ANNOUNCE_TRIES = 5


@contextlib.contextmanager
def suggest_lan(command: str, enabled: bool = True) -> Iterator[None]:
    """Add the way out to the mailbox-unreachable error: on a LAN no server is needed."""
    try:
        yield
    except ServerUnreachableError as err:
        if not enabled:
            raise
        raise ServerUnreachableError(
            f"{err}; if the other computer is on this local network, no server is needed: "
            f"use 'wormhole {command} --lan' on both sides") from None


def lan_transit(options: TransitOptions, interfaces: LanInterfaces, interface: str | None,
                default_helper: bool) -> TransitOptions:
    """LAN mode uses no transit relay unless one was asked for, and only the chosen interface."""
    helpers = [] if default_helper else list(options.transit_helpers)
    from hilltop.lan.settings import LanSettings

    settings = options.settings.updated(LanSettings, interface=interface)
    local = list(interfaces.addresses) if interface else options.local_addresses
    if interface:
        from hilltop.transports.direct_tcp import DirectTCPSettings

        settings = settings.updated(DirectTCPSettings, listen_on=tuple(interfaces.addresses))
    return dataclasses.replace(options, transit_helpers=helpers, local_addresses=local,
                               settings=settings)


# --- send -------------------------------------------------------------------------------------
async def _announce(mdns: Mdns, mailbox: LanMailbox, code: str | None,
                    code_length: int) -> tuple[str, str]:
    """Claim a nameplate on the LAN by announcing it; returns (code, nameplate)."""
    from hilltop.lan import wire
    from hilltop.lan.service import NameTaken, aio

    tried: list[str] = []
    for _ in range(ANNOUNCE_TRIES):
        nameplate = (codes.parse_code(code).nameplate if code is not None
                     else wire.pick_nameplate(os.urandom, tried))
        mailbox.serve_only(nameplate)  # before announcing: a receiver may be looking already
        try:
            await aio(mdns.announce(wire.mailbox_service_name(nameplate), mailbox.port,
                                    mailbox.addresses, wire.mailbox_txt(nameplate),
                                    probe=True))
        except NameTaken:
            if code is not None:
                raise LocalError(f"nameplate {nameplate} is already announced on this LAN; "
                                 "choose another code") from None
            tried.append(nameplate)
            continue
        return code or wire.make_code(nameplate, code_length, os.urandom), nameplate
    raise RemoteError("could not find a free nameplate on this LAN; try again")


async def send_lan(reactor: Any, opts: GlobalOptions, interfaces: LanInterfaces,
                   send_payload: Any, code: str | None, code_length: int) -> int:
    """Start the mailbox, announce, hand over to ``send_payload(w, code)``; always clean up.

    The announcement is withdrawn (mDNS goodbye) and the mailbox stopped whether the transfer
    worked, failed, or someone tried a wrong code.
    """
    from hilltop.lan.service import LanMailbox, Mdns, aio

    mailbox = LanMailbox(reactor, interfaces.addresses, notice=output.status)
    urls = mailbox.start()
    mdns: Mdns | None = None
    try:
        mdns = await aio(Mdns.open(interfaces.zeroconf))
        code, nameplate = await _announce(mdns, mailbox, code, code_length)
        output.status(f"LAN mailbox: {urls[0]} (announced as nameplate {nameplate} "
                      f"on {', '.join(interfaces.names)})")
        output.status(f"Clients without --lan can use: wormhole --relay-url {urls[0]} receive")
        w = api.Wormhole(opts.appid, urls[0], reactor=reactor)
        from hilltop.cli.common import close_quietly

        try:
            return await send_payload(w, code)
        except WrongCodeError:
            raise WrongCodeOnLan(nameplate) from None
        finally:
            await close_quietly(w)
    finally:
        if mdns is not None:
            await aio(mdns.close())
        await mailbox.stop()


# --- receive ----------------------------------------------------------------------------------
async def _reachable_url(reactor: Any, addresses: list[str], port: int, path: str) -> str:
    """The first of the sender's addresses that accepts a TCP connection (IPv4 first)."""
    from hilltop.lan import wire
    from hilltop.streams import dial_tcp

    for address in addresses:
        try:
            stream = await dial_tcp(reactor, address, port, "lan mailbox probe", timeout=2.0)
        except Exception:  # noqa: BLE001 - try the next address
            continue
        stream.close()
        return wire.mailbox_url(address, port, path)
    raise ServerUnreachableError(
        f"found the sender on the LAN, but none of its addresses answered "
        f"({', '.join(addresses) or 'it gave none we can use'})")


async def find_sender(reactor: Any, interfaces: LanInterfaces, code: str,
                      timeout: float = FIND_TIMEOUT) -> tuple[str, float]:
    """Look the code's nameplate up on the LAN; returns (mailbox URL, time it was found)."""
    from hilltop.lan import wire
    from hilltop.lan.service import Mdns, aio, found_addresses

    nameplate = codes.parse_code(code).nameplate
    output.status(f"Looking for nameplate {nameplate} on the LAN "
                  f"({', '.join(interfaces.names)})...")
    mdns = await aio(Mdns.open(interfaces.zeroconf))
    started = reactor.seconds()
    try:
        try:
            info = await aio(mdns.find(wire.mailbox_service_name(nameplate), timeout))
        except RemoteError:
            raise RemoteError(f"no sender announces nameplate {nameplate} on this LAN "
                              f"(looked for {timeout:g} s); is 'wormhole send --lan' running "
                              "on the same network?") from None
        found = reactor.seconds()
        txt = wire.parse_mailbox_txt(info.properties, nameplate)
        url = await _reachable_url(reactor, found_addresses(info), info.port, txt.path)
    finally:
        await aio(mdns.close())
    output.status(f"Found the sender's mailbox at {url} after {found - started:.2f} s")
    return url, found


async def announce_connected(reactor: Any, w: api.Wormhole, found: float) -> None:
    await w.get_welcome()
    output.status(f"Connected to the sender's mailbox "
                  f"{reactor.seconds() - found:.3f} s after finding it")
