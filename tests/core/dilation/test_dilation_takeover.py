"""Path takeover: a leader on a relayed generation probes the follower's direct hints and, once
one answers, drops the relay so the next generation races the direct path.

Pure half: :class:`hilltop.dilation.takeover.Takeover` (the schedule, the probe deadline, the
backoff after a switch that found the relay again). Shell half: a real
:class:`hilltop.dilation.shell.Dilator` on a Clock whose races are fakes that win through a
relay or directly, with a fake prober.
"""

from __future__ import annotations

from typing import Any

import pytest
from dilation_race import InstantRace
from twisted.internet import defer
from twisted.internet.task import Clock

from hilltop.dilation import takeover as tk
from hilltop.dilation import wire
from hilltop.dilation.shell import NO_HINTS_START, Dilator

# -- the pure half ---------------------------------------------------------------------------------


def probe_times(t: tk.Takeover, start: float, until: float) -> list[float]:
    """When the engine asks for probes if none is ever answered (each times out)."""
    asked = []
    now = start
    while (deadline := t.next_deadline()) is not None and deadline <= until:
        now = deadline
        for action in t.handle_timer(now):
            if isinstance(action, tk.Probe):
                asked.append(now)
    return asked


def test_a_relayed_generation_is_probed_on_the_schedule() -> None:
    t = tk.Takeover()
    t.connected(100.0, relayed=True, probe_targets=2)
    got = probe_times(t, 100.0, 200.0)
    # 2 s after the win; then 5, 10, 30, 30 s after each probe's 2 s time-out
    to = tk.PROBE_TIMEOUT
    expected = [102.0]
    for wait in (5.0, 10.0, 30.0, 30.0):
        expected.append(expected[-1] + to + wait)
    assert got == pytest.approx(expected[:len(got)])
    assert len(got) == 5


@pytest.mark.parametrize(("relayed", "targets"), [(False, 3), (True, 0)])
def test_nothing_to_look_for(relayed: bool, targets: int) -> None:
    """A direct generation, or a relayed one whose follower gave no direct hint."""
    t = tk.Takeover()
    t.connected(0.0, relayed=relayed, probe_targets=targets)
    assert t.state is tk.Take.IDLE and t.next_deadline() is None


def test_an_answer_switches_and_a_direct_generation_ends_the_search() -> None:
    t = tk.Takeover()
    t.connected(0.0, relayed=True, probe_targets=1)
    assert t.handle_timer(1.9) == []
    assert t.handle_timer(2.0) == [tk.Probe()]
    assert t.next_deadline() == 2.0 + tk.PROBE_TIMEOUT  # the probe has a deadline
    assert t.probe_answered(2.3, reachable=True) == [tk.Switch()]
    assert t.state is tk.Take.SWITCHING and t.next_deadline() is None
    t.lost()  # our own drop
    assert t.state is tk.Take.SWITCHING
    t.connected(3.5, relayed=False, probe_targets=1)
    assert t.state is tk.Take.IDLE and t.switches == 1
    assert t.next_deadline() is None


def test_an_unanswered_probe_times_out_and_a_late_answer_is_ignored() -> None:
    t = tk.Takeover()
    t.connected(0.0, relayed=True, probe_targets=1)
    t.handle_timer(2.0)
    assert t.handle_timer(4.0) == [tk.CancelProbe()]
    assert t.state is tk.Take.WAITING and t.next_deadline() == 4.0 + 5.0
    assert t.probe_answered(4.1, reachable=True) == []  # too late: no switch
    assert t.probe_answered(4.1, reachable=False) == []


def test_a_refused_probe_waits_for_the_next_one() -> None:
    t = tk.Takeover()
    t.connected(0.0, relayed=True, probe_targets=1)
    t.handle_timer(2.0)
    assert t.probe_answered(2.1, reachable=False) == []
    assert t.next_deadline() == pytest.approx(7.1)


def test_a_switch_that_finds_the_relay_again_backs_off() -> None:
    """A false answer (another host at a private address) must not cost a reconnect per
    interval: 30 s, then 60 s, ... up to the cap."""
    t = tk.Takeover()
    now = 0.0
    t.connected(now, relayed=True, probe_targets=1)
    waits = []
    for _ in range(6):
        now = t.next_deadline() or 0.0
        assert t.handle_timer(now) == [tk.Probe()]
        assert t.probe_answered(now, reachable=True) == [tk.Switch()]
        t.lost()
        t.connected(now, relayed=True, probe_targets=1)
        waits.append((t.next_deadline() or 0.0) - now)
    assert waits == [30.0, 60.0, 120.0, 240.0, 300.0, 300.0]
    # and an unanswered probe in between keeps that pace
    now = t.next_deadline() or 0.0
    t.handle_timer(now)
    t.probe_answered(now, reachable=False)
    assert (t.next_deadline() or 0.0) - now == tk.SWITCH_BACKOFF_MAX


