"""One hierarchy for every failure hilltop reports.

The split follows h11: a *Local* error means our own caller misused us (bad code typed, a file
that cannot be read); a *Remote* error means something outside broke the protocol (the server,
the peer, a socket). The CLI turns any :class:`HilltopError` into one line on stderr and a
non-zero exit, so every message here is written for a person, not a programmer.
"""

from __future__ import annotations


class HilltopError(Exception):
    """Base of every error hilltop raises on purpose; ``str()`` is the user-facing line."""


class LocalError(HilltopError):
    """The caller asked for something that cannot be done (bad input, misuse)."""


class RemoteError(HilltopError):
    """A server, a peer or the network did something wrong or unexpected."""


class CodeFormatError(LocalError):
    """A wormhole code does not match NAMEPLATE-WORD[-WORD...]."""


class WrongCodeError(RemoteError):
    """The peer's first encrypted message did not decrypt: wrong code, or a guessing attacker."""

    def __init__(self, detail: str = "") -> None:
        text = "wrong code (or someone tried to guess it): key confirmation failed"
        super().__init__(f"{text} ({detail})" if detail else text)


class ServerError(RemoteError):
    """The mailbox server sent ``error`` or a welcome with an ``error`` field."""


class UnwelcomeError(ServerError):
    """The server refused us in its welcome message."""


class ServerUnreachableError(RemoteError):
    """The first connection to the mailbox server failed."""


class ProtocolError(RemoteError):
    """A message broke the wire protocol (garbage JSON, bad UTF-8, oversized frame...)."""


class TransferError(RemoteError):
    """The peer abandoned the transfer or sent an ``error`` message."""


class PeerRejectedError(TransferError):
    """The peer said no: its v1 ``error`` message refused or abandoned the transfer (its user
    declined, failed the verifier check, or its client refused what we offered).

    A class of its own so scripts can tell "they said no" from "it broke" by the exit status
    (``hilltop.cli.exitcodes``) without reading the message."""


class TransitError(RemoteError):
    """No transit connection could be made, or the one we had failed."""


class StalledError(TransitError):
    """The transit connection stayed open but no byte moved for the idle time-out
    (``TransitOptions.idle_timeout``): a peer that stopped sending or reading without closing
    (frozen, unplugged, or a middlebox that dropped the flow) would otherwise be waited for
    forever, as official 0.24 does."""


class DialError(TransitError):
    """No transport could even start dialling a hint: each one that claims its type declined,
    raised or hung. The race counts it as that attempt's failure, like a refused connection."""


class SilentPeerError(TransferError):
    """The peer confirmed the key, then sent nothing for the idle time-out where its next
    message comes without anyone's say (a sender's offer).

    The mailbox server does not tell one side that the other closed its mailbox: a
    wormhole-william sender that gave up (its transit relay refused it) left our receiver
    waiting until it was killed. Silence is all there is to notice."""


class BadRecordError(ProtocolError):
    """A transit record failed to decrypt or carried an unexpected nonce."""


class UnsafeOfferError(ProtocolError):
    """An offer names something we will not create (a several-files entry that leaves its
    folder, or clashes with another): refused before we answer. Unlike other broken messages
    it exits as a refusal (status 5), as an unsafe file name (:class:`RejectedError`) does:
    nothing broke, we said no to what the peer asked for."""


class RejectedError(LocalError):
    """We declined a transfer (user said no, no space, target exists, unsafe names)."""


class LonelyError(RemoteError):
    """We gave up waiting for a peer."""


class UnknownOfferError(ProtocolError):
    """The peer offered something we cannot receive; ``reply`` is the v1 ``error`` text to answer.

    Official receivers answer ``"unknown offer type"`` or ``"unknown mode"`` (a directory mode that
    is not a zipfile); keeping that exact text lets the peer's user see why the transfer stopped.
    """

    def __init__(self, message: str, reply: str = "unknown offer type") -> None:
        super().__init__(message)
        self.reply = reply


class UnsendableError(LocalError):
    """A path we were asked to send cannot be read or is not a file or directory."""


class DiskFullError(LocalError):
    """The disk filled up while we were writing a received transfer (partial data was removed)."""


class OutOfFileDescriptors(LocalError):
    """This process (EMFILE) or the whole system (ENFILE) has no file descriptor left: a limit
    the user can raise, not a bug (a flood of connections under ``ulimit -n 256`` met it)."""


class NotFoundOnLan(RemoteError):
    """Nobody on the LAN answered for the service we looked for."""


class NameTaken(RemoteError):
    """Another host on the LAN already announces this name (mDNS probing saw it)."""


class WormholeClosed(LocalError):
    """The wormhole was closed before the thing waited for arrived."""

    def __init__(self) -> None:
        super().__init__("the wormhole was closed")


class ZipFormatError(ProtocolError):
    """The stream is not a zip this reader can unpack (or it was damaged on purpose)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"the received folder is not a usable zip archive ({why})")


class MalformedHintError(ProtocolError):
    """A peer's hint of a known type is missing a field or has one of the wrong type."""


class WrongCodeOnLan(WrongCodeError):
    """The one guess this session allowed was wrong; the sender stops and says so."""

    def __init__(self, nameplate: str) -> None:
        RemoteError.__init__(
            self,
            f"someone tried nameplate {nameplate} with a wrong code, so this session is over "
            "and nothing was sent (start 'wormhole send --lan' again for a new code)")


class IllegalTransition(RuntimeError):
    """A state machine was asked for a move its transition table does not have.

    Deliberately not a :class:`HilltopError`: it is a bug in hilltop, not a person's mistake or
    a peer's, so the CLI must report it as one (with the traceback) instead of a plain line.
    """

    def __init__(self, state: object, event: str) -> None:
        super().__init__(f"illegal transition: {event!r} in {state}")
        self.state = state
        self.event = event
