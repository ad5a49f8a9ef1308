"""DefaultMQPushConsumerImpl: client/impl/consumer/DefaultMQPushConsumerImpl.java of RocketMQ
4.9.x, the push consumer's core in the user's process.

On top of what consumer_core shares with the lite pull consumer: the consume service (worker
threads running the user's handler, concurrently or orderly) and what it needs from its
consumer (sendMessageBack with its fallback to %RETRY%group, lockOneMQ, offsets, stats), the
push consumer's own pull gates (a concurrently queue's span > consumeConcurrentlyMaxSpan -> 50 ms
later; an orderly queue not locked -> 1 s later, its first pull after the lock reads the offset
from the broker again), the pull's commit offset (the in-memory offset rides every pull,
CLUSTERING), the close that drains running handlers before the final commit, and the periodic
sweep (the consumeTimeout report; a queue without a pull for 120 s is dropped and taken again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from actors.client.consumer.consume_concurrently import ConsumeMessageConcurrentlyService
from actors.client.consumer.consume_message_service import (
    ConsumeContext,
    ConsumeResult,
    handler_arity,
    status_of,
)
from actors.client.consumer.consume_orderly import ConsumeMessageOrderlyService
from actors.client.consumer.consumer_config import ConsumerConfig, RebalanceListener, ServiceState
from actors.client.consumer.consumer_core import (
    ConsumerImplBase,
)
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.consumer.pull_api_wrapper import build_sys_flag
from actors.client.consumer.pull_callback import PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL, now_ms
from actors.client.consumer.pull_request import PullRequest
from actors.client.consumer.rebalance import compute_pull_from_where
from actors.client.records import Message, MessageExt
from protocol.bodies import LockBatchRequestBody, MessageModel, MessageQueue, SubscriptionData
from protocol.codes import retry_topic
from protocol.message import (
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
)

log = logging.getLogger(__name__)

SEND_BACK_TIMEOUT_MS: Final = 5_000
LOCK_TIMEOUT_MS: Final = 1_000
OFFSET_ILLEGAL_FIX_DELAY_MS: Final = 10_000


@dataclass
class PushConsumerConfig(ConsumerConfig):
    """DefaultMQPushConsumer's own settings (Java defaults)."""

    orderly: bool = False
    workers: int = 20  # consumeThreadMin / Max
    consume_batch: int = 1  # consumeMessageBatchMaxSize
    pull_interval_ms: int = 0
    consume_concurrently_max_span: int = 2000
    max_reconsume_times: int = -1  # -1: 16 concurrently, unlimited orderly
    consume_timeout_ms: int = 15 * 60_000
    suspend_current_queue_time_ms: int = 1000
    post_subscription_when_pull: bool = False
    pull_max_idle_ms: int = 120_000

    def check(self) -> None:
        """DefaultMQPushConsumerImpl.checkConfig (with Java's ranges)."""
        super().check()
        ranges = {"consume_concurrently_max_span": (1, 65535), "consume_batch": (1, 1024),
                  "workers": (1, 1000), "pull_interval_ms": (0, 65535)}
        for name, (lo, hi) in ranges.items():
            v = getattr(self, name)
            if not lo <= v <= hi:
                raise ValueError(f"{name} {v} is out of range [{lo}, {hi}]")


CM_RESULTS = {  # ConsumeMessageDirectlyResult's CMResult names
    ConsumeResult.SUCCESS: "CR_SUCCESS",
    ConsumeResult.RECONSUME_LATER: "CR_LATER",
    ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT: "CR_LATER",
    ConsumeResult.COMMIT: "CR_COMMIT",
    ConsumeResult.ROLLBACK: "CR_ROLLBACK",
}


