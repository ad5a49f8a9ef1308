"""ConsumeMessageOrderlyService: client/impl/consumer/ConsumeMessageOrderlyService.java of
RocketMQ 4.9.x.

One queue at a time, in offset order: a queue's request takes messages from its ProcessQueue
(takeMessages), calls the handler under the queue's consume lock and commits (SUCCESS) or puts
them back and suspends the queue for suspend_current_queue_time_ms (RECONSUME_LATER /
SUSPEND_CURRENT_QUEUE_A_MOMENT, an exception, None). A message suspended max_reconsume_times
times (unlimited by default) goes to %RETRY%group (from where the broker moves it to %DLQ%)
and the queue goes on. In CLUSTERING a queue is consumed only while its broker lock holds
(granted by the RebalanceService, renewed every 20 s, considered lost 30 s after the last
grant); otherwise the lock is asked for again after 10 ms and the queue retried. A request
yields after 60 s of continuous consumption so other queues get workers.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from actors.client.consumer.consume_concurrently import reset_retry_topic
from actors.client.consumer.consume_message_service import (
    ConsumeContext,
    ConsumeExecutor,
    ConsumeMessageServiceBase,
    ConsumeResult,
    status_of,
)
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.records import MessageExt
from actors.client.trace_dispatcher import AsyncTraceDispatcher
from protocol.bodies import MessageModel, MessageQueue

log = logging.getLogger(__name__)

MAX_TIME_CONSUME_CONTINUOUSLY_MS = 60_000  # rocketmq.client.maxTimeConsumeContinuously
UNLIMITED = 2**31 - 1  # Integer.MAX_VALUE: orderly's default max reconsume times


class OrderlyHost(Protocol):
    """What the service needs from its consumer (DefaultMQPushConsumerImpl)."""

    group: str
    model: MessageModel

    def now_ms(self) -> int:
        """Wall clock in ms."""
        ...

    def lock_one(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for mq alone (also records the grant in its ProcessQueue)."""
        ...

    def send_to_retry(self, msg: MessageExt, max_reconsume_times: int) -> bool:
        """Send msg to %RETRY%group with delay level 3 + reconsume times (Java's send back)."""
        ...

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """The offset store's updateOffset."""
        ...

    def schedule(self, delay_ms: int, fn: Callable[[], None]) -> None:
        """Run fn on the consumer's scheduler thread after delay_ms."""
        ...

    def on_consumed(self, mq: MessageQueue, ok: int, failed: int, rt_ms: int, calls: int = 1
                    ) -> None:  # fmt: skip
        """Stats: `calls` handler calls finished."""
        ...

    def on_drained(self, pq: ProcessQueue[MessageExt]) -> None:
        """A revoking queue has no message in a handler any more."""
        ...


class OrderlyRequest:
    """Consume one queue until it is empty, suspended, unlocked or has run 60 s."""

    __slots__ = ("mq", "pq", "service")

    def __init__(self, pq: ProcessQueue[MessageExt], mq: MessageQueue,
                 service: ConsumeMessageOrderlyService) -> None:  # fmt: skip
        self.pq = pq
        self.mq = mq
        self.service = service

    def run(self) -> None:
        """ConsumeRequest.run."""
        self.service.consume(self)


