"""RebalanceImpl: client/impl/consumer/RebalanceImpl.java (+ RebalancePushImpl,
RebalanceLitePullImpl) of RocketMQ 4.9.x, as an event-driven core.

Java's rebalanceByTopic / updateProcessQueueTableInRebalance run blocking calls inline (lock a
queue, read its offset). Here the RebalanceService actor owns the I/O, so this core only
decides: each step returns actions (`Assign`, `Revoke`, `Lock`, `Unlock`, `SubscriptionChanged`)
and is told the outcomes (`on_lock_result`, `on_revoked`). The queue table it keeps is the
group's view of which queues this client holds:

  (allocated) --orderly--> LOCKING --LOCK_BATCH_MQ ok--> ASSIGNED --not allocated--> REVOKING
  (allocated) --concurrently-----------------------------^                (user's process drains,
                                                                           commits) --> gone

A queue is never assigned twice: one that is still REVOKING is taken again only after the
user's process reported it released (`on_revoked`), and an orderly queue only after the broker
granted its lock. Where Java waits for the next 20 s round (a lock refused because the previous
owner still holds it), `retry_soon` asks the actor to come back in a second. A subscribed topic
the name server has no route for yet (a group's %RETRY% topic registered by the broker a moment
after it notified the group: RocketMQ 4.9.8 registers such a topic oneway) is asked for again
after 1, 2, 4, ... s (`route_retry_after`), not only at the next round.

computePullFromWhere (`compute_pull_from_where`) is a pure function over the offset store and
an admin capability; the user's process runs it when a queue is assigned.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from actors.client.consumer.allocate import (
    AllocateMessageQueueStrategy,
    java_sort_key,
    java_str_key,
)
from actors.client.consumer.offset_store import OffsetStore, ReadOffsetType
from protocol.bodies import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from protocol.codes import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger(__name__)


class QueueState(enum.Enum):
    """Where a queue this client holds (or is taking) stands."""

    LOCKING = "LOCKING"  # orderly: LOCK_BATCH_MQ sent, not yet granted
    ASSIGNED = "ASSIGNED"  # the user's process pulls and consumes it
    REVOKING = "REVOKING"  # the user's process drains it, then reports it released


@dataclass(frozen=True, slots=True)
class Assign:
    """Start pulling mq (locked: the broker lock was granted at lock_ms)."""

    mq: MessageQueue
    locked: bool = False
    lock_ms: int = 0


@dataclass(frozen=True, slots=True)
class Revoke:
    """Stop pulling mq, drain its in-flight messages, commit and release it."""

    mq: MessageQueue


@dataclass(frozen=True, slots=True)
class Lock:
    """LOCK_BATCH_MQ for mqs at broker_name's master (renew: the 20 s lockAll)."""

    broker_name: str
    mqs: frozenset[MessageQueue]
    renew: bool = False


@dataclass(frozen=True, slots=True)
class Unlock:
    """UNLOCK_BATCH_MQ for mqs at broker_name's master."""

    broker_name: str
    mqs: frozenset[MessageQueue]


@dataclass(frozen=True, slots=True)
class LockState:
    """Tell the user's process the broker lock state of mq (lockAll's answer)."""

    mq: MessageQueue
    locked: bool
    lock_ms: int


@dataclass(frozen=True, slots=True)
class SubscriptionChanged:
    """messageQueueChanged: subVersion bumped; heartbeat at once (and tell the listener)."""

    topic: str
    mq_all: frozenset[MessageQueue]
    mq_divided: frozenset[MessageQueue]


Action = Assign | Revoke | Lock | Unlock | LockState | SubscriptionChanged


@dataclass(slots=True)
class HeldQueue:
    """A queue of the table with its state."""

    state: QueueState
    locked: bool = False
    lock_ms: int = 0


def route_retry_after(last_ms: float, retry_ms: float, interval_ms: float) -> float:
    """The wait before a round asks the name server again for a subscribed topic's missing route:
    retry_ms first, then twice the last wait; 0 once that reaches the regular interval (the
    periodic round asks from then on)."""
    wait = retry_ms if last_ms <= 0 else last_ms * 2
    return wait if wait < interval_ms else 0.0


