"""ProcessQueue: client/impl/consumer/ProcessQueue.java of RocketMQ 4.9.x.

The messages of one assigned queue that were pulled and are not yet consumed, as an OffsetMap
of queue offset -> message (Java's TreeMap, msgTreeMap). The offset to commit
is always the smallest key still present (or the highest offset seen + 1 once it is empty), so
a message in flight pins its queue's offset and nothing is committed past it.

Differences from Java, on purpose (docs: README "Consumer"):
- the consume start time of each message in a handler is kept here (not in a CONSUME_START_TIME
  property), and `expired_in_flight` only reports messages whose handler has been running past
  consumeTimeout: a message still being consumed is never sent back (Java's cleanExpiredMsg
  re-sends it and a late RECONSUME_LATER sends it a second time, apache/rocketmq#1600);
- the cached size is exact (each message's body length is added once and removed once);
- `dropped` is set by the rebalance only after the queue's in-flight results were applied
  (`in_flight_count` tells the rebalance when), so a revoked queue commits what was consumed.

Thread-safe: the pull side puts, consume workers remove, under one lock per queue. Time is a
parameter (milliseconds).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

REBALANCE_LOCK_MAX_LIVE_TIME_MS = 30_000  # rocketmq.client.rebalance.lockMaxLiveTime
REBALANCE_LOCK_INTERVAL_MS = 20_000  # rocketmq.client.rebalance.lockInterval
PULL_MAX_IDLE_TIME_MS = 120_000  # rocketmq.client.pull.pullMaxIdleTime
MIB = 1024 * 1024


class CachedMessage(Protocol):
    """What the queue reads of a message."""

    @property
    def queue_offset(self) -> int: ...

    @property
    def body(self) -> bytes: ...


M = TypeVar("M", bound=CachedMessage)
V = TypeVar("V")
_GONE = object()


class OffsetMap(Generic[V]):
    """Queue offset -> message in offset order (the TreeMap of a ProcessQueue), built for how
    a queue is used: pulls add offsets in rising order and handlers remove them in about that
    order. The offsets are kept in a list in order; a removed one stays there until the first
    or last lookup walks past it, so adding at the end and removing are O(1) amortized (a
    SortedDict cost 1.0 us a message for the two, this 0.1). An offset below the last one
    (a redelivery) is inserted by bisection. The list holds at most the live offsets' span
    (the pull gates bound it) plus what the next walk drops."""

    __slots__ = ("_d", "_head", "_keys")

    def __init__(self) -> None:
        self._d: dict[int, V] = {}
        self._keys: list[int] = []  # rising; those before _head and some after are gone
        self._head = 0

    def __len__(self) -> int:
        return len(self._d)

    def __bool__(self) -> bool:
        return bool(self._d)

    def __contains__(self, off: int) -> bool:
        return off in self._d

    def __setitem__(self, off: int, value: V) -> None:
        d = self._d
        if off not in d:
            keys = self._keys
            if not keys or off > keys[-1]:
                keys.append(off)
            else:
                self._insert(off)
        d[off] = value

    def _insert(self, off: int) -> None:
        """List a new offset below the last listed one (a redelivery), by bisection."""
        keys = self._keys
        i = bisect_left(keys, off, self._head)
        if i == len(keys) or keys[i] != off:  # else its old place is still listed
            keys.insert(i, off)

    def put_messages(self: OffsetMap[M], msgs: Iterable[M]) -> list[M]:
        """Put each message at its queue offset (one there already is replaced); those whose
        offset was not there, in order. One call for a pull's batch: 0.1 us a message where
        `in` and `[]=` cost 0.5."""
        d = self._d
        keys = self._keys
        new: list[M] = []
        for m in msgs:
            off = m.queue_offset
            if off not in d:
                if not keys or off > keys[-1]:
                    keys.append(off)
                else:
                    self._insert(off)
                new.append(m)
            d[off] = m
        return new

    def pop_messages(self: OffsetMap[M], msgs: Iterable[M]) -> list[M]:
        """Remove each message's queue offset; the messages that were there."""
        d = self._d
        gone: list[M] = []
        for m in msgs:
            v = d.pop(m.queue_offset, _GONE)
            if v is not _GONE:
                gone.append(v)  # type: ignore[arg-type]
        if not d:
            self._keys.clear()
            self._head = 0
        return gone

    def pop(self, off: int, default: V | None = None) -> V | None:
        """Remove off; its value, or default when it was not there."""
        v = self._d.pop(off, _GONE)
        if v is _GONE:
            return default
        if not self._d:
            self._keys.clear()
            self._head = 0
        return v  # type: ignore[return-value]

    def first(self) -> int:
        """The smallest offset (the map is not empty)."""
        keys, d, h = self._keys, self._d, self._head
        while keys[h] not in d:
            h += 1
        if h > 64 and h * 2 > len(keys):
            del keys[:h]
            h = 0
        self._head = h
        return keys[h]

    def last(self) -> int:
        """The largest offset (the map is not empty)."""
        keys, d = self._keys, self._d
        while keys[-1] not in d:
            keys.pop()
        return keys[-1]

    def pop_first(self) -> tuple[int, V]:
        """Remove the smallest offset (the map is not empty): (offset, value)."""
        off = self.first()
        v = self._d.pop(off)
        self._head += 1
        if not self._d:
            self._keys.clear()
            self._head = 0
        return off, v

    def items(self) -> Iterator[tuple[int, V]]:
        """(offset, value) in offset order."""
        d = self._d
        return ((k, d[k]) for k in self._keys[self._head :] if k in d)

    def values(self) -> Iterator[V]:
        """The values, in no particular order."""
        return iter(self._d.values())

    def clear(self) -> None:
        """Remove everything."""
        self._d.clear()
        self._keys.clear()
        self._head = 0