def test_a_lost_connection_stops_the_search_until_the_next_generation() -> None:
    t = tk.Takeover()
    t.connected(0.0, relayed=True, probe_targets=1)
    t.handle_timer(2.0)
    t.lost()
    assert t.state is tk.Take.IDLE and t.next_deadline() is None
    assert t.probe_answered(2.5, reachable=True) == []
    t.connected(10.0, relayed=True, probe_targets=1)  # a new relayed generation: from the start
    assert t.next_deadline() == 12.0
    t.stop()
    assert t.next_deadline() is None
    t.connected(20.0, relayed=True, probe_targets=1)
    assert t.state is tk.Take.STOPPED


def test_a_punchable_relayed_generation_is_probed_with_a_punch() -> None:
    """Behind NATs the follower's direct hints are private: only a punch (both sides dial at
    once) can answer, so a relayed generation with punch hints on both sides is probed even
    with no direct target, with the punch's longer deadline."""
    t = tk.Takeover()
    t.connected(0.0, relayed=True, probe_targets=0, punchable=True)
    assert t.state is tk.Take.WAITING
    assert t.handle_timer(2.0) == [tk.Probe(punch=True)]
    assert t.next_deadline() == 2.0 + tk.PUNCH_TIMEOUT
    assert t.probe_answered(3.0, reachable=True) == [tk.Switch()]
    t.lost()
    t.connected(4.0, relayed=False, probe_targets=0, punchable=True)
    assert t.state is tk.Take.IDLE and t.switches == 1


def test_a_punch_probe_that_times_out_waits_for_the_schedule() -> None:
    t = tk.Takeover()
    t.connected(0.0, relayed=True, probe_targets=2, punchable=True)
    t.handle_timer(2.0)
    assert t.handle_timer(2.0 + tk.PUNCH_TIMEOUT) == [tk.CancelProbe()]
    assert t.next_deadline() == pytest.approx(2.0 + tk.PUNCH_TIMEOUT + 5.0)


def test_the_follower_answers_a_request_only_on_a_relayed_generation() -> None:
    t = tk.Takeover(leader=False)
    t.connected(0.0, relayed=True, probe_targets=3, punchable=True)
    assert t.state is tk.Take.IDLE and t.next_deadline() is None  # a follower never probes
    assert t.asked(1.0, punchable=False) == []  # no punch hint of the leader's: nothing
    assert t.asked(1.0, punchable=True) == [tk.Punch()]
    assert t.state is tk.Take.ANSWERING and t.next_deadline() == 1.0 + tk.PUNCH_TIMEOUT
    assert t.asked(1.5, punchable=True) == []  # once at a time
    assert t.probe_answered(2.0, reachable=True) == []  # the leader decides, not us
    assert t.state is tk.Take.IDLE
    assert t.asked(3.0, punchable=True) == [tk.Punch()]
    assert t.handle_timer(3.0 + tk.PUNCH_TIMEOUT) == [tk.CancelProbe()]  # gave up
    assert t.state is tk.Take.IDLE
    assert t.asked(9.0, punchable=True) == [tk.Punch()]
    t.lost()  # the generation went: the answer goes with it
    assert t.state is tk.Take.IDLE and t.next_deadline() is None
    assert t.asked(10.0, punchable=True) == []  # no generation: nothing
    t.connected(11.0, relayed=False, probe_targets=0, punchable=True)
    assert t.asked(12.0, punchable=True) == []  # a direct generation: nothing to find


def test_a_leader_ignores_requests() -> None:
    t = tk.Takeover()
    t.connected(0.0, relayed=True, probe_targets=0, punchable=True)
    assert t.asked(1.0, punchable=True) == []


@pytest.mark.parametrize("data", [b"", b"[]", b'{"hilltop-takeover": 3}',
                                  b'{"hilltop-takeover": {"punch": "1"}}',
                                  b'{"hilltop-takeover": {"punch": -1}}',
                                  b'{"hilltop-takeover": {"punch": true}}', b"\xff"])
def test_a_malformed_request_is_ignored(data: bytes) -> None:
    assert tk.parse_punch_request(data) is None


def test_a_request_round_trips() -> None:
    assert tk.parse_punch_request(tk.punch_request(7)) == 7


# -- the shell -------------------------------------------------------------------------------------
class Codec:
    def encode(self, _rec: Any) -> bytes:
        return b"r"

    def feed(self, _data: bytes) -> list[Any]:
        return []


class Stream:
    def __init__(self, description: str) -> None:
        self.description = description
        self.on_lost: Any = None
        self.aborted = False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def write(self, data: bytes) -> None:
        pass

    def abort(self) -> None:
        self.aborted = True
        self.on_lost("aborted")

    def close(self) -> None:
        self.abort()

    def when_closed(self) -> defer.Deferred[None]:
        return defer.succeed(None)


