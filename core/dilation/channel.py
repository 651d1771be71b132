"""A file transfer over Dilation: :class:`DilatedChannel`, a transfer
:class:`~hilltop.transit.channel.Channel` on one subchannel (``durable-v1``).

Decision: the channel is the transit record connection itself
(:class:`~hilltop.transit.connection.TransitConnection`) over a :class:`SubchannelStream`
instead of a TCP stream, so the records, their keys and cipher, the bulk frame path and the
engine are the very ones a transit transfer uses; only the bytes under them go through L3,
which re-sends what the peer did not acknowledge after a reconnect. Sealing the records again
inside Noise costs one more AES-GCM pass (0.12 s per GiB measured for ``aes256gcm-records``)
and buys not a line of new record code. No socket is lent: the bulk pump's fast path needs a
plain TCP socket, which a subchannel is not.

Memory: the sender reads the file only as fast as the peer acknowledges. The subchannel pauses
the data path's producer once :data:`hilltop.dilation.shell.PAUSE_ABOVE` bytes (8 MiB) wait
for the peer's ACK and resumes it below ``RESUME_BELOW``, so what the sender holds is that
bound plus the batches of sealed records already on their way to the subchannel, also while
no L2 connection exists (nothing is acknowledged then, so the producer stays paused).

The grace: while Dilation has no L2 connection the channel waits ``grace`` seconds for the
next generation (the first one too), then ends with :class:`ReconnectGraceExpired`, one line
that says so. The session lengthens the transfer's idle deadline by the same grace, so the
silence of a reconnect does not end the transfer first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.internet.protocol import Factory
from twisted.internet.protocol import Protocol as TwistedProtocol
from twisted.python.failure import Failure

from hilltop.errors import TransitError
from hilltop.streams import Delivery
from hilltop.transit.connection import TransitConnection
from hilltop.transit.records import Cipher
from hilltop.transit.runner import WinningStream

if TYPE_CHECKING:
    from hilltop.api import Wormhole
    from hilltop.dilation.shell import Dilator
    from hilltop.hookspecs import Role
    from hilltop.transit.options import TransitOptions

log = logging.getLogger(__name__)

SUBPROTOCOL = "hilltop-transfer-v1"
"""The subchannel a durable transfer runs on (the sender opens it, the receiver listens)."""
CLOSE_WAIT = 5.0
"""Seconds :meth:`SubchannelStream.close` waits for the peer's CLOSE before it counts the
subchannel as gone: a peer that already stopped its Dilation never answers."""
ABORT_WAIT = 2.0
"""The same for :meth:`SubchannelStream.abort`. Not zero: the L2 connection must stay up until
the peer has our CLOSE. Dropped at once, our socket answered the peer's next ACK with a reset,
and the relay then threw away the megabytes still queued before the CLOSE, so a receiver
whose sender was interrupted waited its whole grace (seen in
integration/test_faults_local.py's interrupt tests: 75 records never arrived)."""
PING_INTERVAL = 10.0
"""The leader's ping interval for a transfer's Dilation (official's default is 30 s): a path
that died without a word (a NAT that forgot its mapping) is dropped after two silent
intervals, so 20 s instead of a minute of the grace go by before the reconnect starts."""

OnPath = Callable[[str | None], None]
"""Told the new path's description after each (re)connection, None when it is lost."""


class ReconnectGraceExpired(TransitError):
    """Dilation found no new connection to the peer within the grace."""


class SubchannelStream(Delivery, TwistedProtocol):
    """A :class:`hilltop.streams.ByteStream` over one subchannel (the Twisted protocol its
    transport drives). Pausing pauses the subchannel, which stops reading the L2 connection
    (Dilation's inbound flow control), so what waits here is at most one read and one record
    (tests/core/dilation/test_dilation_flow.py); the peer backs up into its own window."""

    def __init__(self, reactor: Any, description: str = "dilation") -> None:
        super().__init__()
        self.description = description
        self._reactor = reactor
        self._paused = False
        self._held: list[bytes] = []
        self._close_call: Any = None
        self._close_wait: tuple[float, str] | None = None  # set once we sent our CLOSE
        self._carried = False  # no path is waited for: a new one came after our CLOSE, or abort
        self.path_up = True
        """Whether an L2 connection carries the subchannel (the channel tells): the peer's
        CLOSE cannot come while none does."""

    # Twisted side
    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        if self._paused or self._held:
            self._held.append(data)
        elif self._on_data is None:
            self._early.append(data)
        else:
            self._on_data(data)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]  # noqa: N802
        self.give_up("subchannel closed")

    # ByteStream side
    def write(self, data: bytes) -> None:
        if data and self.transport is not None and self._lost_reason is None:
            self.transport.write(data)

    def pause_reading(self) -> None:
        transport: Any = self.transport  # a SubchannelTransport: also a producer
        if not self._paused and transport is not None:
            transport.pauseProducing()
        self._paused = True

    def resume_reading(self) -> None:
        was_paused, self._paused = self._paused, False
        while self._held and not self._paused and self._on_data is not None:
            self._on_data(self._held.pop(0))
        transport: Any = self.transport
        if was_paused and not self._paused and transport is not None:
            transport.resumeProducing()

    def register_producer(self, producer: Any, streaming: bool) -> None:
        transport: Any = self.transport  # a SubchannelTransport: also a consumer
        if transport is not None:
            transport.registerProducer(producer, streaming)

    def unregister_producer(self) -> None:
        transport: Any = self.transport
        if transport is not None:
            transport.unregisterProducer()

    def close(self) -> None:
        self._close(CLOSE_WAIT, "closed")

    def abort(self) -> None:
        # a failed or interrupted transfer owes the peer nothing: no path is waited for
        self._carried = True
        self._close(ABORT_WAIT, "aborted")

    def _close(self, wait: float, why: str) -> None:
        """Send our CLOSE; the subchannel is gone when the peer's CLOSE comes back, or after
        ``wait`` seconds with a path (L3 has no half-close); see :meth:`path_changed`."""
        if self.transport is None or self._lost_reason is not None:
            return
        self.transport.loseConnection()
        if self._close_wait is None:
            self._close_wait = (wait, why)
            self._arm_close(self.path_up or self._carried)

    def path_changed(self, up: bool, owed: bool = True) -> None:
        """An L2 connection came (``up``) or went. Gone while the peer has not acknowledged
        all we sent (``owed``: a receiver's final ack, our CLOSE) and no new path came
        since our CLOSE, the wait for the peer's CLOSE stops until a path is back, and the
        channel's grace bounds the time without one: counted on, a receiver that closed as
        its path broke left before the next generation could carry its ack, and its sender
        failed after the grace (integration/test_tor_network.py's durable test, 2 runs in
        4). Otherwise the wait runs on: a peer that had a path to take our CLOSE may have
        ended for good (its last ACKs lost with its connection), and waiting the grace for
        it kept a receiver that had succeeded 2 minutes."""
        self.path_up = up
        if self._close_wait is not None and up:
            self._carried = True
        if up or (owed and not self._carried):
            self._arm_close(up)

    def _arm_close(self, up: bool) -> None:
        """The wait for the peer's CLOSE starts again with a path, stops without one."""
        if self._close_call is not None and self._close_call.active():
            self._close_call.cancel()
        self._close_call = None
        if up and self._close_wait is not None and self._lost_reason is None:
            wait, why = self._close_wait
            self._close_call = self._reactor.callLater(wait, self.give_up, why)

    def give_up(self, why: str) -> None:
        """The subchannel is gone for us (``why`` becomes the channel's error)."""
        if self._close_call is not None and self._close_call.active():
            self._close_call.cancel()
        if self._lost_reason is None:
            self._held.clear()
            self._ended(why)