class ConsumeMessageOrderlyService(ConsumeMessageServiceBase[OrderlyHost]):
    """Runs an orderly handler, one queue at a time per queue."""

    def __init__(self, host: OrderlyHost, handler: Callable[..., Any], *, workers: int = 20,
                 consume_batch: int = 1, suspend_ms: int = 1000,
                 max_reconsume_times: int = -1, executor: ConsumeExecutor | None = None,
                 tracer: AsyncTraceDispatcher | None = None) -> None:  # fmt: skip
        super().__init__(host, handler, workers=workers, consume_batch=consume_batch,
                         executor=executor, tracer=tracer)
        self.suspend_ms = suspend_ms
        self.max_reconsume = UNLIMITED if max_reconsume_times == -1 else max_reconsume_times
        self.queue_locks: dict[MessageQueue, threading.Lock] = {}  # MessageQueueLock
        self.table_lock = threading.Lock()
        self.stopped = False

    def shutdown(self, timeout_s: float) -> bool:
        """Start nothing more; wait up to timeout_s for running handlers (True: all done)."""
        self.stopped = True
        return self.executor.shutdown(timeout_s)

    def submit_consume_request(self, msgs: Sequence[MessageExt], pq: ProcessQueue[MessageExt],
                               mq: MessageQueue, dispatch_to_consume: bool) -> None:
        """Queue the queue's request when the pull flipped it to consuming."""
        if dispatch_to_consume:
            self.executor.submit((OrderlyRequest(pq, mq, self),))

    def _queue_lock(self, mq: MessageQueue) -> threading.Lock:
        with self.table_lock:
            lock = self.queue_locks.get(mq)
            if lock is None:
                lock = self.queue_locks[mq] = threading.Lock()
            return lock

    def submit_later(self, pq: ProcessQueue[MessageExt], mq: MessageQueue, delay_ms: int) -> None:
        """submitConsumeRequestLater (delay clamped to 10 ms .. 30 s)."""
        if delay_ms == -1:
            delay_ms = self.suspend_ms
        delay_ms = min(max(delay_ms, 10), 30_000)
        self.host.schedule(delay_ms, lambda: self.executor.submit((OrderlyRequest(pq, mq, self),)))

    def try_lock_later_and_reconsume(self, pq: ProcessQueue[MessageExt], mq: MessageQueue,
                                     delay_ms: int) -> None:
        """Ask for the broker lock after delay_ms, then come back (10 ms if granted, else 3 s)."""
        def relock() -> None:
            if self.stopped or pq.dropped:
                return
            self.submit_later(pq, mq, 10 if self.host.lock_one(mq) else 3000)

        self.host.schedule(delay_ms, relock)

    def consume(self, req: OrderlyRequest) -> None:
        """ConsumeRequest.run: take, call, commit or suspend, while the lock holds."""
        pq, mq, host = req.pq, req.mq, self.host
        if pq.dropped or pq.revoking:
            return
        clustering = host.model is MessageModel.CLUSTERING
        with self._queue_lock(mq):
            now = host.now_ms()
            if clustering and not (pq.locked and not pq.is_lock_expired(now)):
                self.try_lock_later_and_reconsume(pq, mq, 100)
                return
            begin = now
            while True:
                if pq.dropped or pq.revoking or self.stopped:
                    break
                now = host.now_ms()
                if clustering and (not pq.locked or pq.is_lock_expired(now)):
                    self.try_lock_later_and_reconsume(pq, mq, 10)
                    break
                if now - begin > MAX_TIME_CONSUME_CONTINUOUSLY_MS:
                    self.submit_later(pq, mq, 10)
                    break
                msgs = pq.take_messages(self.consume_batch, now)
                if not msgs:
                    break  # take_messages cleared `consuming`: the next pull dispatches again
                if not self._consume_batch(pq, mq, msgs):
                    break
        if pq.revoking and not pq.in_flight:
            host.on_drained(pq)

    def _consume_batch(self, pq: ProcessQueue[MessageExt], mq: MessageQueue,
                       msgs: list[MessageExt]) -> bool:
        """One handler call; True to go on with the queue."""
        host = self.host
        shown = reset_retry_topic(msgs, host.group)
        ctx = ConsumeContext(mq)
        begin = host.now_ms()
        with pq.consume_lock:
            if pq.dropped:
                return False
            pq.mark_consuming(msgs, begin)
            try:
                result = self.handler(tuple(shown), ctx) if self.with_context else self.handler(
                    tuple(shown))
                status = status_of(result)
                if status is ConsumeResult.RECONSUME_LATER:
                    status = ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
            except Exception:
                log.exception("orderly handler of %s raised for %d messages of %s: suspending "
                              "the queue", host.group, len(msgs), mq)  # fmt: skip
                status = ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        rt = host.now_ms() - begin
        ok = status is not ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        host.on_consumed(mq, len(msgs) if ok else 0, 0 if ok else len(msgs), rt)
        try:
            return self.process_consume_result(msgs, status, ctx, pq, mq)
        finally:
            pq.release_in_flight(msgs)  # after the offset was stored (see ProcessQueue)

    def process_consume_result(self, msgs: list[MessageExt], status: ConsumeResult,
                               ctx: ConsumeContext, pq: ProcessQueue[MessageExt],
                               mq: MessageQueue) -> bool:
        """Commit, or put back and suspend; True to go on consuming the queue."""
        go_on = True
        commit = -1
        if ctx.auto_commit:
            if status is ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                again = self._check_reconsume_times(msgs)
                if again is not None:
                    pq.make_message_to_consume_again(again)
                    self.submit_later(pq, mq, ctx.suspend_millis)
                    go_on = False
                else:
                    commit = pq.commit()
            else:  # SUCCESS, COMMIT, ROLLBACK
                commit = pq.commit()
        elif status is ConsumeResult.COMMIT:
            commit = pq.commit()
        elif status is ConsumeResult.ROLLBACK:
            pq.rollback()
            self.submit_later(pq, mq, ctx.suspend_millis)
            go_on = False
        elif status is ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT:
            again = self._check_reconsume_times(msgs)
            if again is not None:
                pq.make_message_to_consume_again(again)
                self.submit_later(pq, mq, ctx.suspend_millis)
                go_on = False
        if commit >= 0 and not pq.dropped:
            self.host.update_offset(mq, commit, False)
        return go_on

    def _check_reconsume_times(self, msgs: list[MessageExt]) -> list[MessageExt] | None:
        """checkReconsumeTimes: the messages (reconsume_times + 1) to suspend, None when every
        one went to %RETRY% instead (over the limit)."""
        suspend = False
        out: list[MessageExt] = []
        for m in msgs:
            if m.reconsume_times >= self.max_reconsume and self.host.send_to_retry(
                    m, self.max_reconsume):
                out.append(m)  # Java puts it back too when another message suspends the batch
                continue
            suspend = True
            out.append(dataclasses.replace(m, reconsume_times=m.reconsume_times + 1))
        return out if suspend else None
