"""Who runs a transfer over Dilation (``durable-v1``): :func:`hilltop.transfer.session.durable`.

The sender chooses (only with ``--durable``) and its receiver follows unless ``--no-durable``;
an official peer, which never lists ``durable-v1``, gets transit. Every transport may carry a
durable transfer, ``--tor`` and ``webrtc`` too (they were refused once; issue 30).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import defer

from hilltop.cli.transitopts import dilation_wanted
from hilltop.rendezvous import capabilities
from hilltop.transfer import session
from hilltop.transit.options import TransitOptions

pytestmark = pytest.mark.skipif(capabilities.DURABLE not in capabilities.FEATURES,
                                reason="the dilate extra (noiseprotocol) is not installed")

HILLTOP = capabilities.default_advertisement("1.0")
OFFICIAL: dict[str, Any] = {}  # official 0.24 sends no app_versions of ours
WITHOUT_DURABLE = capabilities.advertisement(
    "0.9", [], [f for f in capabilities.FEATURES if f != capabilities.DURABLE])


@dataclass
class PeerSeen:
    """What :func:`session.durable` reads of a wormhole: our advertisement, the peer's, and
    whether both ``version`` messages carry a ``can-dilate`` we share."""

    app_versions: dict[str, Any]
    peer_versions: dict[str, Any]
    can_dilate: bool

    def get_peer_versions(self) -> defer.Deferred[dict[str, Any]]:
        return defer.succeed(self.peer_versions)

    def peer_can_dilate(self) -> defer.Deferred[bool]:
        return defer.succeed(self.can_dilate)


def both_hilltop(can_dilate: bool = True) -> Any:
    return PeerSeen(HILLTOP, HILLTOP, can_dilate)


@pytest.mark.parametrize(("sender", "dilated"), [
    (TransitOptions(durable=True), True),  # send --durable, both list durable-v1
    (TransitOptions(durable=None), False),  # no flag: transit
    (TransitOptions(durable=False), False),  # send --no-durable
    (TransitOptions(durable=True, tor=True), True),  # --tor carries it too
    (TransitOptions(durable=True, transports=["webrtc"]), True),  # and webrtc alone
    (TransitOptions(durable=True, transports=["direct-tcp", "webrtc"]), True),
])
@pytest_twisted.ensureDeferred
async def test_the_sender_chooses_only_when_asked(sender: TransitOptions, dilated: bool) -> None:
    chosen = await session.durable(both_hilltop(), sender, choosing=True)
    assert (chosen is sender) if dilated else chosen is None


@pytest.mark.parametrize(("receiver", "follows"), [
    (TransitOptions(durable=None), True),  # no flag: follows its sender
    (TransitOptions(durable=True), True),
    (TransitOptions(durable=False), False),  # receive --no-durable: transit
    (TransitOptions(tor=True), True),
    (TransitOptions(transports=["webrtc"]), True),
])
@pytest_twisted.ensureDeferred
async def test_a_receiver_follows_its_senders_choice(receiver: TransitOptions,
                                                     follows: bool) -> None:
    """Called once the sender's empty transit message said "dilated" (``Incoming.receive``)."""
    chosen = await session.durable(both_hilltop(), receiver)
    assert (chosen is receiver) if follows else chosen is None


@pytest.mark.parametrize("options", [
    TransitOptions(durable=None), TransitOptions(durable=True), TransitOptions(tor=True),
    TransitOptions(transports=["webrtc"])])
def test_a_run_that_may_be_durable_offers_dilation(options: TransitOptions) -> None:
    """The CLI makes its Wormhole able to dilate (``can-dilate`` in ``version``) then."""
    assert dilation_wanted(options)


def test_a_receiver_with_no_durable_does_not_offer_dilation() -> None:
    """``receive --no-durable``: no ``can-dilate``, so the sender sees a peer that cannot
    dilate and stays on transit (next test), whatever the receiver's features list."""
    assert not dilation_wanted(TransitOptions(durable=False))


@pytest.mark.parametrize(("peer", "can_dilate"), [
    (OFFICIAL, True),  # official 0.24 made with dilation=True: can-dilate, no durable-v1
    (OFFICIAL, False),
    (WITHOUT_DURABLE, True),  # a hilltop without the feature
    (HILLTOP, False),  # a hilltop run with --no-durable: durable-v1 but no can-dilate
])
@pytest.mark.parametrize("choosing", [True, False])
@pytest_twisted.ensureDeferred
async def test_a_peer_without_durable_or_dilation_gets_transit(
        peer: dict[str, Any], can_dilate: bool, choosing: bool) -> None:
    w: Any = PeerSeen(HILLTOP, peer, can_dilate)
    assert await session.durable(w, TransitOptions(durable=True), choosing=choosing) is None