@dataclass(frozen=True, slots=True)
class ProcessQueueInfo:
    """ProcessQueueInfo of GET_CONSUMER_RUNNING_INFO."""

    commit_offset: int
    cached_msg_min_offset: int
    cached_msg_max_offset: int
    cached_msg_count: int
    cached_msg_size_in_mib: int
    transaction_msg_min_offset: int
    transaction_msg_max_offset: int
    transaction_msg_count: int
    locked: bool
    try_unlock_times: int
    last_lock_timestamp: int
    dropped: bool
    last_pull_timestamp: int
    last_consume_timestamp: int

    def to_wire(self) -> dict[str, int | bool]:
        """Java's JSON field names (fastjson: `droped`, `cachedMsgSizeInMiB`)."""
        return {
            "commitOffset": self.commit_offset,
            "cachedMsgMinOffset": self.cached_msg_min_offset,
            "cachedMsgMaxOffset": self.cached_msg_max_offset,
            "cachedMsgCount": self.cached_msg_count,
            "cachedMsgSizeInMiB": self.cached_msg_size_in_mib,
            "transactionMsgMinOffset": self.transaction_msg_min_offset,
            "transactionMsgMaxOffset": self.transaction_msg_max_offset,
            "transactionMsgCount": self.transaction_msg_count,
            "locked": self.locked,
            "tryUnlockTimes": self.try_unlock_times,
            "lastLockTimestamp": self.last_lock_timestamp,
            "droped": self.dropped,
            "lastPullTimestamp": self.last_pull_timestamp,
            "lastConsumeTimestamp": self.last_consume_timestamp,
        }


