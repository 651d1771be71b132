"""Which transit relays a session dials, through which endpoints, and when.

Both sides dial every relay either of them named (ours and the peer's ``relay-v1`` hints), so
that they meet wherever both can reach. Pure: the runner turns the plan into race candidates.

* **One relay, one hint.** Hints that share an endpoint (same host and port, or same WebSocket
  URL) are one relay: their endpoints are joined, each kept once. The official client and
  ours both name ``transit.magic-wormhole.io:4001`` by default, which is then dialled once.
* **Capped.** At most :data:`MAX_RELAYS_PER_SIDE` relays of the sender's list and as many of
  the receiver's, each with at most :data:`MAX_ENDPOINTS_PER_RELAY` endpoints. Why per side
  and not a total: two hilltop peers then pick the same relays (the sender's first three and
  the receiver's first three), whoever computes it, so a cap never leaves them at disjoint
  relays; and a peer cannot make us dial hundreds of hosts with a long hint list (each dial
  tells a stranger our address and the relay token). Why three: a dead or blocked relay still
  leaves two, and magic-wormhole.rs keeps two of each side, so three covers all of its.
* **Staggered.** The plan is an order: relays by priority (highest first), the sender's before
  the receiver's, each list in its owner's order; the first endpoint of every relay comes
  before any relay's second. Dial ``n`` starts ``n * STAGGER`` seconds after the first, like
  happy eyeballs: a dead or blackholed relay costs one stagger, not its 30 s dial timeout,
  and the live relays are not all hit at once. Both hilltop sides compute the same order
  (it depends on roles, not on who is "us"), so their first dials go to the same relay.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from hilltop._values import value
from hilltop.hints import relay_v1

MAX_RELAYS_PER_SIDE = 3
MAX_ENDPOINTS_PER_RELAY = 3
STAGGER = 1.0
"""Seconds between two relay dials (see the module docstring)."""


@value
class RelayDial:
    """One relay endpoint to dial (``hint`` holds exactly one), ``offset`` seconds after the
    first relay dial of the session."""

    hint: relay_v1.Hint
    offset: float


def merge(hints: Iterable[relay_v1.Hint]) -> list[relay_v1.Hint]:
    """One hint per relay, in first-seen order: hints sharing an endpoint are joined."""
    relays: list[relay_v1.Hint] = []
    for hint in hints:
        ids = {e.identity() for e in hint.endpoints}
        hits = [i for i, r in enumerate(relays) if ids & {e.identity() for e in r.endpoints}]
        if not hits:
            relays.append(relay_v1.Hint(_unique(hint.endpoints), hint.name))
            continue
        joined = [relays[i] for i in hits] + [hint]
        name = next((r.name for r in joined if r.name), None)
        relays[hits[0]] = relay_v1.Hint(_unique(e for r in joined for e in r.endpoints), name)
        for i in reversed(hits[1:]):
            del relays[i]
    return relays


def _unique(endpoints: Iterable[relay_v1.Endpoint]) -> tuple[relay_v1.Endpoint, ...]:
    kept: dict[tuple[str, ...], relay_v1.Endpoint] = {}
    for e in endpoints:
        kept.setdefault(e.identity(), e)
    return tuple(kept.values())


def plan(sender: Sequence[relay_v1.Hint], receiver: Sequence[relay_v1.Hint], *,
         per_side: int = MAX_RELAYS_PER_SIDE, per_relay: int = MAX_ENDPOINTS_PER_RELAY,
         stagger: float = STAGGER) -> list[RelayDial]:
    """The relay dials of one session, in order (see the module docstring)."""
    relays = merge(merge(sender)[:per_side] + merge(receiver)[:per_side])
    relays.sort(key=lambda r: -r.priority)  # stable: ties keep the sender-first order
    doors = [sorted(r.endpoints, key=lambda e: -e.priority)[:per_relay] for r in relays]
    dials: list[RelayDial] = []
    for rank in range(per_relay):
        for relay, eps in zip(relays, doors, strict=True):
            if rank < len(eps):
                dials.append(RelayDial(replace(relay, endpoints=(eps[rank],)),
                                       len(dials) * stagger))
    return dials