class DilatedChannel(TransitConnection):
    """Transit records on a subchannel, with the reconnect grace (module docstring)."""

    def __init__(self, reactor: Any, stream: SubchannelStream, dilator: Dilator, role: Role,
                 transit_key: bytes, cipher: Cipher, *, grace: float,
                 on_path: OnPath | None = None) -> None:
        super().__init__(WinningStream(stream, b""), role, transit_key, cipher)
        self._reactor = reactor
        self._sub = stream
        self._dilator = dilator
        self._grace = grace
        self._on_path = on_path
        self._grace_call: Any = None
        self._reconnecting = False
        self.lost_because: ReconnectGraceExpired | None = None
        """Set once the grace expired: the transfer's error (not "connection closed")."""
        self.description = f"{dilator.description} (dilated)" if dilator.description \
            else "dilated"
        dilator.path_watchers.append(self._path)
        stream.when_closed().addCallback(lambda _: self._forget())
        if not dilator.is_connected():
            stream.path_changed(False)
            self._start_grace()

    def _path(self, description: str | None) -> None:
        l3 = self._dilator.l3
        self._sub.path_changed(description is not None, l3 is None or l3.owes_acks)
        if description is None:
            self._start_grace()
        else:
            if self._grace_call is not None and self._grace_call.active():
                self._grace_call.cancel()
            self._grace_call = None
            self.description = f"{description} (dilated)"
        if self._on_path is not None and self._reconnecting != (description is None):
            self._reconnecting = description is None  # told once per loss and per return
            self._on_path(description)

    def _start_grace(self) -> None:
        if self._grace_call is None:
            self._grace_call = self._reactor.callLater(self._grace, self._expired)

    def _expired(self) -> None:
        self._grace_call = None
        self._lost = self.lost_because = ReconnectGraceExpired(
            f"the connection to the peer was lost and did not come back within "
            f"{self._grace:g} s (--reconnect-grace)")
        self._sub.give_up(str(self._lost))

    def _forget(self) -> None:
        if self._grace_call is not None and self._grace_call.active():
            self._grace_call.cancel()
        self._grace_call = None
        if self._path in self._dilator.path_watchers:
            self._dilator.path_watchers.remove(self._path)


