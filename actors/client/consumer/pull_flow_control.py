"""The next pull issued by PullMessageService itself: the PullCallback's
`executePullRequestImmediately` on FOUND with DefaultMQPushConsumerImpl.pullMessage's
flow-control gates (client/impl/consumer/DefaultMQPushConsumerImpl.java, RocketMQ 4.9.x).

Java's PullCallback puts the PullRequest back on PullMessageService as soon as an answer is
processed, before and independently of its consumption. Here the ProcessQueue lives in the
user's process and the pull runs in the pull actor, so the actor keeps a mirror of what the
gates read for each queue it re-pulls (a "chain": one PullRequest's successive pulls under
one request id):

- the user's process starts a chain with a snapshot of its ProcessQueue (cached count, cached
  body bytes, first cached offset, the commit offset, after `seq` FOUND answers) and the limits
  (pullThresholdForQueue, pullThresholdSizeForQueue in MiB, consumeConcurrentlyMaxSpan, the
  consumer's cache budget), and sends a fresh snapshot whenever consumption moved the queue;
- the actor adds every FOUND answer it forwards to the estimate (records counted in the pull
  body, body bytes exact for IPv4 records, the whole record otherwise: never below the truth)
  and re-pulls only while every gate passes on that estimate. Otherwise it forwards the
  answer as not re-pulled and the user's process runs Java's exact gates itself (the 50 ms
  flow-control retry and the rest), starting a new chain when it pulls again.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Final

from protocol.record import RecordError, iter_records

MIB: Final = 1024 * 1024


def scan_pull_body(body: bytes | memoryview) -> tuple[int, int, int, int]:
    """(records, body bytes, first queue offset, last queue offset) of a FOUND pull body (a
    record that does not parse ends it, as the decoder stops there)."""
    count = size = 0
    first = last = -1
    try:
        for _pos, r in iter_records(body):
            last = r[4]  # QUEUEOFFSET
            if first < 0:
                first = last
            size += r[13]  # body length
            count += 1
    except RecordError:
        pass
    return count, size, first, last


@dataclass(frozen=True, slots=True)
class PullLimits:
    """The gates' thresholds (-1: no limit)."""

    queue_count: int
    queue_mib: int
    max_span: int
    budget_count: int
    budget_mib: int


class PullChain:
    """One queue's pulls re-issued by the pull actor, and its flow-control estimate."""

    __slots__ = ("broker_id", "commit", "first", "group", "limits", "pending", "row", "seq",
                 "snap_bytes", "snap_count", "snap_seq", "stopped")

    def __init__(self, row: list[Any], group: str, seq: int, count: int, size: int,
                 first: int, commit: int, limits: PullLimits, broker_id: int) -> None:
        self.row = row  # the PULL row; offset, sys_flag and commit offset change per pull
        self.group = group
        self.broker_id = broker_id  # pulled from; another suggested -> the user's process
        self.seq = seq  # FOUND answers forwarded so far (the ProcessQueue's count of them)
        self.snap_seq = seq
        self.snap_count = count
        self.snap_bytes = size
        self.first = first  # first cached offset at the snapshot (-1: none cached)
        self.commit = commit
        self.limits = limits
        self.pending: deque[tuple[int, int, int, int, int]] = deque()  # seq, n, bytes, lo, hi
        self.stopped = False

    def found(self, count: int, size: int, first: int, last: int) -> None:
        """A FOUND answer is forwarded to the user's process."""
        self.seq += 1
        self.pending.append((self.seq, count, size, first, last))

    def snapshot(self, seq: int, count: int, size: int, first: int, commit: int) -> None:
        """The user's ProcessQueue after its seq-th FOUND answer (and what was consumed)."""
        if seq < self.snap_seq:
            return  # taken before the last one (snapshots of one chain arrive in order)
        self.snap_seq, self.snap_count, self.snap_bytes, self.first = seq, count, size, first
        self.commit = commit
        p = self.pending
        while p and p[0][0] <= seq:
            p.popleft()

    def estimate(self) -> tuple[int, int, int]:
        """(cached count, cached body bytes, span) as the user's process has or will have it."""
        count, size, first, last = self.snap_count, self.snap_bytes, self.first, -1
        for _, n, b, lo, hi in self.pending:
            count += n
            size += b
            if first < 0:
                first = lo
            last = hi
        span = last - first if first >= 0 and last >= 0 else 0
        return count, size, span

    def within_queue_limits(self) -> tuple[bool, int, int]:
        """(the per-queue gates pass, cached count, cached bytes)."""
        lim = self.limits
        count, size, span = self.estimate()
        ok = count <= lim.queue_count and size // MIB <= lim.queue_mib and \
            (lim.max_span < 0 or span <= lim.max_span)
        return ok, count, size


class PullChains:
    """Every chain of one pull actor, by request id."""

    def __init__(self) -> None:
        self.chains: dict[int, PullChain] = {}

    def start(self, rid: int, chain: PullChain) -> None:
        """The user's process pulled with a chain allowed."""
        self.chains[rid] = chain

    def stop(self, rid: int) -> None:
        """No more re-pulls of rid (its queue is dropped, the consumer closes, ...)."""
        c = self.chains.pop(rid, None)
        if c is not None:
            c.stopped = True

    def may_repull(self, chain: PullChain) -> bool:
        """Every gate passes on the chain's estimate (its group's budget included)."""
        if chain.stopped:
            return False
        ok, count, size = chain.within_queue_limits()
        if not ok:
            return False
        lim = chain.limits
        if lim.budget_count < 0 and lim.budget_mib < 0:
            return True
        for other in self.chains.values():
            if other is not chain and other.group == chain.group:
                c, s, _ = other.estimate()
                count += c
                size += s
        return not (0 <= lim.budget_count < count or 0 <= lim.budget_mib < size // MIB)
