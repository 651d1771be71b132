"""The seam between a transfer and whatever carries its records: :class:`Channel`.

A transfer needs very little from a connection: send a record, receive the next one, close
or drop it, and hear that it went. That is :class:`Channel`. Moving gigabytes fast needs more
(seal on a worker thread, hand sealed frames over, let a thread own a plain socket): that is
the optional :class:`Bulk` capability, which the data path asks for with
:meth:`Channel.bulk` instead of reaching into the connection. A channel that cannot offer it
(a reconnecting channel, a test double) returns None and the records go one at a time.

:class:`hilltop.transit.connection.TransitConnection` implements both today; the shape follows
httpcore's network stream (a handful of methods a protocol runs over), so a second kind of
channel plugs in here without the transfer engine changing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Channel(Protocol):
    """Encrypted records in order, both ways, between the two peers of one transfer."""

    description: str
    """How the channel got through (``direct tcp:…``, ``relay …``): shown to the user."""

    def send_record(self, plaintext: bytes) -> None:
        """Seal and queue one record; raises TransitError once the channel is gone."""

    def receive_record(self) -> Any:
        """An awaitable of the peer's next record; it fails with TransitError once the
        channel is gone (cancel it to give up the place in line)."""

    def close(self) -> Any:
        """Close after what was sent left; the awaitable fires once the channel is gone."""

    def abort(self) -> Any:
        """Drop the channel now, sending nothing more; fires once it is gone."""

    def when_closed(self) -> Any:
        """The "lost" notice: an awaitable that fires once the channel is gone, whoever
        ended it."""

    def bulk(self) -> Bulk | None:
        """The bulk capability, or None: records then go one by one."""


class Bulk(Protocol):
    """What the data path (:mod:`hilltop.transfer.datapath`) needs for its fast paths.

    The nonce counters live in :attr:`sealer` and :attr:`opener`, so ordinary records before
    and after the bulk continue the same sequence.
    """

    @property
    def sealer(self) -> Any:
        """Seals our records (:class:`hilltop.transit.records.RecordSealer`), one thread at a
        time, in record order."""

    @property
    def opener(self) -> Any:
        """Opens the peer's frames in order (:class:`hilltop.transit.records.RecordOpener`)."""

    def write_sealed(self, frame: bytes) -> None:
        """Send frames sealed with :attr:`sealer`, in sealing order."""

    def set_frame_receiver(self, on_frames: Callable[[list[Any]], None] | None,
                           on_lost: Callable[[Exception], None] | None) -> None:
        """Hand the peer's sealed frames to ``on_frames`` unopened (None: back to records)."""

    def set_frame_buffers(self, alloc: Callable[[int], bytearray]) -> None:
        """Where frames that span reads are gathered."""

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's producer interface
        """Stop reading from the peer (TCP pushes back)."""

    def resumeProducing(self) -> None:  # noqa: N802
        """Read from the peer again."""

    def registerProducer(self, producer: Any, streaming: bool) -> None:  # noqa: N802
        """A sender that is paused while the outgoing buffer is full."""

    def unregisterProducer(self) -> None:  # noqa: N802
        """The sender is done."""

    async def borrow_socket_for_sending(self) -> Any:
        """A plain socket a bulk thread may write sealed frames to, or None."""

    async def borrow_socket_for_receiving(self) -> tuple[Any, bytes] | None:
        """A plain socket a bulk thread may read, with the bytes that arrived undecoded, or
        None; :meth:`end_borrowing` after."""

    def end_borrowing(self) -> None:
        """The receiving thread is gone: the channel reads again."""