class Won:
    def __init__(self, description: str, via_relay: bool) -> None:
        self.stream = Stream(description)
        self.description = description
        self.shake = self
        self.via_relay = via_relay

    def codec(self) -> Codec:
        return Codec()

    def hand_over(self, on_data: Any, on_lost: Any) -> None:
        self.stream.on_lost = on_lost


Race = InstantRace


class Prober:
    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.calls: list[list[tuple[str, int]]] = []

    def __call__(self, targets: list[tuple[str, int]], timeout: float) -> defer.Deferred[bool]:
        self.calls.append(list(targets))
        return defer.succeed(self.answers.pop(0))


HINTS = [{"type": "direct-tcp-v1", "hostname": "198.19.0.5", "port": 4242, "priority": 0.0},
         {"type": "relay-v1", "hints": [{"type": "direct-tcp-v1", "hostname": "198.19.0.1",
                                         "port": 4001}]}]


def dilated(leader: bool, wins: list[Won], prober: Prober) -> tuple[Clock, Dilator, list[Any]]:
    clock = Clock()
    sent: list[Any] = []
    races = iter(wins)
    dilator = Dilator(clock, lambda data: sent.append(wire.parse(data)), bytes(32), "ged",
                      lambda *_a: Race(next(races)), side=("ff" if leader else "11") * 8,
                      prober=prober)
    dilator.got_message(wire.encode(wire.Please(("00" if leader else "ee") * 8)))
    dilator.got_message(wire.encode(wire.ConnectionHints(HINTS)))
    clock.advance(NO_HINTS_START)
    return clock, dilator, sent


def test_the_leader_leaves_the_relay_once_a_probe_answers() -> None:
    relay, direct = Won("relay tcp:198.19.0.1:4001", True), Won("direct-tcp 198.19.0.5", False)
    prober = Prober([False, True])
    clock, dilator, sent = dilated(True, [relay, direct], prober)
    paths: list[str | None] = []
    dilator.path_watchers.append(paths.append)
    assert dilator.description == relay.description
    clock.advance(2.0)
    assert prober.calls == [[("198.19.0.5", 4242)]]  # the direct hint only, not the relay's
    assert not relay.stream.aborted  # no answer: stay
    clock.advance(5.0)
    assert len(prober.calls) == 2
    assert relay.stream.aborted  # answered: the relay connection goes ...
    assert wire.Reconnect() in sent  # ... through the ordinary reconnect
    dilator.got_message(wire.encode(wire.Reconnecting()))
    dilator.got_message(wire.encode(wire.ConnectionHints(HINTS)))
    clock.advance(NO_HINTS_START)
    assert dilator.description == direct.description and dilator.generation_count == 2
    assert paths == [None, direct.description]
    clock.advance(55.0)
    assert len(prober.calls) == 2  # on a direct path nothing more is probed
    dilator.stop()


def test_the_follower_never_probes() -> None:
    """Only the leader may start a generation (the protocol's ``reconnect``)."""
    relay = Won("relay", True)
    prober = Prober([True] * 10)
    clock, dilator, _sent = dilated(False, [relay], prober)
    clock.advance(600.0)
    assert prober.calls == [] and not relay.stream.aborted
    dilator.stop()


def test_a_direct_generation_is_not_probed() -> None:
    direct = Won("direct", False)
    prober = Prober([True] * 10)
    clock, dilator, _sent = dilated(True, [direct], prober)
    clock.advance(55.0)  # past four probes' times, short of the ping time-out (60 s)
    assert prober.calls == [] and not direct.stream.aborted
    dilator.stop()


def test_hints_that_came_before_ours_were_published_are_raced_after_the_gather() -> None:
    """A reconnect: the follower sends its hints right after ``reconnecting``, maybe before
    our listeners are up. The race then starts :data:`HINT_GATHER` after ours go out, not
    :data:`NO_HINTS_START` (a 5 s stall in every switch)."""
    from hilltop.dilation.shell import HINT_GATHER

    clock = Clock()
    ours: defer.Deferred[list[Any]] = defer.Deferred()
    won = Won("direct", False)

    class SlowRace(Race):
        def our_hints(self) -> defer.Deferred[list[Any]]:
            return ours

    dilator = Dilator(clock, lambda _data: None, bytes(32), "ged",
                      lambda *_a: SlowRace(won), side="ff" * 8)
    dilator.got_message(wire.encode(wire.Please("00" * 8)))
    dilator.got_message(wire.encode(wire.ConnectionHints(HINTS)))
    clock.advance(0.2)
    ours.callback([])  # our listeners are up only now
    clock.advance(HINT_GATHER)
    assert dilator.generation_count == 1
    dilator.stop()


