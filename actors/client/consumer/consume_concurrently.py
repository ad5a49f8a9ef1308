"""ConsumeMessageConcurrentlyService: client/impl/consumer/ConsumeMessageConcurrentlyService.java
of RocketMQ 4.9.x.

Pulled messages are split into requests of consumeMessageBatchMaxSize and run on the consume
executor; the handler gets an immutable list. processConsumeResult: SUCCESS acknowledges
messages [0..ack_index], RECONSUME_LATER (an exception, None) none. In CLUSTERING every message
not acknowledged is sent back (CONSUMER_SEND_MSG_BACK with the context's delay level; the
broker moves it to %DLQ% after max_reconsume_times, 16 by default); one whose send-back fails
(and whose fallback send to %RETRY%group fails too) stays in the ProcessQueue, so the offset
never passes it, and is consumed again here 5 s later with reconsume_times + 1. In
BROADCASTING failures are logged and dropped. The offset to commit is then the queue's smallest
offset still in flight.

Differences from Java, on purpose: a request whose queue is being revoked is not started (its
messages are left for the queue's next owner) but the results of running ones are applied, and
a late result is discarded only once the queue was dropped; the consumeTimeout sweep
(`report_expired`) never sends back a message whose handler is still running.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from actors.client.consumer.consume_message_service import (
    SLICE_S,
    ConsumeContext,
    ConsumeExecutor,
    ConsumeMessageServiceBase,
    ConsumeResult,
    Request,
    run_each,
    status_of,
)
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.records import MessageExt
from actors.client.trace_dispatcher import AsyncTraceDispatcher
from protocol.bodies import MessageModel, MessageQueue
from protocol.codes import RETRY_GROUP_TOPIC_PREFIX, retry_topic
from protocol.message import PROPERTY_RETRY_TOPIC

log = logging.getLogger(__name__)

SEND_BACK_RETRY_DELAY_MS = 5_000  # submitConsumeRequestLater
MAX_CALLS_PER_REQUEST = 32  # handler calls one ConsumeRequest may carry (a default pull's)


class ConcurrentlyHost(Protocol):
    """What the service needs from its consumer (DefaultMQPushConsumerImpl)."""

    group: str
    model: MessageModel

    def now_ms(self) -> int:
        """Wall clock in ms."""
        ...

    def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str) -> bool:
        """CONSUMER_SEND_MSG_BACK, else a plain send to %RETRY%group; False when both failed."""
        ...

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """The offset store's updateOffset."""
        ...

    def schedule(self, delay_ms: int, fn: Callable[[], None]) -> None:
        """Run fn on the consumer's scheduler thread after delay_ms."""
        ...

    def on_consumed(self, mq: MessageQueue, ok: int, failed: int, rt_ms: int, calls: int = 1
                    ) -> None:  # fmt: skip
        """Stats: `calls` handler calls finished (ConsumerStatsManager)."""
        ...

    def on_drained(self, pq: ProcessQueue[MessageExt]) -> None:
        """A revoking queue has no message in a handler any more."""
        ...


def reset_retry_topic(msgs: Sequence[MessageExt], group: str) -> list[MessageExt]:
    """resetRetryAndNamespace: a message redelivered from %RETRY%group shows its real topic."""
    rt = retry_topic(group)
    out = list(msgs)
    for i, m in enumerate(out):
        if m.topic == rt:
            real = m.properties.get(PROPERTY_RETRY_TOPIC)
            if real:
                out[i] = dataclasses.replace(m, topic=real)
    return out


class ConsumeRequest:
    """One handler call over at most consumeMessageBatchMaxSize messages of one queue, or,
    with `per_call`, several calls in turn over consecutive slices of that many (what one
    worker would have taken at once: the service groups calls once they are measured cheap)."""

    __slots__ = ("mq", "msgs", "per_call", "pq", "service")

    def __init__(self, msgs: tuple[MessageExt, ...], pq: ProcessQueue[MessageExt], mq: MessageQueue,
                 service: ConsumeMessageConcurrentlyService, per_call: int = 0) -> None:
        self.msgs = msgs
        self.pq = pq
        self.mq = mq
        self.service = service
        self.per_call = per_call  # messages a handler call (0: all of them in one)

    def run(self) -> None:
        """Call the handler, then apply its result."""
        self.service.consume(self)


