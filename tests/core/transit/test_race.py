"""The transit race with a fake clock and fake transports (no I/O anywhere)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hilltop.errors import IllegalTransition
from hilltop.transit.race import (
    ATTEMPT_MOVES,
    AttemptState,
    Cancel,
    Candidate,
    Race,
    RaceConfig,
    RaceFailed,
    SendGo,
    SendNevermind,
    StartAttempt,
    Winner,
)

DIRECT = Candidate("d1", tier=0, label="direct-tcp 192.0.2.1:1")
DIRECT2 = Candidate("d2", tier=0, label="direct-tcp 192.0.2.2:2")
RELAY = Candidate("r1", tier=1, priority=0.0, label="relay 192.0.2.9:4001")
RELAY_HI = Candidate("r2", tier=1, priority=2.0, label="relay 192.0.2.8:4001")


def starts(actions: list) -> list:
    return [a.key for a in actions if isinstance(a, StartAttempt)]


@dataclass
class FakeTransport:
    """How a dial behaves: handshake ready ``after`` seconds, or fail, or raise on start."""

    after: float | None = None
    fail_after: float | None = None
    raises: bool = False


class Driver:
    """A tiny runner: a fake clock, fake transports, and the race's actions recorded."""

    def __init__(self, role: str, behaviours: dict, now: float = 0.0, **kw) -> None:
        self.now = now
        self.behaviours = behaviours
        self.pending: list[tuple[float, str, object]] = []  # (time, "ready"|"fail", key)
        self.log: list = []
        self.started: dict = {}
        cands = kw.pop("candidates")
        self.race = Race(role, cands, now, **kw)
        self.pump()

    def pump(self) -> None:
        while acts := self.race.actions():
            self._handle(acts)

    def _handle(self, acts: list) -> None:
        for act in acts:
            self.log.append((self.now, act))
            if isinstance(act, StartAttempt):
                self.started[act.key] = self.now
                b = self.behaviours[act.key]
                try:
                    if b.raises:
                        raise RuntimeError("plugin exploded")
                except RuntimeError as err:
                    self.race.attempt_failed(act.key, str(err), self.now)
                    continue
                if b.after is not None:
                    self.pending.append((self.now + b.after, "ready", act.key))
                if b.fail_after is not None:
                    self.pending.append((self.now + b.fail_after, "fail", act.key))
            elif isinstance(act, Cancel):
                self.pending = [p for p in self.pending if p[2] != act.key]

    def run(self, until: float = 1000.0) -> None:
        while not self.race.finished and self.now < until:
            times = [p[0] for p in self.pending]
            dl = self.race.next_deadline()
            if dl is not None:
                times.append(dl)
            if not times:
                break
            self.now = min(times)
            due = [p for p in self.pending if p[0] <= self.now]
            self.pending = [p for p in self.pending if p[0] > self.now]
            for _, what, key in sorted(due, key=lambda p: p[0]):
                if what == "ready":
                    self.race.attempt_ready(key, self.now)
                else:
                    self.race.attempt_failed(key, "refused", self.now)
                self.pump()
            self.race.handle_timer(self.now)
            self.pump()

    def of(self, kind: type) -> list:
        return [a for _, a in self.log if isinstance(a, kind)]


def test_direct_starts_at_once_relay_after_two_seconds() -> None:
    race = Race("receiver", [DIRECT, RELAY], now=100.0)
    assert starts(race.actions()) == ["d1"]
    assert race.next_deadline() == 102.0
    race.handle_timer(101.9)
    assert race.actions() == []
    race.handle_timer(102.0)
    assert starts(race.actions()) == ["r1"]


def test_relay_at_once_without_direct_hints() -> None:
    race = Race("sender", [RELAY], now=5.0)
    assert starts(race.actions()) == ["r1"]


def test_relay_priority_tiers_two_seconds_apart() -> None:
    race = Race("sender", [RELAY, DIRECT, RELAY_HI, Candidate("t2", tier=2)], now=0.0)
    assert starts(race.actions()) == ["d1"]
    race.handle_timer(2.0)
    assert starts(race.actions()) == ["r2"]  # higher priority first
    race.handle_timer(4.0)
    assert starts(race.actions()) == ["r1"]
    assert race.next_deadline() == 6.0
    race.handle_timer(6.0)
    assert starts(race.actions()) == ["t2"]