async def negotiated(w: Wormhole, options: TransitOptions) -> bool:
    """Both peers list ``durable-v1`` and both can dilate (our Wormhole was made with
    ``dilation=True`` and the peer's ``version`` lists a Dilation version we share), and
    :meth:`TransitOptions.may_be_durable` allows it."""
    from hilltop.rendezvous import capabilities

    if not options.may_be_durable():
        return False
    ours = capabilities.from_app_versions(w.app_versions).features
    peer = capabilities.from_app_versions(await w.get_peer_versions())
    if capabilities.DURABLE not in peer.shared_features(ours):
        return False
    return bool(await w.peer_can_dilate())


async def open_channel(reactor: Any, w: Wormhole, role: str, options: TransitOptions,
                       cipher: Cipher, on_path: OnPath | None = None) -> DilatedChannel:
    """Dilate ``w`` and return the transfer's channel: the sender opens the subchannel, the
    receiver waits for it (at most the grace, as for a reconnect)."""
    dilated = w.dilate(transit=options, ping_interval=PING_INTERVAL)
    dilator = await dilated.dilator()
    grace = options.reconnect_grace
    stream = SubchannelStream(reactor)
    first: defer.Deferred[Any]
    if role == "sender":
        first = dilated.when_dilated()
    else:
        first = defer.Deferred()

        class _Once(Factory):
            def buildProtocol(self, addr: Any) -> Any:  # noqa: N802
                if first.called:
                    return None  # one transfer per wormhole: a second open is refused
                reactor.callLater(0, first.callback, None)
                return stream

        await dilated.listener_for(SUBPROTOCOL).listen(_Once())
    timer = reactor.callLater(grace, lambda: first.called or first.errback(
        ReconnectGraceExpired(f"no Dilation connection to the peer within {grace:g} s "
                              "(--reconnect-grace)")))
    try:
        await first
    finally:
        if timer.active():
            timer.cancel()
    if role == "sender":
        opened: Any = await dilated.connector_for(SUBPROTOCOL).connect(
            Factory.forProtocol(lambda: stream))
        assert opened is stream
    side: Role = "sender" if role == "sender" else "receiver"
    return DilatedChannel(reactor, stream, dilator, side, w.transit_key(), cipher,
                          grace=grace, on_path=on_path)