class ConsumeMessageConcurrentlyService(ConsumeMessageServiceBase[ConcurrentlyHost]):
    """Runs a concurrently handler over the pulled messages."""

    def __init__(self, host: ConcurrentlyHost, handler: Callable[..., Any], *, workers: int = 20,
                 consume_batch: int = 1, consume_timeout_ms: int = 15 * 60_000,
                 executor: ConsumeExecutor | None = None,
                 tracer: AsyncTraceDispatcher | None = None) -> None:  # fmt: skip
        super().__init__(host, handler, workers=workers, consume_batch=consume_batch,
                         executor=executor, tracer=tracer, consume_timeout_ms=consume_timeout_ms)
        self.consume_timeout_ms = consume_timeout_ms
        self.reported: set[tuple[MessageQueue, int]] = set()
        # moving average of a handler call's run time (0: unmeasured); any worker updates it,
        # and an update lost to another worker's only delays the estimate
        self.call_cost_s = 0.0

    def shutdown(self, timeout_s: float) -> bool:
        """Start nothing more; wait up to timeout_s for running handlers (True: all done)."""
        return self.executor.shutdown(timeout_s)

    def submit_consume_request(self, msgs: Sequence[MessageExt], pq: ProcessQueue[MessageExt],
                               mq: MessageQueue, dispatch_to_consume: bool = True) -> None:
        """Split msgs into requests of consume_batch and queue them."""
        n = self.consume_batch
        if len(msgs) <= n:
            self.executor.submit((ConsumeRequest(tuple(msgs), pq, mq, self),))
            return
        group = self._calls_per_request()
        if group > 1:  # cheap calls: those a worker would take at once ride one request
            size = n * group
            self.executor.submit([ConsumeRequest(tuple(msgs[i : i + size]), pq, mq, self, n)
                                  for i in range(0, len(msgs), size)])  # fmt: skip
        elif n == 1:  # Java's default: one request per message
            self.executor.submit([ConsumeRequest((m,), pq, mq, self) for m in msgs])
        else:
            self.executor.submit([ConsumeRequest(tuple(msgs[i : i + n]), pq, mq, self)
                                  for i in range(0, len(msgs), n)])  # fmt: skip

    def run_batch(self, batch: Sequence[Request]) -> None:
        """A worker's batch: every request's handler in turn, then the fully acknowledged
        ones applied per queue (one ProcessQueue and offset-store round per queue, not per
        message). Their messages count as started together, so a revoke waits for them."""
        reqs = [r for r in batch if isinstance(r, ConsumeRequest)]
        if len(reqs) != len(batch) or (len(reqs) < 2 and not (reqs and reqs[0].per_call)):
            run_each(batch)
            return
        host = self.host
        now = host.now_ms
        started: dict[ProcessQueue[MessageExt], list[MessageExt]] = {}
        for req in reqs:
            if not (req.pq.dropped or req.pq.revoking):
                started.setdefault(req.pq, []).extend(req.msgs)
        t = now()
        for pq, begun in started.items():
            pq.mark_consuming(begun, t)
        handler = self.handler
        with_context = self.with_context
        success = ConsumeResult.SUCCESS
        acked: dict[ProcessQueue[MessageExt], tuple[MessageQueue, list[MessageExt], list[int]]] = {}
        others: list[tuple[ConsumeRequest, ConsumeResult, ConsumeContext]] = []
        clock = time.perf_counter()
        for req in reqs:
            pq = req.pq
            if pq not in started:
                continue  # not started: the messages stay for the queue's next owner
            mq = req.mq
            whole = req.msgs
            shown: tuple[MessageExt, ...] = whole
            if whole and whole[0].topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # one queue's
                shown = tuple(reset_retry_topic(whole, host.group))
            step = req.per_call if 0 < req.per_call < len(whole) else len(whole) or 1
            for i in range(0, len(whole) or 1, step):
                part = shown if step >= len(whole) else shown[i : i + step]
                own = part if shown is whole else whole[i : i + step]  # the stored ones
                ctx = ConsumeContext(mq) if with_context else None
                try:
                    result = handler(part, ctx) if ctx is not None else handler(part)
                    status = result if result is success else self._status(result, len(part), mq)
                except Exception:
                    log.exception("consume handler of %s raised for %d messages of %s: "
                                  "RECONSUME_LATER", host.group, len(part), mq)  # fmt: skip
                    status = ConsumeResult.RECONSUME_LATER
                if status is success and (ctx is None or ctx.ack_index >= len(part) - 1):
                    entry = acked.get(pq)
                    if entry is None:
                        entry = acked[pq] = (mq, [], [0])
                    entry[1].extend(own)
                    entry[2][0] += 1
                else:
                    call = req if own is whole else ConsumeRequest(own, pq, mq, self)
                    others.append((call, status, ctx or ConsumeContext(mq)))
        # the handlers ran one after the other: each call's consume RT is the batch's average
        # (its sum is what a clock read per call gives; no clock read per message)
        calls = sum(e[2][0] for e in acked.values()) + len(others)
        if not calls:
            return
        per = (time.perf_counter() - clock) / calls
        self.call_cost_s = per if self.call_cost_s <= 0.0 else 0.8 * self.call_cost_s + 0.2 * per
        spent = now() - t
        for req, status, ctx in others:
            self._finish(req, status, ctx, spent // calls)
        for pq, (mq, msgs, (n,)) in acked.items():
            self._apply_acked(pq, mq, msgs, spent * n // calls, n)

    def _status(self, result: object, n: int, mq: MessageQueue) -> ConsumeResult:
        """A handler call's result over its n messages of mq as a ConsumeResult."""
        if result is None:
            log.warning("consume handler of %s returned None for %d messages of %s: "
                        "RECONSUME_LATER", self.host.group, n, mq)  # fmt: skip
        return status_of(result)

    def _calls_per_request(self) -> int:
        """How many handler calls one request carries: 1 until calls are measured, then as
        many as a worker takes at once (about SLICE_S of them, at most MAX_CALLS_PER_REQUEST).
        A request of one call a message costs ~0.3 us a message to make, run and free."""
        cost = self.call_cost_s
        if cost <= 0.0:
            return 1
        return max(1, min(MAX_CALLS_PER_REQUEST, int(SLICE_S / cost)))

    def consume(self, req: ConsumeRequest) -> None:
        """ConsumeRequest.run."""
        if 0 < req.per_call < len(req.msgs):
            self.run_batch((req,))  # several calls: the batch path runs them in turn
            return
        pq = req.pq
        if pq.dropped or pq.revoking:
            return  # not started: the messages stay for the queue's next owner
        pq.mark_consuming(req.msgs, self.host.now_ms())
        self._finish(req, *self._call(req))

    def _call(self, req: ConsumeRequest) -> tuple[ConsumeResult, ConsumeContext, int]:
        """The handler over req's messages: its status, its context and its run time (ms)."""
        host = self.host
        msgs: Sequence[MessageExt] = req.msgs
        if msgs and msgs[0].topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # one queue's topic
            msgs = reset_retry_topic(msgs, host.group)
        ctx = ConsumeContext(req.mq)
        begin = host.now_ms()
        try:
            frozen = tuple(msgs)
            result = self.handler(frozen, ctx) if self.with_context else self.handler(frozen)
            status = self._status(result, len(msgs), req.mq)
        except Exception:
            log.exception("consume handler of %s raised for %d messages of %s: RECONSUME_LATER",
                          host.group, len(msgs), req.mq)  # fmt: skip
            status = ConsumeResult.RECONSUME_LATER
        return status, ctx, host.now_ms() - begin

    def _finish(self, req: ConsumeRequest, status: ConsumeResult, ctx: ConsumeContext,
                rt: int) -> None:  # fmt: skip
        """Apply one request's result (its messages were marked in flight)."""
        pq = req.pq
        if pq.dropped:
            log.warning("%s: %s was dropped while consuming; result of %d messages discarded",
                        self.host.group, req.mq, len(req.msgs))  # fmt: skip
            pq.release_in_flight(req.msgs)
            return
        self.process_consume_result(status, ctx, req, rt)
        if pq.revoking and not pq.in_flight:
            self.host.on_drained(pq)

    def _apply_acked(self, pq: ProcessQueue[MessageExt], mq: MessageQueue,
                     msgs: list[MessageExt], rt_ms: int, calls: int) -> None:  # fmt: skip
        """Several requests of one queue were acknowledged whole: forget them, move the
        offset, release them."""
        host = self.host
        host.on_consumed(mq, len(msgs), 0, rt_ms, calls)
        if pq.dropped:
            log.warning("%s: %s was dropped while consuming; result of %d messages discarded",
                        host.group, mq, len(msgs))  # fmt: skip
            pq.release_in_flight(msgs)
            return
        offset = pq.remove_messages(msgs, host.now_ms())
        if offset >= 0 and not pq.dropped:
            host.update_offset(mq, offset, True)
        pq.release_in_flight(msgs)
        if pq.revoking and not pq.in_flight:
            host.on_drained(pq)

    def process_consume_result(self, status: ConsumeResult, ctx: ConsumeContext,
                               req: ConsumeRequest, rt_ms: int) -> None:
        """Acknowledge, send back what failed, and move the queue's offset."""
        msgs = req.msgs
        if not msgs:
            return
        host = self.host
        ack = min(ctx.ack_index, len(msgs) - 1) if status is ConsumeResult.SUCCESS else -1
        ok = ack + 1
        host.on_consumed(req.mq, ok, len(msgs) - ok, rt_ms)
        done: Sequence[MessageExt] = msgs
        if ok < len(msgs):
            if host.model is MessageModel.BROADCASTING:
                for m in msgs[ok:]:
                    log.warning("BROADCASTING, the message %s of %s failed and is dropped",
                                m.msg_id, req.mq)  # fmt: skip
            else:
                failed: list[MessageExt] = []
                for m in msgs[ok:]:
                    if not host.send_message_back(m, ctx.delay_level, req.mq.broker_name):
                        failed.append(m)
                if failed:
                    keep = {m.queue_offset for m in failed}
                    done = [m for m in msgs if m.queue_offset not in keep]
                    req.pq.release_in_flight(failed)
                    again = [dataclasses.replace(m, reconsume_times=m.reconsume_times + 1)
                             for m in failed]  # fmt: skip
                    self._later(again, req.pq, req.mq)
        offset = req.pq.remove_messages(done, host.now_ms())
        if offset >= 0 and not req.pq.dropped:
            host.update_offset(req.mq, offset, True)
        req.pq.release_in_flight(done)

    def _later(self, msgs: list[MessageExt], pq: ProcessQueue[MessageExt], mq: MessageQueue
               ) -> None:  # fmt: skip
        log.warning("%s: send-back of %d messages of %s failed; consuming them again in %d ms",
                    self.host.group, len(msgs), mq, SEND_BACK_RETRY_DELAY_MS)  # fmt: skip
        self.host.schedule(SEND_BACK_RETRY_DELAY_MS,
                           lambda: self.submit_consume_request(msgs, pq, mq))  # fmt: skip

    def report_expired(self, table: dict[MessageQueue, ProcessQueue[MessageExt]]) -> int:
        """The consumeTimeout sweep: warn (once each) about handlers running past the timeout."""
        now = self.host.now_ms()
        found = 0
        for mq, pq in list(table.items()):
            for off, started in pq.expired_in_flight(now, self.consume_timeout_ms):
                found += 1
                if (mq, off) not in self.reported:
                    self.reported.add((mq, off))
                    log.warning("%s: the handler of %s offset %d has run %d s (consume_timeout "
                                "%d s); it keeps the queue's offset until it returns",
                                self.host.group, mq, off, (now - started) // 1000,
                                self.consume_timeout_ms // 1000)  # fmt: skip
        if len(self.reported) > 10_000:
            self.reported.clear()
        return found