class ProcessQueue(Generic[M]):
    """The pulled, not yet consumed messages of one message queue."""

    def __init__(self, now_ms: int) -> None:
        self.lock = threading.Lock()
        self.msgs: OffsetMap[M] = OffsetMap()
        self.consuming_orderly: OffsetMap[M] = OffsetMap()  # taken by an orderly handler
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.msg_acc_cnt = 0  # messages behind the broker's max offset at the last pull
        self.dropped = False
        self.revoking = False  # no new pull, no new handler; running handlers finish first
        self.locked = False
        self.consuming = False  # orderly: a consume request is queued or running
        self.try_unlock_times = 0
        self.last_pull_ms = now_ms
        self.last_consume_ms = now_ms
        self.last_lock_ms = now_ms
        self.in_flight: dict[int, int] = {}  # offset -> consume start (ms) while in a handler
        # a pulled batch counted before it is decoded (expect): (count, size, first, last)
        self.expected: tuple[int, int, int, int] | None = None
        self.consume_lock = threading.Lock()  # orderly: held while the handler runs

    # --- pull side --------------------------------------------------------------------------
    def expect(self, count: int, size: int, first: int, last: int) -> None:
        """A pulled batch is about to be decoded and put: count it now, by upper bounds (at
        most `count` messages of at most `size` body bytes, offsets within [first, last]), so
        the gates of the queue's next pull, sent before the decode, see it; put_messages
        replaces the bounds with what it puts."""
        with self.lock:
            self._unexpect()
            self.expected = (count, size, first, last)
            self.msg_count += count
            self.msg_size += size

    def unexpect(self) -> None:
        """Drop the expected batch's bounds (it will not be put)."""
        with self.lock:
            self._unexpect()

    def _unexpect(self) -> None:
        e = self.expected
        if e is not None:
            self.expected = None
            self.msg_count -= e[0]
            self.msg_size -= e[1]

    def put_messages(self, msgs: Sequence[M], max_offset: int = -1) -> bool:
        """Cache pulled messages; True when an orderly consume request should be dispatched."""
        with self.lock:
            self._unexpect()
            d = self.msgs
            new = d.put_messages(msgs)
            if new:
                self.queue_offset_max = new[-1].queue_offset
                self.msg_count += len(new)
                self.msg_size += sum([len(m.body) for m in new])
            dispatch = False
            if msgs and d and not self.consuming:
                dispatch = True
                self.consuming = True
            if msgs and max_offset >= 0:
                acc = max_offset - msgs[-1].queue_offset
                if acc > 0:
                    self.msg_acc_cnt = acc
            return dispatch

    def max_span(self) -> int:
        """Last cached offset minus the first (consumeConcurrentlyMaxSpan's measure), the
        expected batch's bounds counted."""
        with self.lock:
            d = self.msgs
            e = self.expected
            if e is None:
                return d.last() - d.first() if d else 0
            if not d:
                return e[3] - e[2]
            return max(d.last(), e[3]) - min(d.first(), e[2])

    def cached_mib(self) -> int:
        """Cached body bytes in whole MiB, as the pull gate compares them."""
        return self.msg_size // MIB

    def is_pull_expired(self, now_ms: int, idle_ms: int = PULL_MAX_IDLE_TIME_MS) -> bool:
        """No pull for idle_ms: the rebalance drops and recreates the queue (push only)."""
        return now_ms - self.last_pull_ms > idle_ms

    def is_lock_expired(self, now_ms: int, max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS
                        ) -> bool:  # fmt: skip
        """The broker lock was last confirmed more than max_live_ms ago."""
        return now_ms - self.last_lock_ms > max_live_ms

    def set_locked(self, locked: bool, now_ms: int) -> None:
        """Record a LOCK_BATCH_MQ answer (a granted lock refreshes its timestamp)."""
        self.locked = locked
        if locked:
            self.last_lock_ms = now_ms

    # --- concurrent consumption ---------------------------------------------------------------
    def mark_consuming(self, msgs: Iterable[M], now_ms: int) -> None:
        """A handler starts on msgs (their consume start time is kept for the timeout sweep)."""
        with self.lock:
            f = self.in_flight
            for m in msgs:
                f[m.queue_offset] = now_ms

    def remove_messages(self, msgs: Iterable[M], now_ms: int) -> int:
        """Forget consumed msgs; the offset to commit (-1 when nothing was cached).

        Their in-flight marks stay until release_in_flight: the caller stores the offset first,
        so a revoke that waits for "nothing in flight" never persists an older offset.
        """
        with self.lock:
            self.last_consume_ms = now_ms
            d = self.msgs
            if not d:
                return -1
            result = self.queue_offset_max + 1
            gone = d.pop_messages(msgs)
            self.msg_count -= len(gone)
            self.msg_size -= sum([len(m.body) for m in gone])
            if d:
                result = d.first()
            return result

    def release_in_flight(self, msgs: Iterable[M]) -> None:
        """The handler's result for msgs was applied (or they stay cached for a retry)."""
        with self.lock:
            f = self.in_flight
            for m in msgs:
                f.pop(m.queue_offset, None)

    def in_flight_count(self) -> int:
        """Messages now inside a handler."""
        return len(self.in_flight)

    def expired_in_flight(self, now_ms: int, timeout_ms: int) -> list[tuple[int, int]]:
        """(offset, started ms) of the messages whose handler has run longer than timeout_ms."""
        with self.lock:
            return sorted((o, t) for o, t in self.in_flight.items() if now_ms - t > timeout_ms)

    def first_offset(self) -> int | None:
        """The smallest cached offset (the one pinning the commit), if any."""
        with self.lock:
            return self.msgs.first() if self.msgs else None

    # --- orderly consumption ------------------------------------------------------------------
    def take_messages(self, batch: int, now_ms: int) -> list[M]:
        """Move up to batch messages, in offset order, to the consuming set."""
        with self.lock:
            self.last_consume_ms = now_ms
            out: list[M] = []
            d = self.msgs
            c = self.consuming_orderly
            while d and len(out) < batch:
                off, m = d.pop_first()
                c[off] = m
                out.append(m)
            if not out:
                self.consuming = False
            return out

    def commit(self) -> int:
        """The consuming set was consumed: forget it; the next offset (-1 when it was empty)."""
        with self.lock:
            c = self.consuming_orderly
            if not c:
                return -1
            last = c.last()
            self.msg_count -= len(c)
            self.msg_size -= sum(len(m.body) for m in c.values())
            c.clear()
            return last + 1

    def rollback(self) -> None:
        """Put the whole consuming set back to be consumed again."""
        with self.lock:
            d = self.msgs
            for off, m in self.consuming_orderly.items():
                d[off] = m
            self.consuming_orderly.clear()

    def make_message_to_consume_again(self, msgs: Iterable[M]) -> None:
        """Put msgs back from the consuming set (orderly SUSPEND_CURRENT_QUEUE_A_MOMENT)."""
        with self.lock:
            for m in msgs:
                off = m.queue_offset
                self.consuming_orderly.pop(off, None)
                self.msgs[off] = m

    def has_temp_message(self) -> bool:
        """Messages are still cached (not yet taken)."""
        with self.lock:
            return bool(self.msgs)

    def clear(self) -> None:
        """Forget everything (a reset offset)."""
        with self.lock:
            self.msgs.clear()
            self.consuming_orderly.clear()
            self.in_flight.clear()
            self.expected = None
            self.msg_count = 0
            self.msg_size = 0
            self.queue_offset_max = 0

    def info(self, commit_offset: int) -> ProcessQueueInfo:
        """The running info reported to GET_CONSUMER_RUNNING_INFO."""
        with self.lock:
            d, c = self.msgs, self.consuming_orderly
            return ProcessQueueInfo(
                commit_offset=commit_offset,
                cached_msg_min_offset=d.first() if d else 0,
                cached_msg_max_offset=d.last() if d else 0,
                cached_msg_count=len(d),
                cached_msg_size_in_mib=self.msg_size // MIB,
                transaction_msg_min_offset=c.first() if c else 0,
                transaction_msg_max_offset=c.last() if c else 0,
                transaction_msg_count=len(c),
                locked=self.locked,
                try_unlock_times=self.try_unlock_times,
                last_lock_timestamp=self.last_lock_ms,
                dropped=self.dropped,
                last_pull_timestamp=self.last_pull_ms,
                last_consume_timestamp=self.last_consume_ms,
            )
