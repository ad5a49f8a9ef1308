"""Held (long-polling) pull requests, keyed topic@queueId.

Mirrors broker/longpolling/PullRequestHoldService.java + ManyPullRequest.java, RocketMQ 4.9.x:
a pull that finds nothing new is parked; it is woken when a message that passes its filter
arrives on its queue, or by the periodic sweep once the queue moved past its offset or its
hold time is over (checked only when a sweep runs). The table is pure: it returns the pulls
to wake; the hold service actor (actors.broker.pull_hold_service) sends each back to the pull
actor it came from, which runs it again "without suspend" and answers it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from actors.core import Link
from actors.runtime.link_records import HoldPull

log = logging.getLogger(__name__)

HOLD_SWEEP_INTERVAL_MS: Final = 5_000


@dataclass(slots=True)
class HeldPull:
    """One parked pull request."""

    req: HoldPull  # what the pull actor sent (its token goes back in the WakePull)
    link: Link | None  # the pull actor's link it came on
    topic: str
    queue_id: int
    pull_from_offset: int
    suspend_ms: int  # when it was parked
    timeout_ms: int  # hold time
    filter: Any  # has is_matched_by_consume_queue(tags_code) -> bool
    checked_to: int = -1  # arrivals below this were read and did not match (SQL92)

    @property
    def conn_id(self) -> int:
        """The client connection."""
        return self.req.conn_id


def build_key(topic: str, queue_id: int) -> str:
    """The hold table key."""
    return f"{topic}@{queue_id}"


class PullRequestHoldService:
    """topic@queueId -> held pulls; pure bookkeeping, time passed in."""

    def __init__(self, sweep_interval_ms: int = HOLD_SWEEP_INTERVAL_MS) -> None:
        self.sweep_interval_ms = sweep_interval_ms
        self.table: dict[str, list[HeldPull]] = {}
        self._next_sweep_ms: int | None = None
        # (held pull, queue max offset) -> whether what arrived matches it on the commit log
        # (isMatchedByCommitLog with the arrival's properties); None: the tags decide alone
        self.arrival_match: Callable[[HeldPull, int], bool] | None = None

    def __len__(self) -> int:
        return sum(len(v) for v in self.table.values())

    def suspend(self, held: HeldPull) -> None:
        """suspendPullRequest."""
        self.table.setdefault(build_key(held.topic, held.queue_id), []).append(held)

    def notify_message_arriving(
        self,
        topic: str,
        queue_id: int,
        max_offset: int,
        tags_code: int | None,
        now_ms: int,
        max_offset_fn: Callable[[str, int], int] | None = None,
    ) -> list[HeldPull]:
        """Release the held pulls this arrival (or sweep) satisfies or that timed out."""
        key = build_key(topic, queue_id)
        held = self.table.get(key)
        if not held:
            return []
        woken: list[HeldPull] = []
        keep: list[HeldPull] = []
        for h in held:
            newest = max_offset
            if newest <= h.pull_from_offset and max_offset_fn is not None:
                newest = max_offset_fn(topic, queue_id)
            if newest > h.pull_from_offset:
                match = (
                    tags_code is None
                    or h.filter is None
                    or (h.filter.is_matched_by_consume_queue(tags_code))
                )
                if match and tags_code is not None and self.arrival_match is not None:
                    match = self.arrival_match(h, newest)  # an arrival, not the sweep
                if match:
                    woken.append(h)
                    continue
            if now_ms >= h.suspend_ms + h.timeout_ms:
                woken.append(h)
                continue
            keep.append(h)
        if keep:
            self.table[key] = keep
        else:
            del self.table[key]
        return woken

    def check_hold_request(
        self, now_ms: int, max_offset_fn: Callable[[str, int], int]
    ) -> list[HeldPull]:
        """The sweep: every parked queue against its current max offset and the clock."""
        woken: list[HeldPull] = []
        for key in list(self.table):
            topic, _, qid = key.rpartition("@")
            queue_id = int(qid)
            woken.extend(
                self.notify_message_arriving(
                    topic, queue_id, max_offset_fn(topic, queue_id), None, now_ms
                )
            )
        return woken

    def due(self, now_ms: int) -> bool:
        """True when a sweep is due (and schedules the next one)."""
        if self._next_sweep_ms is None:
            self._next_sweep_ms = now_ms + self.sweep_interval_ms
            return False
        if now_ms >= self._next_sweep_ms:
            self._next_sweep_ms = now_ms + self.sweep_interval_ms
            return True
        return False

    def ms_until_sweep(self, now_ms: int) -> int:
        """Milliseconds until the next sweep."""
        if self._next_sweep_ms is None:
            return self.sweep_interval_ms
        return max(0, self._next_sweep_ms - now_ms)

    def drop_connection(self, conn_id: int) -> int:
        """Forget the held pulls of a closed connection; how many were dropped."""
        return self._drop(lambda h: h.conn_id == conn_id)

    def drop_link(self, link: Link) -> int:
        """Forget the held pulls that came on a link (their pull actor died: the RemotingServer
        answered them from its ledger); how many were dropped."""
        return self._drop(lambda h: h.link is link)

    def _drop(self, gone: Callable[[HeldPull], bool]) -> int:
        n = 0
        for key in list(self.table):
            keep = [h for h in self.table[key] if not gone(h)]
            n += len(self.table[key]) - len(keep)
            if keep:
                self.table[key] = keep
            else:
                del self.table[key]
        return n