# -- a punched path (hilltop peers, hilltop.dilation.punchover) ------------------------------------
PUNCH_HINTS = [{"type": "direct-tcp-v1", "hostname": "198.18.2.10", "port": 4242, "priority": 0.0},
               {"type": "tcp-punch-v1", "hostname": "198.19.0.3", "port": 5151,
                "priority": 0.0}]


class PunchRace(Race):
    """Our hints include a punch hint, as the ``tcp-punch`` transport gives behind a NAT."""

    def our_hints(self) -> defer.Deferred[list[Any]]:
        from hilltop.hints import tcp_punch_v1

        return defer.succeed([tcp_punch_v1.Hint("198.19.0.2", 5050, 0.0)])


class FakePunchover:
    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.asked: list[int] = []
        self.dials: list[tuple[str, int]] = []
        self.on_request: Any = None

    def listen(self, on_request: Any) -> None:
        self.on_request = on_request

    def ask(self, generation: int) -> None:
        self.asked.append(generation)

    def dial(self, hint: Any, timeout: float, hold: bool = False) -> defer.Deferred[bool]:
        self.dials.append((hint.hostname, hint.port))
        return defer.succeed(self.answers.pop(0))


def punching(leader: bool, wins: list[Won], prober: Prober, punchover: FakePunchover
             ) -> tuple[Clock, Dilator, list[Any]]:
    clock = Clock()
    sent: list[Any] = []
    races = iter(wins)
    dilator = Dilator(clock, lambda data: sent.append(wire.parse(data)), bytes(32), "ged",
                      lambda *_a: PunchRace(next(races)), side=("ff" if leader else "11") * 8,
                      prober=prober, punchover=punchover)
    dilator.got_message(wire.encode(wire.Please(("00" if leader else "ee") * 8)))
    dilator.got_message(wire.encode(wire.ConnectionHints(PUNCH_HINTS)))
    clock.advance(NO_HINTS_START)
    return clock, dilator, sent


def test_the_leader_punches_with_the_follower_and_leaves_the_relay() -> None:
    relay, punched = Won("relay tcp:198.19.0.1:4001", True), Won("tcp-punch 198.19.0.3", False)
    prober = Prober([False, False])  # the follower's private address never answers
    punch = FakePunchover([False, True])
    clock, dilator, sent = punching(True, [relay, punched], prober, punch)
    clock.advance(2.0)
    assert punch.asked == [0] and punch.dials == [("198.19.0.3", 5151)]
    assert prober.calls == [[("198.18.2.10", 4242)]]  # the direct probe runs beside it
    assert not relay.stream.aborted  # neither answered: stay
    clock.advance(5.0)
    assert punch.asked == [0, 0] and relay.stream.aborted  # the punch connected: switch
    assert wire.Reconnect() in sent
    dilator.got_message(wire.encode(wire.Reconnecting()))
    dilator.got_message(wire.encode(wire.ConnectionHints(PUNCH_HINTS)))
    clock.advance(NO_HINTS_START)
    assert dilator.description == punched.description and dilator.generation_count == 2
    clock.advance(55.0)
    assert len(punch.asked) == 2  # a punched generation is not probed
    dilator.stop()


def test_the_follower_punches_back_only_for_its_relayed_generation() -> None:
    relay = Won("relay", True)
    prober = Prober([True] * 10)
    punch = FakePunchover([True, True])
    clock, dilator, _sent = punching(False, [relay], prober, punch)
    punch.on_request(5)  # another generation's request: ignored
    assert punch.dials == []
    punch.on_request(0)
    assert punch.dials == [("198.19.0.3", 5151)]  # the leader's punch hint
    assert prober.calls == [] and punch.asked == [] and not relay.stream.aborted
    punch.on_request(0)  # the next probe's request: again
    assert len(punch.dials) == 2 and not relay.stream.aborted  # the leader decides
    dilator.stop()


def test_without_a_punch_hint_of_ours_nothing_is_punched() -> None:
    """A peer's punch hint alone cannot work: the follower would not dial us back."""
    relay = Won("relay", True)
    prober = Prober([False] * 10)
    punch = FakePunchover([True] * 10)
    clock = Clock()
    dilator = Dilator(clock, lambda _d: None, bytes(32), "ged", lambda *_a: Race(relay),
                      side="ff" * 8, prober=prober, punchover=punch)
    dilator.got_message(wire.encode(wire.Please("00" * 8)))
    dilator.got_message(wire.encode(wire.ConnectionHints(PUNCH_HINTS)))
    clock.advance(NO_HINTS_START)
    clock.advance(2.0)
    assert len(prober.calls) == 1 and punch.asked == [] and punch.dials == []
    dilator.stop()