class DefaultMQPushConsumerImpl(ConsumerImplBase):
    """The push consumer's core (one per PushConsumer)."""

    cfg: PushConsumerConfig

    def __init__(self, cfg: PushConsumerConfig, handler: Callable[..., Any],
                 listener: RebalanceListener | None = None) -> None:
        super().__init__(cfg, listener)
        self.handler = handler
        self.consume: ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService | None = None
        self._swept = False

    # -- hooks ----------------------------------------------------------------------------------
    def _start_consume(self) -> None:
        cfg = self.cfg
        if cfg.orderly:
            self.consume = ConsumeMessageOrderlyService(
                self, self.handler, workers=cfg.workers, consume_batch=cfg.consume_batch,
                suspend_ms=cfg.suspend_current_queue_time_ms,
                max_reconsume_times=cfg.max_reconsume_times, tracer=self.tracer)
        else:
            self.consume = ConsumeMessageConcurrentlyService(
                self, self.handler, workers=cfg.workers, consume_batch=cfg.consume_batch,
                consume_timeout_ms=cfg.consume_timeout_ms, tracer=self.tracer)
        self.consume.start()

    def _orderly(self) -> bool:
        return self.cfg.orderly

    def pull_gate(self, req: PullRequest) -> bool:
        pq = req.pq
        if not self.cfg.orderly:
            if pq.max_span() > self.cfg.consume_concurrently_max_span:
                self.stats.flow_controlled += 1
                self.pulling.later(req, PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL)
                return False
        elif self.model is MessageModel.CLUSTERING:
            if not pq.locked:
                self.pulling.later(req, self.cfg.pull_time_delay_ms_when_exception)
                return False
            if not req.previously_locked:
                self.scheduler.submit(lambda: self._fix_offset_then_pull(req))
                return False
        return True

    def _pull_spec_commit(self, mq: MessageQueue) -> int:
        if self.model is MessageModel.CLUSTERING and self.offset_store is not None:
            return max(self.offset_store.read_memory(mq), 0)
        return 0

    def pull_spec(self, mq: MessageQueue, sub: SubscriptionData, slave: bool
                  ) -> tuple[int, int, str | None, int]:  # fmt: skip
        commit = self._pull_spec_commit(mq)
        post = self.cfg.post_subscription_when_pull and not sub.class_filter_mode
        return (build_sys_flag(commit > 0, True, post, slave), commit,
                sub.sub_string if post else None, self.cfg.broker_suspend_max_ms)

    def dispatch_pulled(self, msgs: list[MessageExt], pq: ProcessQueue[MessageExt],
                        mq: MessageQueue, dispatch_to_consume: bool) -> None:  # fmt: skip
        assert self.consume is not None
        self.consume.submit_consume_request(msgs, pq, mq, dispatch_to_consume)

    def pull_interval_ms(self) -> int:
        return self.cfg.pull_interval_ms

    def offset_illegal(self, req: PullRequest, next_begin: int) -> None:
        """OFFSET_ILLEGAL: the queue is dropped, its offset fixed 10 s later, and the next
        rebalance takes it anew."""
        req.next_offset = next_begin
        req.pq.dropped = True
        self.scheduler.schedule(OFFSET_ILLEGAL_FIX_DELAY_MS, lambda: self._fix_offset(req))

    def _fix_offset(self, req: PullRequest) -> None:
        """OFFSET_ILLEGAL, 10 s later: store the broker's offset and let the queue be taken
        anew."""
        mq = req.mq
        with self.lock:
            if self.table.get(mq) is not req.pq:
                return  # let go meanwhile (and maybe taken again: that queue is not this one)
            del self.table[mq]
        if self.offset_store is not None:
            self.offset_store.update_offset(mq, req.next_offset, False)
            self.persist([mq], sync=True)
        if self.services is not None:
            self.services.revoked(self.group, [mq])

    def running_properties(self) -> dict[str, str]:
        """The base properties plus the consume service's."""
        cfg = self.cfg
        props = super().running_properties()
        props.update({
            "consumeThreadMin": str(cfg.workers), "consumeThreadMax": str(cfg.workers),
            "consumeConcurrentlyMaxSpan": str(cfg.consume_concurrently_max_span),
            "pullInterval": str(cfg.pull_interval_ms),
            "consumeMessageBatchMaxSize": str(cfg.consume_batch),
            "maxReconsumeTimes": str(cfg.max_reconsume_times),
            "consumeTimeout": str(cfg.consume_timeout_ms // 60_000),
            "suspendCurrentQueueTimeMillis": str(cfg.suspend_current_queue_time_ms),
            "PROP_CONSUMEORDERLY": "true" if cfg.orderly else "false",
            "PROP_THREADPOOL_CORE_SIZE": str(cfg.workers),
        })
        return props

    def consume_message_directly(self, msg: MessageExt, mq: MessageQueue
                                 ) -> tuple[str, str, bool, bool]:  # fmt: skip
        """consumeMessageDirectly: the handler on one message."""
        ctx = ConsumeContext(mq)
        remark = ""
        try:
            result = self.handler((msg,), ctx) if handler_arity(self.handler) == 2 else \
                self.handler((msg,))
            cr = "CR_RETURN_NULL" if result is None else CM_RESULTS[status_of(result)]
        except Exception as exc:
            cr = "CR_THROW_EXCEPTION"
            remark = f"{type(exc).__name__}: {exc}"
        return cr, remark, ctx.auto_commit, self.cfg.orderly

    def _release(self) -> None:
        if self.consume is not None and self.state is ServiceState.SHUTDOWN_ALREADY:
            self.consume.shutdown(0)
        super()._release()

    def max_reconsume_times(self) -> int:
        """getMaxReconsumeTimes: 16 by default (concurrently)."""
        return 16 if self.cfg.max_reconsume_times == -1 else self.cfg.max_reconsume_times

    def _stop_consume(self, timeout_s: float) -> bool:
        assert self.consume is not None
        drained = self.consume.shutdown(timeout_s)
        if not drained:
            log.warning("push consumer %s: handlers still running after %.1f s; their messages "
                        "will be consumed again", self.group, timeout_s)
        return drained

    def on_consumed(self, mq: MessageQueue, ok: int, failed: int, rt_ms: int, calls: int = 1
                    ) -> None:  # fmt: skip
        """Stats of finished handler calls."""
        self.stats.consumed(mq.topic, ok, failed, rt_ms, calls)

    def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str) -> bool:
        """sendMessageBack: CONSUMER_SEND_MSG_BACK, else a plain send to %RETRY%group."""
        assert self.api is not None
        try:
            addr = self._routes().find_broker_address_in_publish(broker_name) or \
                msg.store_host
            self.api.consumer_send_message_back(addr, msg, self.group, delay_level,
                                                SEND_BACK_TIMEOUT_MS, self.max_reconsume_times())
            return True
        except Exception as exc:
            log.warning("consumer %s: send-back of %s failed (%s); sending it to %s", self.group,
                        msg.msg_id, exc, retry_topic(self.group))  # fmt: skip
        return self._send_retry(msg, msg.reconsume_times + 1, self.max_reconsume_times())

    def send_to_retry(self, msg: MessageExt, max_reconsume_times: int) -> bool:
        """Orderly's sendMessageBack: a plain send to %RETRY%group (the broker's DLQ past max)."""
        return self._send_retry(msg, msg.reconsume_times, max_reconsume_times)

    def _send_retry(self, msg: MessageExt, reconsume: int, max_reconsume: int) -> bool:
        if self.handle is None:
            return False
        producer = self.handle.inner_producer()
        props = dict(msg.properties)
        props.pop(PROPERTY_TRANSACTION_PREPARED, None)
        props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
        # a message already retried keeps the topic it was first sent to (Java's consumer has
        # restored msg.topic to it by now)
        props.setdefault(PROPERTY_RETRY_TOPIC, msg.topic)
        props[PROPERTY_RECONSUME_TIME] = str(reconsume)
        props[PROPERTY_MAX_RECONSUME_TIMES] = str(max_reconsume)
        for k in ("TAGS", "KEYS", "DELAY", "MIN_OFFSET", "MAX_OFFSET"):
            props.pop(k, None)
        # the stored properties (system ones included) go as the client's own, unchecked
        retry = Message(retry_topic(self.group), msg.body, tags=msg.tags, keys=msg.keys,
                        delay_level=3 + msg.reconsume_times, flag=msg.flag)
        try:
            producer.send(producer.prepare(retry, extra=props))
            return True
        except Exception as exc:
            log.warning("consumer %s: %s could not be sent to %s either: %s", self.group,
                        msg.msg_id, retry.topic, exc)  # fmt: skip
            return False

    def lock_one(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for mq alone (RebalanceImpl.lock), from the scheduler thread."""
        assert self.api is not None
        try:
            assert self.admin is not None
            got = self.api.lock_batch_mq(self.admin.master(mq), LockBatchRequestBody(
                self.group, self.client_id, [mq]), LOCK_TIMEOUT_MS)
        except Exception as exc:
            log.warning("consumer %s: lock of %s failed: %s", self.group, mq, exc)
            return False
        ok = mq in (got or ())
        pq = self.table.get(mq)
        if pq is not None and ok:
            pq.set_locked(True, now_ms())
        return ok

    def on_drained(self, pq: ProcessQueue[MessageExt]) -> None:
        """A revoking queue's last running handler finished."""
        for mq, q in list(self.table.items()):
            if q is pq:
                self.scheduler.submit(partial(self._finish_revoke, mq, False))

    def _fix_offset_then_pull(self, req: PullRequest) -> None:
        """Orderly's first pull after the lock: the offset is read from the broker again."""
        store = self.offset_store
        assert store is not None and self.consume_timestamp_ms is not None
        assert self.admin is not None
        try:
            offset = compute_pull_from_where(req.mq, self.cfg.consume_from_where, store, self.admin,
                                             self.consume_timestamp_ms)
        except Exception as exc:
            log.error("consumer %s: offset of %s not read: %s", self.group, req.mq, exc)
            offset = -1
        if offset < 0:
            self.pulling.later(req, self.cfg.pull_time_delay_ms_when_exception)
            return
        req.previously_locked = True
        req.next_offset = offset
        self._pull(req)

    def _sweep_period_ms(self) -> int:
        """How often the sweep runs (a quarter of consumeTimeout, 1 s .. 60 s)."""
        return max(1000, min(self.cfg.consume_timeout_ms // 4, 60_000))

    def _sweep(self) -> None:
        """cleanExpireMsg (report only) and the 120 s pull idleness check."""
        if self.state is not ServiceState.RUNNING:
            return
        if not self._swept:
            self._swept = True
            self.scheduler.schedule(self._sweep_period_ms(), self._sweep)
            return
        if isinstance(self.consume, ConsumeMessageConcurrentlyService):
            self.consume.report_expired(dict(self.table))
        now = now_ms()
        stale = [mq for mq, pq in list(self.table.items())
                 if not pq.revoking and not self.paused
                 and pq.is_pull_expired(now, self.cfg.pull_max_idle_ms)]  # fmt: skip
        for mq in stale:
            log.error("consumer %s: no pull of %s for %d ms; dropping it to be taken again",
                      self.group, mq, self.cfg.pull_max_idle_ms)  # fmt: skip
            pq = self.table[mq]
            pq.revoking = True
            self._finish_revoke(mq, True)
        self.scheduler.schedule(self._sweep_period_ms(), self._sweep)

