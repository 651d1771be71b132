"""hilltop's ``wormhole`` whose receive takes every byte of a file and then never sends the ack.

Usage: as ``wormhole``: ``never_acking_receiver.py [--relay-url ...] receive ... CODE``. Once
the data is in it prints ``NEVER_ACKING`` on stderr and waits for ever with the transit
connection open, so its sender (hilltop or official) is left waiting for the confirmation:
the window a test needs to interrupt a sender there, which with an honest receiver lasts
milliseconds. Kill it by its PID.
"""

from __future__ import annotations

import sys
from typing import Any

MARK = "NEVER_ACKING"


def never_ack() -> None:
    from twisted.internet import defer

    from hilltop.transfer import datapath

    real = datapath.receive

    async def receive(*args: Any, **kwargs: Any) -> None:
        await real(*args, **kwargs)
        print(MARK, file=sys.stderr, flush=True)
        await defer.Deferred()  # never fires: no ack, the connection stays open

    datapath.receive = receive  # type: ignore[assignment]


if __name__ == "__main__":
    from hilltop.cli.launch import main

    never_ack()
    main()