@dataclass
class RebalanceImpl:
    """One consumer group's rebalance state (CLUSTERING or BROADCASTING)."""

    group: str
    client_id: str
    model: MessageModel
    strategy: AllocateMessageQueueStrategy
    orderly: bool = False
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    topic_queues: dict[str, frozenset[MessageQueue]] = field(default_factory=dict)
    table: dict[MessageQueue, HeldQueue] = field(default_factory=dict)
    wanted: dict[str, frozenset[MessageQueue]] = field(default_factory=dict)  # last allocation
    retry_soon: bool = False  # a lock was refused or a queue is still being released

    @property
    def needs_lock(self) -> bool:
        """Orderly clustering consumers lock their queues at the broker."""
        return self.orderly and self.model is MessageModel.CLUSTERING

    # --- inputs ---------------------------------------------------------------------------------
    def set_topic_queues(self, topic: str, mqs: Iterable[MessageQueue]) -> bool:
        """topicSubscribeInfoTable update from a route; True when the set changed."""
        new = frozenset(mqs)
        if self.topic_queues.get(topic) == new:
            return False
        self.topic_queues[topic] = new
        return True

    def topics(self) -> list[str]:
        """The subscribed topics (the retry topic included)."""
        return list(self.subscriptions)

    # --- the rebalance ---------------------------------------------------------------------------
    def rebalance_topic(self, topic: str, cid_all: Sequence[str] | None, now_ms: int
                        ) -> list[Action]:  # fmt: skip
        """rebalanceByTopic; cid_all is the broker's consumer list (ignored for BROADCASTING)."""
        mq_set = self.topic_queues.get(topic)
        if mq_set is None:
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("rebalance %s: topic %s has no route yet", self.group, topic)
            return []
        if self.model is MessageModel.BROADCASTING:
            allocated = set(mq_set)
        else:
            if cid_all is None:
                log.warning("rebalance %s %s: no consumer id list", self.group, topic)
                return []
            mq_all = sorted(mq_set, key=java_sort_key)
            cids = sorted(cid_all, key=java_str_key)
            try:
                allocated = set(self.strategy.allocate(self.group, self.client_id, mq_all, cids))
            except (ValueError, IndexError) as exc:  # Java logs and leaves the table as it is
                log.error("allocate %s failed for %s/%s: %s", self.strategy.name, self.group,
                          topic, exc)  # fmt: skip
                return []
        return self._update_table(topic, allocated, mq_set, now_ms)

    def _update_table(self, topic: str, allocated: set[MessageQueue],
                      mq_set: frozenset[MessageQueue], now_ms: int) -> list[Action]:
        """updateProcessQueueTableInRebalance."""
        actions: list[Action] = []
        self.wanted[topic] = frozenset(allocated)
        changed = False
        for mq, held in list(self.table.items()):
            if mq.topic != topic or mq in allocated:
                continue
            if held.state is QueueState.ASSIGNED:
                held.state = QueueState.REVOKING
                actions.append(Revoke(mq))
                changed = True
            elif held.state is QueueState.LOCKING:
                del self.table[mq]  # its lock answer (if granted) is released in on_lock_result
        to_lock: dict[str, set[MessageQueue]] = {}
        for mq in sorted(allocated, key=java_sort_key):
            have = self.table.get(mq)
            if have is not None:
                if have.state is QueueState.REVOKING:
                    self.retry_soon = True  # take it again once released
                continue
            if self.needs_lock:
                self.table[mq] = HeldQueue(QueueState.LOCKING)
                to_lock.setdefault(mq.broker_name, set()).add(mq)
            else:
                self.table[mq] = HeldQueue(QueueState.ASSIGNED)
                actions.append(Assign(mq))
                changed = True
        actions.extend(Lock(b, frozenset(m)) for b, m in sorted(to_lock.items()))
        if changed:
            actions.append(self._changed(topic, mq_set, now_ms))
        return actions

    def _changed(self, topic: str, mq_set: frozenset[MessageQueue], now_ms: int
                 ) -> SubscriptionChanged:  # fmt: skip
        sub = self.subscriptions.get(topic)
        if sub is not None:
            sub.sub_version = now_ms
        mine = frozenset(mq for mq, h in self.table.items()
                         if mq.topic == topic and h.state is not QueueState.REVOKING)  # fmt: skip
        return SubscriptionChanged(topic, mq_set, mine)

    def truncate_not_my_topics(self) -> list[Action]:
        """truncateMessageQueueNotMyTopic: release queues of topics no longer subscribed."""
        actions: list[Action] = []
        for mq, held in list(self.table.items()):
            if mq.topic in self.subscriptions:
                continue
            if held.state is QueueState.ASSIGNED:
                held.state = QueueState.REVOKING
                actions.append(Revoke(mq))
            elif held.state is QueueState.LOCKING:
                del self.table[mq]
        return actions

    # --- outcomes -------------------------------------------------------------------------------
    def on_lock_result(self, asked: Iterable[MessageQueue], granted: Iterable[MessageQueue],
                       now_ms: int) -> list[Action]:
        """A LOCK_BATCH_MQ answer (granted is empty when the call failed)."""
        got = set(granted)
        actions: list[Action] = []
        release: dict[str, set[MessageQueue]] = {}
        topics: set[str] = set()
        for mq in asked:
            held = self.table.get(mq)
            ok = mq in got
            if held is None:
                if ok:  # no longer ours: give the lock back at once
                    release.setdefault(mq.broker_name, set()).add(mq)
                continue
            if held.state is QueueState.LOCKING:
                if ok:
                    held.state, held.locked, held.lock_ms = QueueState.ASSIGNED, True, now_ms
                    actions.append(Assign(mq, True, now_ms))
                    topics.add(mq.topic)
                else:
                    del self.table[mq]
                    self.retry_soon = True
                    log.info("rebalance %s: lock of %s refused; retrying soon", self.group, mq)
            elif held.state is QueueState.ASSIGNED:
                if ok:
                    held.locked, held.lock_ms = True, now_ms
                else:
                    held.locked = False
                    log.warning("rebalance %s: lock of %s lost", self.group, mq)
                actions.append(LockState(mq, ok, held.lock_ms))
        actions.extend(Unlock(b, frozenset(m)) for b, m in sorted(release.items()))
        for topic in sorted(topics):
            actions.append(self._changed(topic, self.topic_queues.get(topic, frozenset()), now_ms))
        return actions

    def on_revoked(self, mq: MessageQueue) -> list[Action]:
        """The user's process released mq (drained, offset committed)."""
        held = self.table.pop(mq, None)
        if held is None:
            return []
        actions: list[Action] = []
        if self.needs_lock:
            actions.append(Unlock(mq.broker_name, frozenset((mq,))))
        if mq in self.wanted.get(mq.topic, frozenset()):
            self.retry_soon = True  # allocated again meanwhile: the next round takes it
        return actions

    def lock_all(self) -> list[Action]:
        """lockMQPeriodically: renew the locks of every held queue, per broker."""
        if not self.needs_lock:
            return []
        per: dict[str, set[MessageQueue]] = {}
        for mq, held in self.table.items():
            if held.state is QueueState.ASSIGNED:
                per.setdefault(mq.broker_name, set()).add(mq)
        return [Lock(b, frozenset(m), renew=True) for b, m in sorted(per.items())]

    def unlock_all(self) -> list[Action]:
        """Shutdown: give back every lock (orderly clustering)."""
        if not self.needs_lock:
            return []
        per: dict[str, set[MessageQueue]] = {}
        for mq in self.table:
            per.setdefault(mq.broker_name, set()).add(mq)
        return [Unlock(b, frozenset(m)) for b, m in sorted(per.items())]

    def held(self) -> list[MessageQueue]:
        """Queues assigned to the user's process now."""
        return [mq for mq, h in self.table.items() if h.state is QueueState.ASSIGNED]

    def destroy(self) -> list[MessageQueue]:
        """Forget every queue (the consumer closed); the ones the user's process held."""
        held = self.held()
        self.table.clear()
        return held


