"""DefaultLitePullConsumerImpl: client/impl/consumer/DefaultLitePullConsumerImpl.java of
RocketMQ 4.9.x, the lite pull consumer's core in the user's process.

Queues come from the group's rebalance (subscribe) or from the user (assign), never both.
Each held queue is pulled in the background as the push consumer's are (the same gates, plus
the cache of every queue together: more than pullThresholdForAll messages waiting for poll ->
50 ms later); a pull result becomes one ConsumeRequest in the poll cache. poll() takes one
request (its messages leave the ProcessQueue; the queue's consume offset becomes its smallest
offset still cached) after committing, when auto-commit is on and 5 s have passed, the consume
offsets of earlier polls (maybeAutoCommit). seek() replaces a queue's pull position: its cached
messages and its outstanding pull are dropped. Lite pulls carry the subscription and no commit
offset (the broker needs no heartbeat to serve them), suspended 20 s at the broker.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from actors.client.consumer.consumer_config import ConsumerConfig, RebalanceListener, ServiceState
from actors.client.consumer.consumer_core import (
    ConsumerImplBase,
)
from actors.client.consumer.filter_api import build_subscription
from actors.client.consumer.offset_store import ReadOffsetType
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.consumer.pull_api_wrapper import build_sys_flag
from actors.client.consumer.pull_callback import (
    PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL,
    PULL_TIME_DELAY_MS_WHEN_SUSPEND,
    now_ms,
)
from actors.client.consumer.pull_request import PullRequest
from actors.client.errors import ClientErrorCode, MQClientError
from actors.client.records import MessageExt
from actors.client.trace_dispatcher import sub_after, sub_before
from protocol.bodies import ConsumeType, MessageQueue, SubscriptionData
from protocol.trace import ConsumeReturnType

log = logging.getLogger(__name__)


@dataclass
class LitePullConsumerConfig(ConsumerConfig):
    """DefaultLitePullConsumer's own settings (Java defaults)."""

    pull_batch: int = 10
    auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    pull_threshold_for_all: int = 10_000
    consume_max_span: int = 2000
    broker_suspend_max_ms: int = 20_000

    def check(self) -> None:
        """checkConfig."""
        super().check()
        if self.auto_commit_interval_ms < 1000:
            raise ValueError("auto_commit_interval_ms must be >= 1000")
        if self.pull_threshold_for_all < 1:
            raise ValueError("pull_threshold_for_all must be >= 1")


class ConsumeRequest:
    """One pull's messages waiting for poll()."""

    __slots__ = ("mq", "msgs", "pq")

    def __init__(self, msgs: list[MessageExt], mq: MessageQueue,
                 pq: ProcessQueue[MessageExt]) -> None:  # fmt: skip
        self.msgs = msgs
        self.mq = mq
        self.pq = pq


