"""The arrival-notice hand-off between the send actor (the store's writer) and the pull actor.

Mirrors broker/longpolling/NotifyMessageArrivingListener.java, RocketMQ 4.9.x. In Java the
writer's dispatch calls PullRequestHoldService.notifyMessageArriving in the same process; here
the writer and the hold service live in two actors joined by a channel, so the listener is
split in two pure halves that only decide (the actor adapters own the channel and the timer):

- `ArrivalNoticeGate` (send actor): forwards the arrivals of a batch as NOTICES, coalesced,
  only while the pull actor may hold pulls; when the pull actor reports holds again, it asks
  for one re-check (appends made meanwhile carried no notice).
- `HoldsReporter` (pull actor): reports "holding" at once and "not holding" only after a quiet
  delay (a consumer that re-polls at once keeps notices flowing).

Nothing is lost between them: an append the writer published before a pull read the store is
seen by that read; one published after it either carries a notice (the gate was open) or
precedes the HOLDS record that opens the gate, whose re-check reads the store again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

HOLDS_OFF_DELAY_MS: Final = 200.0  # pull actor: report "no held pulls" only after this long


def coalesce(arrivals: Sequence[Any]) -> list[list[Any]]:
    """One notice per (topic, queue, tags code): the newest offset wakes whatever an older would."""
    if len(arrivals) == 1:
        return [list(arrivals[0])]
    last: dict[tuple[Any, Any, Any], list[Any]] = {}
    for a in arrivals:
        last[(a[0], a[1], a[3])] = list(a)
    return list(last.values())


class ArrivalNoticeGate:
    """Send-actor half: which arrivals become notices, and when to ask for a re-check."""

    __slots__ = ("pull_holding",)

    def __init__(self) -> None:
        self.pull_holding = True  # until the pull actor says otherwise

    def connected(self) -> None:
        """A (new) pull actor: it may hold pulls until it reports."""
        self.pull_holding = True

    def on_holds(self, holding: bool) -> bool:
        """A HOLDS record; True when a re-check request must be sent back."""
        recheck = holding and not self.pull_holding
        self.pull_holding = holding
        return recheck

    def notices(self, arrivals: Sequence[Any]) -> list[list[Any]] | None:
        """The NOTICES to send for a batch's arrivals (None: nothing to send)."""
        if not arrivals or not self.pull_holding:
            return None
        return coalesce(arrivals)


class HoldsReporter:
    """Pull-actor half: when to tell the send actor whether pulls are held."""

    __slots__ = ("reported",)

    def __init__(self) -> None:
        self.reported = True  # what the send actor was last told (it starts open)

    def after_batch(self, holding: bool) -> bool | None:
        """After a batch: True = report holding now; False = schedule the quiet-delay check;
        None = nothing to do."""
        if holding == self.reported:
            return None
        return holding

    def quiet_delay_over(self, holding: bool) -> bool:
        """The quiet delay is over: True when "not holding" is to be reported now."""
        return self.reported and not holding

    def sent(self, holding: bool) -> None:
        """The HOLDS record was queued."""
        self.reported = holding
