"""The arrival-notice hand-off between the writer, the hold service and the pull actor never
strands a held pull.

Every interleaving of the three actors' steps (a model of their links around the real
ArrivalNoticeGate, HoldsReporter and PullRequestHoldService) is explored exhaustively: a
consumer pulls offsets 0..n-1 one after another (the next pull once the previous is answered,
as a push consumer does) while the writer appends n messages. A pull that finds nothing goes
to the hold service (HoldPull), which checks the queue's end as it takes it; a woken pull goes
back to the pull actor (WakePull), which reads again and answers. In every final state each
pull was answered with its message, never left for the hold sweep (which the model never
runs). No clocks: wake paths are counted.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from actors.broker.notify_message_arriving_listener import (
    ArrivalNoticeGate,
    HoldsReporter,
    coalesce,
)
from actors.broker.pull_hold import HeldPull, PullRequestHoldService
from actors.runtime.link_records import HoldPull

TOPIC = "T"
QID = 0
FOREVER_MS = 1 << 40  # suspend timeout: the model's clock never reaches it


@dataclass
class World:
    """The three actors, their links (FIFO lists) and the store's published max offset."""

    n: int
    published: int = 0  # messages the writer made visible
    pending_arrivals: list[tuple[Any, ...]] = field(default_factory=list)
    gate: ArrivalNoticeGate = field(default_factory=ArrivalNoticeGate)
    to_hold: list[list[Any]] = field(default_factory=list)  # ArrivalNotices ([] = re-check)
    to_send: list[bool] = field(default_factory=list)  # HoldsChanged
    holds_in: list[int] = field(default_factory=list)  # HoldPull: pull actor -> hold service
    wakes: list[tuple[int, str]] = field(default_factory=list)  # WakePull: hold -> pull actor
    hold: PullRequestHoldService = field(default_factory=PullRequestHoldService)
    reporter: HoldsReporter = field(default_factory=HoldsReporter)
    quiet_timer: bool = False  # the hold service's holds-off timer is pending
    next_pull: int | None = 0  # the consumer's pull waiting to reach the pull actor
    answered: list[tuple[int, str]] = field(default_factory=list)  # (offset, wake path)
    check_on_receipt: bool = True  # the hold service's look at the queue end (see the test)

    def key(self) -> tuple[Any, ...]:
        held = tuple(h.pull_from_offset for v in self.hold.table.values() for h in v)
        return (self.published, tuple(self.pending_arrivals), self.gate.pull_holding,
                tuple(tuple(tuple(x) for x in r) for r in self.to_hold), tuple(self.to_send),
                tuple(self.holds_in), tuple(self.wakes), held, self.reporter.reported,
                self.quiet_timer, self.next_pull, tuple(self.answered))

    # -- the pull actor ------------------------------------------------------------------------
    def _answer(self, offset: int, path: str) -> None:
        assert offset < self.published, f"pull {offset} answered {path} before its message"
        self.answered.append((offset, path))
        nxt = offset + 1
        self.next_pull = nxt if nxt < self.n else None

    def pull_request(self) -> None:
        """A PULL_MESSAGE with the suspend flag reads the store: found, or handed over."""
        offset = self.next_pull
        assert offset is not None
        self.next_pull = None
        if offset < self.published:
            self._answer(offset, "read")
        else:
            self.holds_in.append(offset)

    def pull_link(self) -> None:
        """One WakePull: the pull is read again, never suspended."""
        offset, path = self.wakes.pop(0)
        self._answer(offset, path)

    # -- the hold service ----------------------------------------------------------------------
    def _wake(self, woken: list[HeldPull], path: str) -> None:
        self.wakes.extend((h.pull_from_offset, path) for h in woken)

    def _hold_after_batch(self) -> None:
        report = self.reporter.after_batch(bool(len(self.hold)))
        if report:
            self.to_send.append(True)
            self.reporter.sent(True)
        elif report is not None:
            self.quiet_timer = True

    def hold_pull_link(self) -> None:
        """One HoldPull: held, and woken at once when the queue already moved past it."""
        offset = self.holds_in.pop(0)
        rec = HoldPull(1, 1, TOPIC, QID, offset, 0, FOREVER_MS, None, None)
        self.hold.suspend(HeldPull(rec, None, TOPIC, QID, offset, 0, FOREVER_MS, None))
        if self.check_on_receipt and self.published > offset:
            self._wake(self.hold.notify_message_arriving(TOPIC, QID, self.published, None, 0),
                       "receipt")  # fmt: skip
        self._hold_after_batch()

    def hold_notice_link(self) -> None:
        """One ArrivalNotices record from the writer (an empty one asks for a re-check)."""
        rec = self.to_hold.pop(0)
        if rec:
            path = "notice"
            notices = rec
        else:
            path = "recheck"
            notices = [(TOPIC, QID, self.published, None, 0)] if len(self.hold) else []
        for topic, qid, max_offset, tags_code, _ts in notices:
            self._wake(self.hold.notify_message_arriving(
                topic, qid, max_offset, tags_code, 0, lambda t, q: self.published), path)
        self._hold_after_batch()

    def hold_timer(self) -> None:
        """The holds-off timer fires."""
        self.quiet_timer = False
        if self.reporter.quiet_delay_over(bool(len(self.hold))):
            self.to_send.append(False)
            self.reporter.sent(False)

    # -- the writer ----------------------------------------------------------------------------
    def append(self) -> None:
        """The writer stores a message and publishes it (its notice leaves after the batch)."""
        self.published += 1
        self.pending_arrivals.append((TOPIC, QID, self.published, 0, 0))

    def send_after_batch(self) -> None:
        """The batch's arrivals become ArrivalNotices, or nothing while the gate is shut."""
        notices = self.gate.notices(self.pending_arrivals)
        self.pending_arrivals = []
        if notices is not None:
            self.to_hold.append(notices)

    def send_link(self) -> None:
        """One HoldsChanged record from the hold service."""
        if self.gate.on_holds(self.to_send.pop(0)):
            self.to_hold.append([])

    def steps(self) -> list[str]:
        """The steps enabled in this state."""
        out = []
        if self.next_pull is not None:
            out.append("pull_request")
        if self.wakes:
            out.append("pull_link")
        if self.holds_in:
            out.append("hold_pull_link")
        if self.to_hold:
            out.append("hold_notice_link")
        if self.quiet_timer:
            out.append("hold_timer")
        if self.published < self.n:
            out.append("append")
        if self.pending_arrivals:
            out.append("send_after_batch")
        if self.to_send:
            out.append("send_link")
        return out


