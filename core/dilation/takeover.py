"""Path takeover: the Dilation leader leaves a relay for a direct path found later.

Pure (``now`` passed in, a deadline out; the Twisted shell :mod:`.shell` dials). When a
generation is won through a transit relay, the leader probes the follower's direct hints of
that generation on a schedule; once one answers, it drops the relay connection, and the
ordinary reconnect (``reconnect`` / ``reconnecting``, a new race in which direct dials start
2 s before relays) makes the direct path the next generation while L3 re-sends what was not
acknowledged.

Why a probe and then break-before-make: the Dilation protocol has no way to add a connection
to a live generation (official's follower stops its connector once a connection is chosen,
and answers a ``reconnect`` by dropping the one it has), so a new path can only come as a new
generation, and each costs a short stall and the unacknowledged window sent again. A probe is
a plain TCP connect to the follower's ``direct-tcp-v1`` hints: the follower's listener of
that generation is closed by then, so a refusal proves the path as well as an accept does,
while a path still blocked (a firewall, a NAT, an address of another network) drops the SYN
and the probe times out at no cost to the transfer. Only a probe that answered costs a
reconnect; if the relay wins that generation again (the answer came from another host), the
next probes wait longer (:data:`SWITCH_BACKOFF`).

A punched path (``tcp-punch``) has no such probe: behind NATs the follower's direct hints are
private addresses and its NAT drops a SYN nobody inside sent out, so a path opens only when
both sides dial at once. Between two hilltop peers the leader's probe therefore also asks the
follower (a hilltop side channel, :mod:`.punchover`) to punch back towards the leader's punch
hint while the leader punches towards the follower's: a punch that connects proves the path
as a probe answer does, and the same switch follows (both sides punch again in the next
race). The follower's part is :meth:`Takeover.asked`: it answers only while its own
generation is relayed, and only once at a time.
"""

from __future__ import annotations

import json
from enum import Enum, auto

from hilltop._transitions import move
from hilltop._values import value

PROBE_SCHEDULE: tuple[float, ...] = (2.0, 5.0, 10.0)
"""Seconds from the relay's win to the first probes: a path that opens soon after the start (a
firewall rule lifted, a NAT mapping that appears) is found within seconds."""
PROBE_EVERY = 30.0
"""Then one probe per interval: a few SYNs per interval cost nothing, and a transfer spends at
most this long on the relay after a direct path opened."""
PROBE_TIMEOUT = 2.0
"""A probe that got no answer (accept or refusal) within this time failed: a SYN the path drops
is retried by TCP only after 1 s, and a reachable peer on any usable network answers well
within it."""
PUNCH_TIMEOUT = 5.0
"""A probe that asked the follower to punch gives up after this long: the follower's dial starts
a mailbox round trip after ours, and a SYN that met a NAT before the peer's mapping existed is
retried by TCP 1 s and 3 s later."""
SWITCH_BACKOFF = 30.0
"""After a switch whose new generation went through the relay again, the next probe waits this
long, doubled for each further such switch, up to :data:`SWITCH_BACKOFF_MAX`: a false answer
(another host at a private address) must not cost a reconnect every interval."""
SWITCH_BACKOFF_MAX = 300.0


class Take(Enum):
    IDLE = auto()  # no connection, or one that is not relayed: nothing to look for
    WAITING = auto()  # relayed; the next probe is due at the deadline
    PROBING = auto()  # a probe is out; it fails at the deadline
    SWITCHING = auto()  # we dropped the relay connection; the next generation tells
    ANSWERING = auto()  # follower: punching back at the leader's request, until the deadline
    STOPPED = auto()


TAKE_MOVES: dict[tuple[Take, str], Take] = {
    (Take.IDLE, "relayed"): Take.WAITING,
    (Take.IDLE, "direct"): Take.IDLE,
    (Take.IDLE, "lost"): Take.IDLE,
    (Take.WAITING, "due"): Take.PROBING,
    (Take.WAITING, "lost"): Take.IDLE,
    (Take.PROBING, "unreachable"): Take.WAITING,
    (Take.PROBING, "reachable"): Take.SWITCHING,
    (Take.PROBING, "lost"): Take.IDLE,
    (Take.SWITCHING, "lost"): Take.SWITCHING,
    (Take.SWITCHING, "relayed"): Take.WAITING,
    (Take.SWITCHING, "direct"): Take.IDLE,
    (Take.IDLE, "asked"): Take.ANSWERING,
    (Take.ANSWERING, "punched"): Take.IDLE,
    (Take.ANSWERING, "lost"): Take.IDLE,
    **{(s, "stop"): Take.STOPPED for s in Take},
}


@value
class Probe:
    """Dial the follower's direct hints now; answer with :meth:`Takeover.probe_answered`.
    ``punch``: also ask the follower to punch and punch towards its punch hint."""

    punch: bool = False


@value
class Punch:
    """Follower: punch towards the leader's punch hint now (it asked); answer with
    :meth:`Takeover.probe_answered`. The leader decides what an answer means."""


@value
class CancelProbe:
    """The probe's deadline passed: stop its dials (it counts as unreachable)."""


