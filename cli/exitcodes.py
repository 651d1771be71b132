"""The one table from how a command ended to its exit status and its ``--json`` error code.

Why a table of our own: official 0.24 exits 1 for every failure, so a script cannot tell
"the peer said no" from "the network broke" without parsing English. Each error class in
:mod:`hilltop.errors` maps to a coarse *status* (what a script branches on) and a fine
*code* (the ``error`` event's ``code`` field, for logs and finer decisions). Both are part of
the interface: a number or code here never changes meaning once released (README, "Exit
status", and docs/json-events.md list them). The most specific class wins, so a new error
class falls back to its parent's entry rather than to a generic one.
"""

from __future__ import annotations

import enum

from hilltop import errors
from hilltop._values import value


class ExitStatus(enum.IntEnum):
    """Exit statuses of every ``wormhole`` command, in ``--json`` mode as well."""

    SUCCESS = 0
    FAILED = 1  # the transfer failed: network, server, peer broke the protocol, local I/O
    USAGE = 2  # the command line was wrong (click's own status for usage errors)
    WRONG_CODE = 3  # key confirmation failed: a mistyped code (or someone guessing it)
    PEER_REJECTED = 4  # the peer declined or abandoned the transfer
    DECLINED = 5  # we declined: the user said no, or the offer was refused as unsafe
    INTERRUPTED = 130  # SIGINT or SIGTERM (128 + SIGINT, as shells report Ctrl-C)


@value
class Outcome:
    """How an error ends a command: its exit status and its stable ``--json`` code."""

    status: ExitStatus
    code: str  # stable, lower_snake_case


_TABLE: tuple[tuple[type[BaseException], Outcome], ...] = (
    # most specific first: the first class the error is an instance of decides
    (errors.WrongCodeOnLan, Outcome(ExitStatus.WRONG_CODE, "wrong_code")),
    (errors.WrongCodeError, Outcome(ExitStatus.WRONG_CODE, "wrong_code")),
    (errors.PeerRejectedError, Outcome(ExitStatus.PEER_REJECTED, "peer_rejected")),
    (errors.RejectedError, Outcome(ExitStatus.DECLINED, "declined")),
    (errors.UnsafeOfferError, Outcome(ExitStatus.DECLINED, "declined")),
    (errors.CodeFormatError, Outcome(ExitStatus.USAGE, "bad_code")),
    (errors.UnsendableError, Outcome(ExitStatus.FAILED, "unsendable")),
    (errors.DiskFullError, Outcome(ExitStatus.FAILED, "disk_full")),
    (errors.WormholeClosed, Outcome(ExitStatus.FAILED, "closed")),
    (errors.UnwelcomeError, Outcome(ExitStatus.FAILED, "server_refused")),
    (errors.ServerError, Outcome(ExitStatus.FAILED, "server_error")),
    (errors.ServerUnreachableError, Outcome(ExitStatus.FAILED, "server_unreachable")),
    (errors.LonelyError, Outcome(ExitStatus.FAILED, "lonely")),
    (errors.TransitError, Outcome(ExitStatus.FAILED, "transit_failed")),
    (errors.TransferError, Outcome(ExitStatus.FAILED, "transfer_failed")),
    (errors.ProtocolError, Outcome(ExitStatus.FAILED, "protocol_error")),
    (errors.NotFoundOnLan, Outcome(ExitStatus.FAILED, "not_found_on_lan")),
    (errors.NameTaken, Outcome(ExitStatus.FAILED, "name_taken")),
    (errors.LocalError, Outcome(ExitStatus.FAILED, "local_error")),
    (errors.RemoteError, Outcome(ExitStatus.FAILED, "remote_error")),
    (errors.HilltopError, Outcome(ExitStatus.FAILED, "failed")),
)

USAGE = Outcome(ExitStatus.USAGE, "usage")
INTERRUPTED = Outcome(ExitStatus.INTERRUPTED, "interrupted")
BUG = Outcome(ExitStatus.FAILED, "bug")
"""Anything that is not a :class:`~hilltop.errors.HilltopError` is a bug in hilltop."""


def outcome_of(error: BaseException) -> Outcome:
    """The status and code for ``error``: its own class's entry, else its nearest parent's."""
    for cls, outcome in _TABLE:
        if isinstance(error, cls):
            return outcome
    return BUG


def all_codes() -> dict[str, ExitStatus]:
    """Every error code and its status (the docs and the JSON schema list exactly these)."""
    codes = {o.code: o.status for _, o in _TABLE}
    for extra in (USAGE, INTERRUPTED, BUG):
        codes[extra.code] = extra.status
    return codes
