"""Queue locks for orderly consumers, per (group, MessageQueue), owned by a clientId.

Mirrors broker/client/rebalance/RebalanceLockManager.java, RocketMQ 4.9.x: a lock is granted
when free, refreshed for its holder, and taken over once the holder's lock is older than
REBALANCE_LOCK_MAX_LIVE_TIME_MS.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

log = logging.getLogger(__name__)

REBALANCE_LOCK_MAX_LIVE_TIME_MS: Final = 60_000

# A MessageQueue as (topic, brokerName, queueId).
MessageQueueKey = tuple[str, str, int]


@dataclass(slots=True)
class LockEntry:
    """Who holds a queue and since when it was last refreshed."""

    client_id: str
    last_update_ms: int

    def expired(self, now_ms: int, max_live_ms: int) -> bool:
        """True when the holder has not refreshed within max_live_ms."""
        return now_ms - self.last_update_ms > max_live_ms


class RebalanceLockManager:
    """group -> MessageQueue -> LockEntry."""

    def __init__(self, max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS) -> None:
        self.max_live_ms = max_live_ms
        self.table: dict[str, dict[MessageQueueKey, LockEntry]] = {}

    def try_lock_batch(
        self, group: str, mqs: list[MessageQueueKey], client_id: str, now_ms: int
    ) -> list[MessageQueueKey]:
        """tryLockBatch: the requested queues now held by client_id."""
        locks = self.table.setdefault(group, {})
        ok: list[MessageQueueKey] = []
        for mq in mqs:
            entry = locks.get(mq)
            if (
                entry is None
                or entry.client_id == client_id
                or entry.expired(now_ms, self.max_live_ms)
            ):
                if entry is not None and entry.client_id != client_id:
                    log.warning(
                        "lock taken over group=%s mq=%s old=%s new=%s",
                        group,
                        mq,
                        entry.client_id,
                        client_id,
                    )
                locks[mq] = LockEntry(client_id, now_ms)
                ok.append(mq)
        return ok

    def unlock_batch(self, group: str, mqs: list[MessageQueueKey], client_id: str) -> int:
        """unlockBatch: release the queues client_id holds; the number released."""
        locks = self.table.get(group)
        if not locks:
            return 0
        n = 0
        for mq in mqs:
            entry = locks.get(mq)
            if entry is not None and entry.client_id == client_id:
                del locks[mq]
                n += 1
        if not locks:
            del self.table[group]
        return n

    def is_locked(self, group: str, mq: MessageQueueKey, client_id: str, now_ms: int) -> bool:
        """True when client_id holds a live lock on mq."""
        entry = self.table.get(group, {}).get(mq)
        return (
            entry is not None
            and entry.client_id == client_id
            and not entry.expired(now_ms, self.max_live_ms)
        )