@value
class Switch:
    """Drop the relay connection: the reconnect that follows races the direct path."""


TakeAction = Probe | Punch | CancelProbe | Switch


class Takeover:
    """The leader's search for a better path than the relay, and the follower's part in it
    (see the module docstring)."""

    def __init__(self, leader: bool = True) -> None:
        self.leader = leader
        self.state = Take.IDLE
        self._relayed = False  # the current generation runs through a relay
        self._punchable = False  # both sides have a punch hint: the probe punches too
        self._deadline: float | None = None
        self._probes = 0  # probes that failed since this relayed connection began
        self._failed_switches = 0
        self.switches = 0
        """Switches that ended on a direct path (for logs and tests)."""

    def next_deadline(self) -> float | None:
        return (self._deadline if self.state in (Take.WAITING, Take.PROBING, Take.ANSWERING)
                else None)

    def connected(self, now: float, relayed: bool, probe_targets: int,
                  punchable: bool = False) -> None:
        """A generation won: ``relayed`` through a transit relay, ``probe_targets`` direct
        hints of the follower's that a probe can dial, ``punchable`` if both sides may punch
        and the follower would punch back when asked (neither: nothing to look for)."""
        if self.state is Take.STOPPED:
            return
        self._relayed = relayed
        self._punchable = punchable
        if not self.leader:
            return  # the follower only answers (asked)
        switching = self.state is Take.SWITCHING
        if relayed and (probe_targets > 0 or punchable):
            if switching:
                self._failed_switches += 1
                wait = min(SWITCH_BACKOFF * 2 ** (self._failed_switches - 1),
                           SWITCH_BACKOFF_MAX)
            else:
                self._probes = 0
                wait = PROBE_SCHEDULE[0]
            self._move("relayed")
            self._deadline = now + wait
            return
        if switching and not relayed:
            self.switches += 1
            self._failed_switches = 0
        self._move("direct")  # or relayed with nothing to probe: the same, nothing to do
        self._deadline = None

    def lost(self) -> None:
        """The generation's connection ended (any reason, our own switch included)."""
        self._relayed = False
        if self.state is not Take.STOPPED:
            self._move("lost")
            if self.state is Take.IDLE:
                self._deadline = None

    def handle_timer(self, now: float) -> list[TakeAction]:
        deadline = self.next_deadline()
        if deadline is None or now < deadline:
            return []
        if self.state is Take.WAITING:
            self._move("due")
            self._deadline = now + (PUNCH_TIMEOUT if self._punchable else PROBE_TIMEOUT)
            return [Probe(punch=self._punchable)]
        if self.state is Take.ANSWERING:
            self._move("punched")
            self._deadline = None
            return [CancelProbe()]
        self._unreachable(now)
        return [CancelProbe()]

    def asked(self, now: float, punchable: bool) -> list[TakeAction]:
        """Follower: the leader asks us to punch back (its probe). Done only on a relayed
        generation where we have its punch hint and may punch, and once at a time: a request
        that finds us elsewhere (a new generation, a direct one) costs nothing."""
        if self.leader or self.state is not Take.IDLE or not self._relayed or not punchable:
            return []
        self._move("asked")
        self._deadline = now + PUNCH_TIMEOUT
        return [Punch()]

    def probe_answered(self, now: float, reachable: bool) -> list[TakeAction]:
        """The probe's dials ended: ``reachable`` if any connected or was refused."""
        if self.state is Take.ANSWERING:
            self._move("punched")  # the leader saw the same connection: it decides
            self._deadline = None
            return []
        if self.state is not Take.PROBING:
            return []  # late: the deadline passed or the connection went meanwhile
        if not reachable:
            self._unreachable(now)
            return []
        self._move("reachable")
        self._deadline = None
        return [Switch()]

    def stop(self) -> None:
        self._move("stop")
        self._deadline = None

    def _unreachable(self, now: float) -> None:
        self._move("unreachable")
        self._probes += 1
        wait = (PROBE_SCHEDULE[self._probes] if self._probes < len(PROBE_SCHEDULE)
                else PROBE_EVERY)
        if self._failed_switches:
            wait = max(wait, min(SWITCH_BACKOFF * 2 ** (self._failed_switches - 1),
                                 SWITCH_BACKOFF_MAX))
        self._deadline = now + wait

    def _move(self, event: str) -> None:
        self.state = move(TAKE_MOVES, self.state, event)


REQUEST_KEY = "hilltop-takeover"
"""The side channel (:mod:`.punchover`) of the leader's request: ``{"hilltop-takeover":
{"punch": N}}`` asks the follower to punch back during generation N."""


def punch_request(generation: int) -> bytes:
    return json.dumps({REQUEST_KEY: {"punch": generation}}, separators=(",", ":")).encode()


def parse_punch_request(data: bytes) -> int | None:
    """The generation a request names, or None for anything else (the peer's input: a
    malformed one is ignored, as a takeover is only ever an optimisation)."""
    try:
        msg = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    body = msg.get(REQUEST_KEY) if isinstance(msg, dict) else None
    generation = body.get("punch") if isinstance(body, dict) else None
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
        return None
    return generation