class DefaultLitePullConsumerImpl(ConsumerImplBase):
    """The lite pull consumer's core (one per LitePullConsumer)."""

    CONSUME_TYPE = ConsumeType.CONSUME_ACTIVELY
    ROLE = "LitePullConsumer"
    DEFER_REGISTER = True
    cfg: LitePullConsumerConfig

    def __init__(self, cfg: LitePullConsumerConfig,
                 listener: RebalanceListener | None = None) -> None:  # fmt: skip
        super().__init__(cfg, listener)
        self.cache: deque[ConsumeRequest] = deque()
        self.cache_msgs = 0
        self.cond = threading.Condition()
        self.consume_offsets: dict[MessageQueue, int] = {}
        self.requests: dict[MessageQueue, PullRequest] = {}
        self.paused_queues: set[MessageQueue] = set()
        self.assigned_only = False
        self.assigned: set[MessageQueue] = set()  # what assign() was last given
        self.next_auto_commit = 0.0
        self.pending_assign: set[MessageQueue] | None = None
        self.start_offsets: dict[MessageQueue, int] = {}
        self.on_data: Callable[[], None] | None = None  # the asyncio twin's wake-up

    # -- hooks ----------------------------------------------------------------------------------
    def _start_consume(self) -> None:
        self.next_auto_commit = time.monotonic() + self.cfg.auto_commit_interval_ms / 1000.0

    def start(self) -> None:
        """Start; the group registers at the first subscribe() / assign() (or now, when one came
        before start)."""
        super().start()
        if self.pending_assign is not None:
            self.assign(self.pending_assign)
            self.pending_assign = None
        elif self.subscriptions:
            self.register(rebalance=True)

    def correct_tags_offset(self) -> bool:
        """PullTaskImpl moves only the pull offset on NO_NEW / NO_MATCHED."""
        return False

    def gates_read_process_queue(self) -> bool:
        """No: pullThresholdForAll counts the consume cache, filled after the decode (so
        PullTaskImpl's order: put, then the next pull)."""
        return False

    def pull_gate(self, req: PullRequest) -> bool:
        if req.mq in self.paused_queues:
            self.pulling.later(req, PULL_TIME_DELAY_MS_WHEN_SUSPEND)
            return False
        if self.cache_msgs > self.cfg.pull_threshold_for_all or \
                req.pq.max_span() > self.cfg.consume_max_span:
            self.stats.flow_controlled += 1
            self.pulling.later(req, PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL)
            return False
        return True

    def pull_spec(self, mq: MessageQueue, sub: SubscriptionData, slave: bool
                  ) -> tuple[int, int, str | None, int]:  # fmt: skip
        return build_sys_flag(False, True, True, slave), 0, sub.sub_string, \
            self.cfg.broker_suspend_max_ms

    def dispatch_pulled(self, msgs: list[MessageExt], pq: ProcessQueue[MessageExt],
                        mq: MessageQueue, dispatch_to_consume: bool) -> None:  # fmt: skip
        tracer = self.tracer
        if tracer is not None:  # Java's lite consumer traces what a pull found, as consumed
            t = now_ms()
            before = sub_before(self.group, msgs, t)
            if before is not None:
                tracer.append(before)
                tracer.append(sub_after(before, len(msgs), True, ConsumeReturnType.SUCCESS, t))
        with self.cond:
            self.cache.append(ConsumeRequest(msgs, mq, pq))
            self.cache_msgs += len(msgs)
            self.cond.notify()
        if self.on_data is not None:
            self.on_data()

    def _before_release(self, mq: MessageQueue, pq: ProcessQueue[MessageExt]) -> None:
        """Java persists what was committed (not what poll returned last)."""
        self._drop_cached(mq)
        self.consume_offsets.pop(mq, None)
        req = self.requests.pop(mq, None)
        if req is not None:
            req.cancelled = True

    def offset_illegal(self, req: PullRequest, next_begin: int) -> None:
        """PullTaskImpl: pull on from the broker's offset (dropped, an assigned queue would
        never be taken again: assign() runs no rebalance)."""
        req.next_offset = next_begin
        self.pulling.later(req, 0)

    def _take_failed(self, failed: list[tuple[MessageQueue, ProcessQueue[MessageExt]]]) -> None:
        """Assigned queues whose start offset could not be read are tried again (no rebalance
        round would); subscribed ones are given back to the next round."""
        if not self.assigned_only:
            super()._take_failed(failed)
            return
        retry = [(mq, pq) for mq, pq in failed
                 if self.state is ServiceState.RUNNING and mq in self.assigned]  # fmt: skip
        if retry:
            self.scheduler.schedule(self.cfg.pull_time_delay_ms_when_exception,
                                    lambda: self._take([(mq, pq) for mq, pq in retry
                                                        if mq in self.assigned
                                                        and mq not in self.table]))

    def _pull(self, req: PullRequest) -> None:
        if req.cancelled:  # a seek replaced it (its timer fired late): seek's is the live one
            return
        self.requests[req.mq] = req
        super()._pull(req)

    def _took(self, mq: MessageQueue, offset: int) -> None:
        self.consume_offsets[mq] = offset

    def subscribe(self, topic: str, expression: str = "*", expression_type: str | None = None
                  ) -> None:  # fmt: skip
        """Subscribe (the group is rebalanced); not with assign()."""
        if self.assigned_only:
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT,
                                "Subscribe and assign are mutually exclusive.")
        super().subscribe(topic, expression, expression_type)
        if self.state is ServiceState.RUNNING:
            self.register(rebalance=True)

    # -- assign / subscribe -----------------------------------------------------------------------
    def _start_offset(self, mq: MessageQueue) -> int | None:
        return self.start_offsets.pop(mq, None)

    def assign(self, mqs: Iterable[MessageQueue], expression: str = "*",
               offsets: dict[MessageQueue, int] | None = None) -> None:
        """Hold exactly mqs (no rebalance; not with subscribe()); the ones no longer given
        are released with the offset committed last."""
        if self.registered and not self.assigned_only:
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT,
                                "Subscribe and assign are mutually exclusive.")
        self.assigned_only = True
        want = set(mqs)
        self.assigned = want
        self.start_offsets.update(offsets or {})
        with self.lock:
            for mq in want:
                if mq.topic not in self.subscriptions:
                    self.subscriptions[mq.topic] = build_subscription(mq.topic, expression, None,
                                                                      now_ms())
            drop = [mq for mq in self.table if mq not in want]
        if self.state is not ServiceState.RUNNING:
            self.pending_assign = want
            return
        self.register(rebalance=False)
        self._subscriptions_changed()
        for mq in drop:
            self.table[mq].revoking = True
            self._finish_revoke(mq, True)
        fresh = [(mq, ProcessQueue[MessageExt](now_ms())) for mq in sorted(want)
                 if mq not in self.table]  # fmt: skip
        if fresh:
            self._take(fresh)  # here, not on the scheduler: assign() returns with them held

    # -- poll ---------------------------------------------------------------------------------
    def poll(self, timeout_s: float) -> list[MessageExt]:
        """Messages of one pull (or [] after timeout_s); auto-commits first when due."""
        if self.state is not ServiceState.RUNNING:
            raise MQClientError(ClientErrorCode.CLIENT_CLOSED,
                                f"The consumer service state not OK, {self.state.value}")
        if timeout_s < 0:
            raise ValueError("Timeout must not be negative")
        if self.cfg.auto_commit and time.monotonic() >= self.next_auto_commit:
            self.commit_all(persist=False)
            self.next_auto_commit = time.monotonic() + self.cfg.auto_commit_interval_ms / 1000.0
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while True:
                while self.cache:
                    req = self.cache.popleft()
                    self.cache_msgs -= len(req.msgs)
                    if req.pq.dropped or req.pq.revoking:
                        continue
                    offset = req.pq.remove_messages(req.msgs, now_ms())
                    if offset >= 0:
                        self.consume_offsets[req.mq] = offset
                    return req.msgs
                left = deadline - time.monotonic()
                if left <= 0 or self.state is not ServiceState.RUNNING:
                    return []
                self.cond.wait(left)

    def _drop_cached(self, mq: MessageQueue) -> None:
        with self.cond:
            keep = deque(r for r in self.cache if r.mq != mq)
            self.cache_msgs = sum(len(r.msgs) for r in keep)
            self.cache = keep

    # -- offsets ------------------------------------------------------------------------------
    def commit_all(self, persist: bool = True) -> None:
        """commitSync: every held queue's consume offset into the store (and to the broker)."""
        store = self.offset_store
        if store is None:
            return
        held = [mq for mq in list(self.consume_offsets) if mq in self.table]
        for mq in held:
            store.update_offset(mq, self.consume_offsets[mq], False)
        if held:
            self.persist(held, sync=persist)

    def commit(self, offsets: dict[MessageQueue, int], persist: bool = True) -> None:
        """Commit the given offsets (the next offset to consume of each queue)."""
        store = self.offset_store
        if store is None:
            return
        for mq, off in offsets.items():
            if off >= 0:
                store.update_offset(mq, off, False)
        if persist:
            self.persist(list(offsets), sync=True)

    def position(self, mq: MessageQueue) -> int:
        """The offset the next poll of mq returns from (-1 when mq is not held)."""
        with self.cond:
            cached = any(r.mq == mq for r in self.cache)
        pq = self.table.get(mq)
        if pq is None:
            return -1
        req = self.requests.get(mq)
        if cached or pq.msg_count or req is None:
            return self.consume_offsets.get(mq, -1)
        return req.next_offset

    def committed(self, mq: MessageQueue) -> int:
        """The offset the broker (or the local file) holds for mq (-1: none)."""
        assert self.offset_store is not None
        return self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Pull mq from offset next (cached messages and the outstanding pull are dropped)."""
        pq = self.table.get(mq)
        if pq is None:
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT,
                                f"The message queue is not in assigned list, message queue: {mq}")
        assert self.admin is not None
        lo, hi = self.admin.min_offset(mq), self.admin.max_offset(mq)
        if not lo <= offset <= hi:
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT,
                                f"Seek offset illegal, seek offset = {offset}, min offset = {lo}, "
                                f"max offset = {hi}")
        old = self.requests.get(mq)
        if old is not None:
            old.cancelled = True
        self._drop_cached(mq)
        pq.clear()
        self.consume_offsets[mq] = offset
        req = PullRequest(mq, pq, offset, False)
        self.scheduler.submit(lambda: self._pull(req))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        """Stop pulling mqs (what is cached is still polled)."""
        self.paused_queues.update(mqs)

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        """Pull mqs again."""
        self.paused_queues.difference_update(mqs)

    def _stop_consume(self, timeout_s: float) -> bool:
        with self.cond:
            self.cond.notify_all()
        return True

    def snapshot(self) -> dict[str, Any]:
        """What is cached for poll (for stats)."""
        return {"cached_requests": len(self.cache), "cached_msgs": self.cache_msgs}