def test_sender_first_ready_wins_and_slow_loser_cancelled() -> None:
    d = Driver("sender", {"d1": FakeTransport(after=0.5), "d2": FakeTransport(after=30)},
               candidates=[DIRECT, DIRECT2, RELAY])
    d.run()
    assert d.race.winner == "d1"
    assert d.of(SendGo) == [SendGo("d1")]
    assert Cancel("d2", "another connection won") in d.of(Cancel)
    assert d.of(Winner) == [Winner("d1")]
    assert "r1" not in d.started  # the relay never started: direct won within 2 s
    assert d.race.next_deadline() is None


def test_relay_wins_when_direct_is_slow() -> None:
    d = Driver("receiver", {"d1": FakeTransport(after=50), "r1": FakeTransport(after=1)},
               candidates=[DIRECT, RELAY])
    d.run()
    assert d.race.winner == "r1"
    assert d.started == {"d1": 0.0, "r1": 2.0}
    assert d.of(SendGo) == []  # the receiver never says go
    assert d.of(Cancel) == [Cancel("d1", "another connection won")]


def test_raising_transport_does_not_break_the_race() -> None:
    d = Driver("sender", {"d1": FakeTransport(raises=True), "r1": FakeTransport(after=1)},
               candidates=[DIRECT, RELAY])
    d.run()
    assert d.race.winner == "r1"
    assert d.race.state_of("d1") is AttemptState.FAILED


def test_all_fail_gives_clear_failure() -> None:
    d = Driver("receiver", {"d1": FakeTransport(fail_after=1), "r1": FakeTransport(raises=True)},
               candidates=[DIRECT, RELAY])
    d.run()
    [failed] = d.of(RaceFailed)
    assert "direct-tcp 192.0.2.1:1: refused" in failed.reason
    assert "relay 192.0.2.9:4001: plugin exploded" in failed.reason
    assert d.race.next_deadline() is None


def test_no_hints_fails_at_once_unless_listening() -> None:
    race = Race("receiver", [], now=0.0)
    [failed] = race.actions()
    assert isinstance(failed, RaceFailed) and "no usable hints" in failed.reason
    race = Race("sender", [], now=0.0, listening=True)
    assert race.actions() == [] and race.next_deadline() == 120.0


def test_attempt_timeout() -> None:
    cfg = RaceConfig(attempt_timeout=10, overall_timeout=100)
    d = Driver("receiver", {"d1": FakeTransport(after=50), "r1": FakeTransport(after=50)},
               candidates=[DIRECT, RELAY], config=cfg)
    d.run()
    assert Cancel("d1", "timed out") in d.of(Cancel)
    assert Cancel("r1", "timed out") in d.of(Cancel)
    [failed] = d.of(RaceFailed)
    assert "timed out" in failed.reason
    assert d.now == 12.0


def test_overall_timeout_with_listener() -> None:
    race = Race("sender", [], now=0.0, listening=True)
    race.inbound("in1", 119.0, "inbound 192.0.2.5")
    race.handle_timer(120.0)
    acts = race.actions()
    assert isinstance(acts[-1], RaceFailed) and "120 s" in acts[-1].reason
    assert Cancel("in1", acts[-1].reason) in acts or any(
        isinstance(a, Cancel) and a.key == "in1" for a in acts)
    assert race.next_deadline() is None


def test_inbound_wins_for_sender() -> None:
    race = Race("sender", [DIRECT], now=0.0, listening=True)
    race.actions()
    race.inbound("in1", 1.0)
    race.attempt_ready("in1", 1.5)
    assert race.actions() == [SendGo("in1"), Cancel("d1", "another connection won"),
                              Winner("in1")]


def test_ready_after_win_gets_nevermind() -> None:
    race = Race("sender", [DIRECT, DIRECT2], now=0.0)
    race.actions()
    race.attempt_ready("d1", 1.0)
    race.actions()
    # d2 was cancelled at once; a late inbound that manages to get ready still hears nevermind
    race.inbound("late", 2.0)
    assert race.actions() == [Cancel("late", "transit race already over")]
    race2 = Race("sender", [DIRECT], now=0.0, listening=True)
    race2.inbound("a", 0.0)
    race2.inbound("b", 0.0)
    race2.attempt_ready("a", 1.0)
    race2.actions()
    race2.attempt_ready("b", 1.0)  # already cancelled: ignored
    assert race2.actions() == []