class OffsetAdmin(Protocol):
    """The broker queries computePullFromWhere needs (MQAdminImpl)."""

    def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET."""
        ...

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP."""
        ...


LAST_FAMILY = frozenset({
    ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
    ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST,
    ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET,
    ConsumeFromWhere.CONSUME_FROM_MAX_OFFSET,
})


def compute_pull_from_where(mq: MessageQueue, where: ConsumeFromWhere, store: OffsetStore,
                            admin: OffsetAdmin, consume_timestamp_ms: int, *,
                            memory_first: bool = False) -> int:
    """computePullFromWhereWithException: the first offset to pull; -1 when unknown.

    memory_first: the lite pull consumer reads MEMORY_FIRST_THEN_STORE (a seek wins).
    Raises what admin raises (the queue is not taken now; the next rebalance retries).
    """
    how = ReadOffsetType.MEMORY_FIRST_THEN_STORE if memory_first else ReadOffsetType.READ_FROM_STORE
    last = store.read_offset(mq, how)
    if last >= 0:
        return last
    if last != -1:
        return -1  # the store could not be read: do not guess
    retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
    if where in LAST_FAMILY:
        return 0 if retry else admin.max_offset(mq)
    if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
        return 0
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
        if retry:
            return admin.max_offset(mq)
        return admin.search_offset(mq, consume_timestamp_ms)
    return -1