def explore(start: World) -> tuple[int, dict[str, int]]:
    """Every interleaving from `start` (depth first, states merged); final states checked."""
    seen: set[tuple[Any, ...]] = set()
    stack = [start]
    finals = 0
    paths: dict[str, int] = {}
    while stack:
        w = stack.pop()
        k = w.key()
        if k in seen:
            continue
        seen.add(k)
        assert len(seen) < 200_000, "state space larger than expected"
        enabled = w.steps()
        if not enabled:
            finals += 1
            assert not len(w.hold), f"pull(s) left held for the sweep: {w.answered}"
            assert [o for o, _ in w.answered] == list(range(w.n))
            for _, p in w.answered:
                paths[p] = paths.get(p, 0) + 1
            continue
        for step in enabled:
            nxt = copy.deepcopy(w)
            getattr(nxt, step)()
            stack.append(nxt)
    return finals, paths


@pytest.mark.parametrize("gate_open", [True, False], ids=["notices-flowing", "after-quiet"])
@pytest.mark.parametrize("n", [1, 3])
def test_no_interleaving_leaves_a_pull_for_the_sweep(n: int, gate_open: bool) -> None:
    w = World(n)
    w.gate.pull_holding = gate_open
    w.reporter.reported = gate_open
    finals, paths = explore(w)
    assert finals > 0
    # each way a pull can be answered is reached by some interleaving (the model is not vacuous)
    assert paths.get("read", 0) > 0 and paths.get("notice", 0) > 0
    assert paths.get("receipt", 0) > 0
    if not gate_open:
        assert paths.get("recheck", 0) > 0


def test_a_gate_that_forgot_the_recheck_would_strand_a_pull(monkeypatch) -> None:
    """The exploration does catch the race it is there for."""
    monkeypatch.setattr(ArrivalNoticeGate, "on_holds",
                        lambda self, holding: setattr(self, "pull_holding", holding) or False)
    w = World(1)
    w.gate.pull_holding = False
    w.reporter.reported = False
    with pytest.raises(AssertionError, match="left held for the sweep"):
        explore(w)


def test_a_hold_service_that_took_pulls_blindly_would_strand_one() -> None:
    """Without its look at the queue end as it takes a pull, a notice that reached the hold
    service ahead of the pull it was for leaves that pull for the sweep."""
    w = World(1, check_on_receipt=False)
    with pytest.raises(AssertionError, match="left held for the sweep"):
        explore(w)


def test_gate_and_reporter() -> None:
    gate = ArrivalNoticeGate()
    arrivals = [("T", 0, 1, 5, 0), ("T", 0, 2, 5, 0), ("T", 1, 7, 5, 0)]
    assert gate.notices(arrivals) == [("T", 0, 2, 5, 0), ("T", 1, 7, 5, 0)]
    assert gate.notices([]) is None
    assert gate.on_holds(False) is False
    assert gate.notices(arrivals) is None  # shut: nothing held
    assert gate.on_holds(True) is True  # reopened: one re-check
    assert gate.on_holds(True) is False
    gate.on_holds(False)
    gate.connected()  # a new pull actor: open, no re-check owed
    assert gate.pull_holding and gate.on_holds(True) is False
    rep = HoldsReporter()
    assert rep.after_batch(True) is None
    assert rep.after_batch(False) is False  # quiet delay first
    assert rep.quiet_delay_over(True) is False
    assert rep.quiet_delay_over(False) is True
    rep.sent(False)
    assert rep.after_batch(True) is True and rep.after_batch(False) is None
    assert coalesce([("T", 0, 3, None, 0)]) == [("T", 0, 3, None, 0)]