def test_failed_after_win_is_ignored_and_cancel_all() -> None:
    race = Race("receiver", [DIRECT, RELAY], now=0.0)
    race.actions()
    race.cancel_all("user gave up")
    acts = race.actions()
    assert acts[0] == Cancel("d1", "user gave up")
    assert isinstance(acts[-1], RaceFailed)
    race.attempt_failed("d1", "late", 1.0)
    assert race.actions() == []


def test_late_ready_after_win_sends_nevermind() -> None:
    race = Race("sender", [DIRECT], now=0.0, listening=True)
    race.actions()
    race.attempt_ready("d1", 1.0)
    race.actions()
    # an attempt the runner registered but whose cancel has not landed yet
    race._attempts["x"] = type(race._attempts["d1"])("x", "x", 0.0, AttemptState.RUNNING)
    race.attempt_ready("x", 2.0)
    assert race.actions() == [SendNevermind("x"), Cancel("x", "another connection won")]


def test_bad_inputs() -> None:
    with pytest.raises(ValueError):
        Race("both", [], 0.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Race("sender", [DIRECT, DIRECT], 0.0)
    race = Race("sender", [DIRECT], 0.0)
    with pytest.raises(ValueError):
        race.inbound("d1", 0.0)


def test_transport_start_delay_adds_to_tier() -> None:
    race = Race("sender", [DIRECT, Candidate("slow", tier=0, delay=1.5),
                           Candidate("r", tier=1, delay=0.5)], now=0.0)
    assert starts(race.actions()) == ["d1"]
    assert race.next_deadline() == 1.5
    race.handle_timer(1.5)
    assert starts(race.actions()) == ["slow"]
    race.handle_timer(2.5)
    assert starts(race.actions()) == ["r"]


# -- the attempt transition table -------------------------------------------------------------
A = AttemptState


def test_attempt_table_holds_exactly_the_legal_moves() -> None:
    assert ATTEMPT_MOVES == {
        (A.SCHEDULED, "start"): A.RUNNING, (A.SCHEDULED, "cancel"): A.CANCELLED,
        (A.RUNNING, "win"): A.WON, (A.RUNNING, "fail"): A.FAILED,
        (A.RUNNING, "cancel"): A.CANCELLED,
    }


def test_attempt_states_after_a_win() -> None:
    """Won, timed out, cancelled while running, and cancelled before it ever started."""
    cands = [DIRECT, DIRECT2, RELAY, RELAY_HI]
    d = Driver("sender", {"d1": FakeTransport(after=1), "d2": FakeTransport(after=50),
                          "r1": FakeTransport(after=1), "r2": FakeTransport(after=1)},
               candidates=cands, config=RaceConfig(relay_delay=5.0))
    d.run()
    assert {c.key: d.race.state_of(c.key) for c in cands} == {
        "d1": A.WON, "d2": A.CANCELLED, "r1": A.CANCELLED, "r2": A.CANCELLED}
    d = Driver("receiver", {"d1": FakeTransport(after=5), "d2": FakeTransport(after=50)},
               candidates=[DIRECT, DIRECT2], config=RaceConfig(attempt_timeout=3.0))
    d.run()
    assert (d.race.state_of("d1"), d.race.state_of("d2")) == (A.FAILED, A.FAILED)


def test_an_inbound_attempt_after_the_race_is_cancelled_at_once() -> None:
    d = Driver("sender", {"d1": FakeTransport(after=1)}, candidates=[DIRECT])
    d.run()
    d.race.inbound("in1", d.now)
    assert d.race.state_of("in1") is A.CANCELLED
    assert d.race.actions() == [Cancel("in1", "transit race already over")]


def test_an_illegal_attempt_move_names_state_and_event() -> None:
    d = Driver("sender", {"d1": FakeTransport(after=1)}, candidates=[DIRECT])
    d.run()
    attempt = d.race._attempts["d1"]
    with pytest.raises(IllegalTransition, match=r"'start' in AttemptState.WON"):
        attempt.move("start")
    assert attempt.state is A.WON


# -- ending early: nothing running, nothing scheduled, nothing can arrive ------------------------
WEBRTC = Candidate("w1", tier=0, label="webrtc webrtc-v1")


def failed_at(d: Driver) -> float:
    [(when, _)] = [(t, a) for t, a in d.log if isinstance(a, RaceFailed)]
    return when


def test_the_only_attempt_failing_ends_the_race_then_when_nothing_can_arrive() -> None:
    """--transports webrtc: ICE gives up at 30 s and we offered nothing to dial, so the race
    fails at 30 s with the attempt's reason, not at the 120 s overall time-out."""
    for role in ("sender", "receiver"):
        d = Driver(role, {"w1": FakeTransport(fail_after=30)}, candidates=[WEBRTC])
        d.run()
        assert failed_at(d) == 30.0
        [failed] = d.of(RaceFailed)
        assert "webrtc webrtc-v1: refused" in failed.reason and "120" not in failed.reason
        assert d.race.next_deadline() is None


def test_a_scheduled_relay_keeps_the_race_open_until_it_fails_too() -> None:
    d = Driver("receiver", {"d1": FakeTransport(fail_after=0.5), "r1": FakeTransport(fail_after=1)},
               candidates=[DIRECT, RELAY])
    d.run()
    assert d.started == {"d1": 0.0, "r1": 2.0}  # d1 failed at 0.5 s, but r1 was still to come
    assert failed_at(d) == 3.0


def test_a_listening_side_waits_for_inbound_after_its_dials_failed() -> None:
    """The peer may still dial our hints, so a side that listens keeps the race open until the
    overall time-out, and an inbound connection that comes meanwhile can still win."""
    race = Race("sender", [DIRECT], now=0.0, listening=True)
    race.attempt_failed("d1", "refused", 1.0)
    race.handle_timer(50.0)
    assert StartAttempt("d1") in race.actions() and race.next_deadline() == 120.0
    race.inbound("in1", 50.0, "inbound 192.0.2.5")
    race.attempt_ready("in1", 51.0)
    assert race.actions() == [SendGo("in1"), Winner("in1")]

    d = Driver("sender", {"d1": FakeTransport(fail_after=1)}, candidates=[DIRECT], listening=True)
    d.run()
    assert failed_at(d) == 120.0


PUNCH = Candidate("p1", tier=0, label="tcp-punch 198.19.0.3:40000")


def test_a_punch_ready_soon_after_the_relay_still_wins() -> None:
    """The relay starts at 2 s and is ready at 2.1 s; the punch, still dialling, is ready at
    2.4 s: within the direct grace, so the direct path carries the bulk."""
    d = Driver("sender", {"p1": FakeTransport(after=2.4), "r1": FakeTransport(after=0.1)},
               candidates=[PUNCH, RELAY])
    d.run()
    assert d.race.winner == "p1"
    assert d.of(SendGo) == [SendGo("p1")]
    assert Cancel("r1", "another connection won") in d.of(Cancel)


def test_a_held_relay_wins_when_the_grace_ends() -> None:
    d = Driver("sender", {"p1": FakeTransport(after=30), "r1": FakeTransport(after=0.1)},
               candidates=[PUNCH, RELAY])
    d.run()
    assert d.race.winner == "r1"
    assert d.log[-1][0] == pytest.approx(2.1 + RaceConfig().direct_grace)


def test_a_held_relay_wins_at_once_when_the_last_direct_attempt_fails() -> None:
    d = Driver("sender", {"p1": FakeTransport(fail_after=2.2), "r1": FakeTransport(after=0.1)},
               candidates=[PUNCH, RELAY])
    d.run()
    assert d.race.winner == "r1"
    assert d.log[-1][0] == pytest.approx(2.2)


def test_the_receiver_takes_the_relay_the_sender_chose_at_once() -> None:
    """Only the sender holds a relay: the receiver's go already is the sender's choice."""
    d = Driver("receiver", {"p1": FakeTransport(after=30), "r1": FakeTransport(after=0.1)},
               candidates=[PUNCH, RELAY])
    d.run()
    assert d.race.winner == "r1"
    assert d.log[-1][0] == pytest.approx(2.1)
