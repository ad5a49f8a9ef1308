"""The arrival-notice hand-off between the send actor (the store's writer) and the hold service.

Mirrors broker/longpolling/NotifyMessageArrivingListener.java, RocketMQ 4.9.x. In Java the
writer's dispatch calls PullRequestHoldService.notifyMessageArriving in the same process; here
the writer and the hold service (actors.broker.pull_hold_service) are two actors joined by a
link, so the listener is split in pure halves that only decide:

- `ArrivalNoticeGate` (send actor): forwards the arrivals of a batch as ArrivalNotices,
  coalesced, only while the hold service may hold pulls; when it reports holds again, it asks
  for one re-check (appends made meanwhile carried no notice). `ArrivalNotifier` is the send
  core's use of it on the hold service's link.
- `HoldsReporter` (hold service): reports "holding" at once and "not holding" only after a
  quiet delay (a consumer that re-polls at once keeps notices flowing).

Nothing is lost between them: an append the writer published before a pull read the store is
seen by that read; one published after it either carries a notice (the gate was open) or
precedes the HoldsChanged record that opens the gate, whose re-check reads the store again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from actors.core import Link
from actors.runtime.link_records import ArrivalNotices

HOLDS_OFF_DELAY_MS: Final = 200.0  # pull actor: report "no held pulls" only after this long


def coalesce(arrivals: Sequence[Any]) -> list[tuple[Any, ...]]:
    """One notice per (topic, queue, tags code): the newest offset wakes whatever an older would."""
    if len(arrivals) == 1:
        return [tuple(arrivals[0])]
    last: dict[tuple[Any, Any, Any], tuple[Any, ...]] = {}
    for a in arrivals:
        last[(a[0], a[1], a[3])] = tuple(a)
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

    def notices(self, arrivals: Sequence[Any]) -> list[tuple[Any, ...]] | None:
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


class ArrivalNotifier:
    """The send core's end of the hold service's link: each batch's notices, through the gate."""

    __slots__ = ("gate", "link")

    def __init__(self) -> None:
        self.link: Link | None = None
        self.gate = ArrivalNoticeGate()

    def linked(self, link: Link) -> None:
        """A (new) hold service."""
        self.link = link
        self.gate.connected()

    def unlinked(self, link: Link) -> None:
        """The hold service died: notices go nowhere until its replacement links."""
        if self.link is link:
            self.link = None

    def on_holds(self, link: Link, holding: bool) -> None:
        """HoldsChanged from the hold service: a re-check request goes back when it holds
        pulls again."""
        if link is self.link and self.gate.on_holds(holding):
            link.send(ArrivalNotices(()))

    def end_batch(self, arrivals: Sequence[Any]) -> None:
        """The batch's arrivals, coalesced, while the hold service may hold pulls."""
        link = self.link
        if link is None or not arrivals:
            return
        notices = self.gate.notices(arrivals)
        if notices is not None:
            link.send(ArrivalNotices(tuple(notices)))  # type: ignore[arg-type]
