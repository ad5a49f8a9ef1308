"""DefaultMQPushConsumerImpl: client/impl/consumer/DefaultMQPushConsumerImpl.java of RocketMQ
4.9.x, the consumer core in the user's process.

It holds the group's ProcessQueues, offset store and consume service, and the flow control that
decides when a queue is pulled (pullMessage's gates, in order: dropped, not running, paused,
cached count > pullThresholdForQueue or cached MiB > pullThresholdSizeForQueue or the
consumer's cache budget spent -> 50 ms later, concurrently a span > consumeConcurrentlyMaxSpan
-> 50 ms later, orderly and not locked -> 1 s later; an exception -> 1 s later, broker
FLOW_CONTROL -> 20 ms). The RebalanceServiceActor tells it which queues it holds (ASSIGN /
REVOKE), the PullMessageServiceActor executes its pulls; both over the channel.

Queue lifecycle here: ASSIGN -> computePullFromWhere (a broker call, on the scheduler thread) ->
pulling; REVOKE -> no new pull, no new handler, the running handlers finish (bounded by
`revoke_drain_timeout_ms`), the offset is committed synchronously, then REVOKED goes back and
the rebalance listener's on_revoked runs. close(): the same for every queue, then the group is
unregistered from every broker. A ProcessQueue without a pull for 120 s (a lost pull request)
is dropped and taken again.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Protocol

from actors.client.client_config import ClientConfig, default_instance_name, parse_namesrv
from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueStrategy,
)
from actors.client.consumer.consume_concurrently import ConsumeMessageConcurrentlyService
from actors.client.consumer.consume_orderly import ConsumeMessageOrderlyService
from actors.client.consumer.consumer_scheduler import ConsumerScheduler
from actors.client.consumer.consumer_services import ConsumerServices
from actors.client.consumer.consumer_stats import ConsumerStats
from actors.client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetNotFoundError,
    OffsetStore,
    RemoteBrokerOffsetStore,
)
from actors.client.consumer.process_queue import MIB, ProcessQueue
from actors.client.consumer.pull_api_wrapper import (
    PullAPIWrapper,
    build_sys_flag,
    decode_pull_messages,
)
from actors.client.consumer.rebalance import compute_pull_from_where
from actors.client.errors import ClientErrorCode, MQClientError
from actors.client.mq_client_api import MQClientAPI
from actors.client.mq_client_manager import CONSUMER, InstanceHandle, MQClientManager
from actors.client.records import Message, MessageExt, PullStatus
from actors.client.validators import check_group, check_topic
from protocol.bodies import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    LockBatchRequestBody,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from protocol.codes import MASTER_ID, RETRY_GROUP_TOPIC_PREFIX, ResponseCode, retry_topic
from protocol.message import (
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
)

log = logging.getLogger(__name__)

PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL: Final = 50  # PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL
PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL: Final = 20
PULL_TIME_DELAY_MS_WHEN_SUSPEND: Final = 1000  # paused
OFFSET_ILLEGAL_FIX_DELAY_MS: Final = 10_000
SEND_BACK_TIMEOUT_MS: Final = 5_000
LOCK_TIMEOUT_MS: Final = 1_000
QUIET_BEFORE_COMMIT_MS: Final = 20  # a pull sent just before carries an older commit offset


class ServiceState(enum.Enum):
    """The consumer's lifecycle (Java's ServiceState, plus STOPPING for the drain)."""

    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"


class RebalanceListener(Protocol):
    """on_assigned after queues were taken; on_revoked after they were drained and committed."""

    def on_assigned(self, queues: set[MessageQueue]) -> None: ...

    def on_revoked(self, queues: set[MessageQueue]) -> None: ...


@dataclass
class PushConsumerConfig:
    """DefaultMQPushConsumer's settings (Java defaults; the intervals are ours to shorten)."""

    group: str
    namesrv: str | list[str] | tuple[str, ...]
    instance_name: str | None = None
    model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp_ms: int | None = None  # CONSUME_FROM_TIMESTAMP; default: 30 min ago
    strategy: AllocateMessageQueueStrategy = field(default_factory=AllocateMessageQueueAveragely)
    orderly: bool = False
    workers: int = 20  # consumeThreadMin / Max
    consume_batch: int = 1  # consumeMessageBatchMaxSize
    pull_batch: int = 32  # pullBatchSize
    pull_interval_ms: int = 0
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue_mib: int = 100
    pull_threshold_for_topic: int = -1
    pull_threshold_size_for_topic_mib: int = -1
    max_cached_messages: int = 20_000  # ours: every queue's cache together (-1: no budget)
    max_cached_mib: int = 512  # ours
    consume_concurrently_max_span: int = 2000
    max_reconsume_times: int = -1  # -1: 16 concurrently, unlimited orderly
    consume_timeout_ms: int = 15 * 60_000
    suspend_current_queue_time_ms: int = 1000
    post_subscription_when_pull: bool = False
    pull_time_delay_ms_when_exception: int = 1000
    broker_suspend_max_ms: int = 15_000
    consumer_timeout_ms_when_suspend: int = 30_000
    pull_max_idle_ms: int = 120_000
    revoke_drain_timeout_ms: int = 10_000
    rebalance_interval_ms: float = 20_000.0
    lock_interval_ms: float = 20_000.0
    rebalance_retry_ms: float = 1_000.0
    offset_store_dir: str | None = None  # BROADCASTING: default ~/.rocketmq_offsets
    serialize_type: int | None = None  # header serialization of our requests (default JSON)

    def check(self) -> None:
        """DefaultMQPushConsumerImpl.checkConfig (with Java's ranges)."""
        check_group(self.group)
        ranges = {"consume_concurrently_max_span": (1, 65535),
                  "pull_threshold_for_queue": (1, 65535),
                  "pull_threshold_size_for_queue_mib": (1, 1024),
                  "consume_batch": (1, 1024), "pull_batch": (1, 1024), "workers": (1, 1000)}
        for name, (lo, hi) in ranges.items():
            v = getattr(self, name)
            if not lo <= v <= hi:
                raise ValueError(f"{name} {v} is out of range [{lo}, {hi}]")
        topic_max = self.pull_threshold_for_topic
        if topic_max != -1 and not 1 <= topic_max <= 6553500:
            raise ValueError("pull_threshold_for_topic out of range [1, 6553500]")
        if self.pull_interval_ms < 0 or self.pull_interval_ms > 65535:
            raise ValueError("pull_interval_ms out of range [0, 65535]")


class PullRequest:
    """PullRequest.java: one queue's pull position."""

    __slots__ = ("mq", "next_offset", "pq", "previously_locked")

    def __init__(self, mq: MessageQueue, pq: ProcessQueue[MessageExt], next_offset: int,
                 previously_locked: bool) -> None:
        self.mq = mq
        self.pq = pq
        self.next_offset = next_offset
        self.previously_locked = previously_locked


def now_ms() -> int:
    """Wall clock in ms."""
    return time.time_ns() // 1_000_000


class DefaultMQPushConsumerImpl:
    """The push consumer's core (one per PushConsumer)."""

    def __init__(self, cfg: PushConsumerConfig, handler: Callable[..., Any],
                 listener: RebalanceListener | None = None) -> None:
        cfg.check()
        self.cfg = cfg
        self.group = cfg.group
        self.model = cfg.model
        self.handler = handler
        self.listener = listener
        self.state = ServiceState.CREATE_JUST
        self.paused = False
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.table: dict[MessageQueue, ProcessQueue[MessageExt]] = {}
        self.pending: dict[int, PullRequest] = {}
        self.pull_api = PullAPIWrapper(cfg.group)
        self.stats = ConsumerStats()
        self.lock = threading.RLock()
        self.scheduler = ConsumerScheduler(f"ConsumerScheduler_{cfg.group}")
        self.handle: InstanceHandle | None = None
        self.services: ConsumerServices | None = None
        self.api: MQClientAPI | None = None
        self.offset_store: OffsetStore | None = None
        self.consume: ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService | None = None
        self.start_ms = 0
        self.last_pull_sent = 0.0
        self.queue_thresholds = (cfg.pull_threshold_for_queue,
                                 cfg.pull_threshold_size_for_queue_mib)
        self.consume_timestamp_ms = cfg.consume_timestamp_ms

    # -- properties the consume services read ---------------------------------------------------
    @property
    def client_id(self) -> str:
        """This client's id (ip@instance)."""
        return self.handle.client_id if self.handle is not None else ""

    def max_reconsume_times(self) -> int:
        """getMaxReconsumeTimes: 16 by default (concurrently)."""
        return 16 if self.cfg.max_reconsume_times == -1 else self.cfg.max_reconsume_times

    # -- subscriptions --------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str = "*", expression_type: str | None = None
                  ) -> None:  # fmt: skip
        """Subscribe topic by tag expression ("*", "TagA || TagB") or SQL92."""
        check_topic(topic)
        etype = (expression_type or _guess_type(expression)).upper()
        if etype == EXPRESSION_TYPE_TAG:
            sub = SubscriptionData.build(topic, expression, now_ms())
        elif etype == EXPRESSION_TYPE_SQL92:
            if not expression or not expression.strip():
                raise ValueError("an SQL92 subscription needs an expression")
            sub = SubscriptionData(topic, expression.strip(), [], [], now_ms(),
                                   EXPRESSION_TYPE_SQL92)
        else:
            raise ValueError(f"expression type {etype!r}: TAG or SQL92")
        with self.lock:
            self.subscriptions[topic] = sub
        self._subscriptions_changed()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming topic (its queues are released at the next rebalance)."""
        with self.lock:
            self.subscriptions.pop(topic, None)
        self._subscriptions_changed()

    def _all_subscriptions(self) -> list[SubscriptionData]:
        subs = list(self.subscriptions.values())
        if self.model is MessageModel.CLUSTERING:  # copySubscription: the retry topic too
            rt = retry_topic(self.group)
            if rt not in self.subscriptions:
                subs.append(SubscriptionData.build(rt, "*", self.start_ms))
        return subs

    def consumer_data(self) -> ConsumerData:
        """This consumer's ConsumerData for heartbeats."""
        return ConsumerData(self.group, ConsumeType.CONSUME_PASSIVELY, self.model,
                            self.cfg.consume_from_where, self._all_subscriptions())

    def _subscriptions_changed(self) -> None:
        if self.state is ServiceState.RUNNING and self.services is not None:
            self.services.update_subscriptions(self.group, self.consumer_data().to_json())

    # -- start / shutdown -----------------------------------------------------------------------
    def start(self) -> None:
        """Start: instance, services, offsets, consume service; register the group."""
        if self.state is not ServiceState.CREATE_JUST:
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT,
                                f"The PushConsumer service state not OK, maybe started once, "
                                f"{self.state.value}")
        cfg = self.cfg
        self.start_ms = now_ms()
        if self.consume_timestamp_ms is None:
            self.consume_timestamp_ms = self.start_ms - 30 * 60_000
        explicit = cfg.instance_name is not None
        ccfg = ClientConfig(parse_namesrv(cfg.namesrv),
                            instance_name=cfg.instance_name or default_instance_name())
        if cfg.serialize_type is not None:
            import dataclasses

            ccfg = dataclasses.replace(ccfg, serialize_type=cfg.serialize_type)
        self.handle = MQClientManager.acquire(ccfg, CONSUMER, self.group, explicit)
        try:
            self.services = ConsumerServices.acquire(
                self.handle, interval_ms=cfg.rebalance_interval_ms,
                lock_interval_ms=cfg.lock_interval_ms, retry_ms=cfg.rebalance_retry_ms)
            self.api = self.handle.api
            if self.model is MessageModel.BROADCASTING:
                self.offset_store = LocalFileOffsetStore(self.group, self.handle.client_id,
                                                         cfg.offset_store_dir)
            else:
                self.offset_store = RemoteBrokerOffsetStore(self.group, self)
            self.offset_store.load()
            if cfg.orderly:
                self.consume = ConsumeMessageOrderlyService(
                    self, self.handler, workers=cfg.workers, consume_batch=cfg.consume_batch,
                    suspend_ms=cfg.suspend_current_queue_time_ms,
                    max_reconsume_times=cfg.max_reconsume_times)
            else:
                self.consume = ConsumeMessageConcurrentlyService(
                    self, self.handler, workers=cfg.workers, consume_batch=cfg.consume_batch,
                    consume_timeout_ms=cfg.consume_timeout_ms)
            self.consume.start()
            self.scheduler.start()
            self.state = ServiceState.RUNNING
            self.services.add_consumer(self, self.consumer_data().to_json(), cfg.strategy,
                                       cfg.orderly)
        except BaseException:
            self.state = ServiceState.SHUTDOWN_ALREADY
            self._release()
            raise
        self.scheduler.schedule(self._sweep_period_ms(), self._sweep)
        log.info("push consumer %s started (%s, %s, %s)", self.group, self.client_id,
                 self.model.name, "orderly" if cfg.orderly else "concurrently")

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """Stop pulling, drain running handlers (bounded), commit, unregister; True when every
        handler finished in time (nothing consumed twice on the next start)."""
        if self.state is not ServiceState.RUNNING:
            if self.state is ServiceState.CREATE_JUST:
                self.state = ServiceState.SHUTDOWN_ALREADY
            return True
        self.state = ServiceState.STOPPING
        if self.services is not None:
            self.services.forget_pulls(self)
        assert self.consume is not None
        drained = self.consume.shutdown(timeout_s)
        if not drained:
            log.warning("push consumer %s: handlers still running after %.1f s; their messages "
                        "will be consumed again", self.group, timeout_s)
        quiet = self.last_pull_sent + QUIET_BEFORE_COMMIT_MS / 1000.0 - time.monotonic()
        if quiet > 0:
            time.sleep(quiet)
        with self.lock:
            held = list(self.table)
            for pq in self.table.values():
                pq.dropped = True
        self._persist(held, sync=True)
        if self.services is not None:
            self.services.remove_consumer(self.group)
        self.scheduler.stop()
        self.state = ServiceState.SHUTDOWN_ALREADY
        self._release()
        log.info("push consumer %s closed", self.group)
        return drained

    def _release(self) -> None:
        self.scheduler.stop()
        if self.consume is not None and self.state is ServiceState.SHUTDOWN_ALREADY:
            self.consume.shutdown(0)
        if self.services is not None:
            self.services.cores.pop(self.group, None)
            self.services.release()
            self.services = None
        if self.handle is not None:
            MQClientManager.release(self.handle, CONSUMER, self.group)
            self.handle = None

    def _persist(self, mqs: list[MessageQueue], sync: bool) -> None:
        store = self.offset_store
        if store is None or not mqs:
            return
        if not sync:
            store.persist_all(mqs)
            return
        if isinstance(store, LocalFileOffsetStore):
            store.persist_all(mqs)
            return
        for mq in mqs:
            try:
                store.persist(mq, sync=True)
            except Exception as exc:
                log.warning("consumer %s: offset of %s not committed: %s", self.group, mq, exc)

    # -- OffsetBroker / OffsetAdmin (broker calls from this process) ---------------------------
    def _routes(self) -> Any:
        assert self.services is not None
        return self.services.routes

    def _master(self, mq: MessageQueue) -> str:
        found = self._routes().find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if found is None and self.handle is not None:
            try:
                self.handle.topic_route(mq.topic)  # the route may still be on its way here
            except MQClientError as exc:
                log.info("consumer %s: route of %s: %s", self.group, mq.topic, exc)
            found = self._routes().find_broker_address_in_subscribe(mq.broker_name, MASTER_ID,
                                                                    True)  # fmt: skip
        if found is None:
            found = self._routes().find_broker_address_in_subscribe(mq.broker_name, MASTER_ID,
                                                                    False)  # fmt: skip
        if found is None:
            raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION,
                                f"The broker[{mq.broker_name}] not exist")
        return str(found.broker_addr)

    def query_offset(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET (OffsetBroker)."""
        assert self.api is not None
        off = self.api.query_consumer_offset(self._master(mq), self.group, mq.topic, mq.queue_id,
                                             3000)  # fmt: skip
        if off is None or off < 0:
            raise OffsetNotFoundError(str(mq))
        return off

    def commit_offset(self, mq: MessageQueue, offset: int, *, oneway: bool) -> None:
        """UPDATE_CONSUMER_OFFSET (OffsetBroker)."""
        assert self.api is not None
        addr = self._master(mq)
        if oneway:
            self.api.update_consumer_offset_oneway(addr, self.group, mq.topic, mq.queue_id,
                                                   offset)  # fmt: skip
        else:
            self.api.update_consumer_offset(addr, self.group, mq.topic, mq.queue_id, offset,
                                            3000)  # fmt: skip

    def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET (OffsetAdmin)."""
        assert self.api is not None
        return int(self.api.get_max_offset(self._master(mq), mq.topic, mq.queue_id, 3000) or 0)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (OffsetAdmin)."""
        assert self.api is not None
        return int(self.api.search_offset(self._master(mq), mq.topic, mq.queue_id, timestamp_ms,
                                          3000) or 0)  # fmt: skip

    # -- ConcurrentlyHost / OrderlyHost ----------------------------------------------------------
    def now_ms(self) -> int:
        """Wall clock in ms."""
        return now_ms()

    def schedule(self, delay_ms: int, fn: Callable[[], None]) -> None:
        """Run fn on the scheduler thread after delay_ms."""
        self.scheduler.schedule(delay_ms, fn)

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """The offset store's updateOffset."""
        if self.offset_store is not None:
            self.offset_store.update_offset(mq, offset, increase_only)

    def on_consumed(self, mq: MessageQueue, ok: int, failed: int, rt_ms: int) -> None:
        """Stats of a finished handler call."""
        self.stats.consumed(mq.topic, ok, failed, rt_ms)

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
        props[PROPERTY_RETRY_TOPIC] = msg.topic
        props[PROPERTY_RECONSUME_TIME] = str(reconsume)
        props[PROPERTY_MAX_RECONSUME_TIMES] = str(max_reconsume)
        for k in ("TAGS", "KEYS", "DELAY", "MIN_OFFSET", "MAX_OFFSET"):
            props.pop(k, None)
        retry = Message(retry_topic(self.group), msg.body, tags=msg.tags, keys=msg.keys,
                        properties=props, delay_level=3 + msg.reconsume_times, flag=msg.flag)
        try:
            producer.send(producer.prepare(retry))
            return True
        except Exception as exc:
            log.warning("consumer %s: %s could not be sent to %s either: %s", self.group,
                        msg.msg_id, retry.topic, exc)  # fmt: skip
            return False

    def lock_one(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for mq alone (RebalanceImpl.lock), from the scheduler thread."""
        assert self.api is not None
        try:
            got = self.api.lock_batch_mq(self._master(mq), LockBatchRequestBody(
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

    # -- rebalance records (I/O thread) ---------------------------------------------------------
    def on_rebalance_record(self, kind: int, body: list[Any]) -> None:
        """A record of the RebalanceService for this group."""
        if self.state is not ServiceState.RUNNING:
            if kind == cc.REVOKE and self.services is not None:
                self.services.revoked(self.group, body[1])
            return
        if kind == cc.ASSIGN:
            self._assign(body[1])
        elif kind == cc.REVOKE:
            self._revoke([cc.mq_of(r) for r in body[1]])
        elif kind == cc.LOCK_STATE:
            for row in body[1]:
                pq = self.table.get(cc.mq_of(row))
                if pq is not None:
                    pq.set_locked(bool(row[3]), int(row[4]))
        elif kind == cc.PERSIST:
            self.scheduler.submit(lambda: self._persist(list(self.table), sync=False))
        elif kind == cc.RELAY:
            from actors.client.consumer.consumer_requests import answer_relayed

            _, rid, addr, frame = body
            self.scheduler.submit(lambda: answer_relayed(self, rid, addr, frame))
        elif kind == cc.QUEUES:
            self._recompute_thresholds()

    def _assign(self, rows: list[list[Any]]) -> None:
        fresh: list[tuple[MessageQueue, ProcessQueue[MessageExt]]] = []
        now = now_ms()
        for row in rows:
            mq = cc.mq_of(row)
            if mq in self.table:
                continue
            pq: ProcessQueue[MessageExt] = ProcessQueue(now)
            if row[3]:
                pq.set_locked(True, int(row[4]))
            fresh.append((mq, pq))
        if fresh:
            self.scheduler.submit(lambda: self._take(fresh))

    def _take(self, fresh: list[tuple[MessageQueue, ProcessQueue[MessageExt]]]) -> None:
        """The second half of updateProcessQueueTableInRebalance (scheduler thread)."""
        store = self.offset_store
        assert store is not None and self.consume_timestamp_ms is not None
        taken: set[MessageQueue] = set()
        failed: list[list[Any]] = []
        for mq, pq in fresh:
            if self.state is not ServiceState.RUNNING:
                failed.append(cc.mq_row(mq))
                continue
            store.remove_offset(mq)  # removeDirtyOffset
            try:
                offset = compute_pull_from_where(mq, self.cfg.consume_from_where, store, self,
                                                 self.consume_timestamp_ms)
            except Exception as exc:
                log.info("consumer %s: compute offset of %s failed: %s", self.group, mq, exc)
                offset = -1
            if offset < 0:
                failed.append(cc.mq_row(mq))
                continue
            with self.lock:
                self.table[mq] = pq
            taken.add(mq)
            log.info("consumer %s: took %s from offset %d", self.group, mq, offset)
            self._pull(PullRequest(mq, pq, offset, pq.locked))
        if failed and self.services is not None:
            self.services.revoked(self.group, failed)  # the next round tries them again
        if taken:
            self._recompute_thresholds()
            if self.listener is not None:
                try:
                    self.listener.on_assigned(taken)
                except Exception:
                    log.exception("consumer %s: on_assigned raised", self.group)

    def _revoke(self, mqs: list[MessageQueue]) -> None:
        for mq in mqs:
            pq = self.table.get(mq)
            if pq is None:
                if self.services is not None:
                    self.services.revoked(self.group, [cc.mq_row(mq)])
                continue
            pq.revoking = True
            if not pq.in_flight:
                self.scheduler.submit(partial(self._finish_revoke, mq, False))
            else:
                self.scheduler.schedule(self.cfg.revoke_drain_timeout_ms,
                                        partial(self._finish_revoke, mq, True))

    def _finish_revoke(self, mq: MessageQueue, timed_out: bool) -> None:
        """removeUnnecessaryMessageQueue once the queue is drained (scheduler thread)."""
        pq = self.table.get(mq)
        if pq is None or not pq.revoking or pq.dropped:
            return
        if pq.in_flight and not timed_out:
            return  # on_drained comes back
        if timed_out and pq.in_flight:
            log.warning("consumer %s: %s still had %d messages in handlers after %d ms; they will "
                        "be consumed again by its next owner", self.group, mq, len(pq.in_flight),
                        self.cfg.revoke_drain_timeout_ms)  # fmt: skip
        quiet = self.last_pull_sent + QUIET_BEFORE_COMMIT_MS / 1000.0 - time.monotonic()
        if quiet > 0:
            self.scheduler.schedule(quiet * 1000.0, lambda: self._finish_revoke(mq, timed_out))
            return
        pq.dropped = True
        self._persist([mq], sync=True)
        if self.offset_store is not None:
            self.offset_store.remove_offset(mq)
        with self.lock:
            self.table.pop(mq, None)
        self.pull_api.pull_from_which_node.pop(mq, None)
        if self.services is not None:
            self.services.revoked(self.group, [cc.mq_row(mq)])
        log.info("consumer %s: released %s", self.group, mq)
        self._recompute_thresholds()
        if self.listener is not None:
            try:
                self.listener.on_revoked({mq})
            except Exception:
                log.exception("consumer %s: on_revoked raised", self.group)

    def _recompute_thresholds(self) -> None:
        """messageQueueChanged: per-queue thresholds from the per-topic ones."""
        cfg = self.cfg
        n = len(self.table)
        q_count, q_mib = cfg.pull_threshold_for_queue, cfg.pull_threshold_size_for_queue_mib
        if n:
            if cfg.pull_threshold_for_topic != -1:
                q_count = max(1, cfg.pull_threshold_for_topic // n)
            if cfg.pull_threshold_size_for_topic_mib != -1:
                q_mib = max(1, cfg.pull_threshold_size_for_topic_mib // n)
        self.queue_thresholds = (q_count, q_mib)

    # -- pulling --------------------------------------------------------------------------------
    def _later(self, req: PullRequest, delay_ms: int) -> None:
        self.scheduler.schedule(delay_ms, lambda: self._pull(req))

    def _cache_budget_spent(self) -> bool:
        cfg = self.cfg
        if cfg.max_cached_messages < 0 and cfg.max_cached_mib < 0:
            return False
        count = size = 0
        for pq in list(self.table.values()):
            count += pq.msg_count
            size += pq.msg_size
        return (0 <= cfg.max_cached_messages < count) or (0 <= cfg.max_cached_mib < size // MIB)

    def _pull(self, req: PullRequest) -> None:
        """pullMessage: the flow-control gates, then the request to the PullMessageService."""
        pq = req.pq
        if pq.dropped or pq.revoking:
            return
        pq.last_pull_ms = now_ms()
        if self.state is not ServiceState.RUNNING:
            if self.state is ServiceState.CREATE_JUST:
                self._later(req, self.cfg.pull_time_delay_ms_when_exception)
            return
        if self.paused:
            self._later(req, PULL_TIME_DELAY_MS_WHEN_SUSPEND)
            return
        q_count, q_mib = self.queue_thresholds
        if pq.msg_count > q_count or pq.msg_size // MIB > q_mib or self._cache_budget_spent():
            self.stats.flow_controlled += 1
            self._later(req, PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL)
            return
        if not self.cfg.orderly:
            if pq.max_span() > self.cfg.consume_concurrently_max_span:
                self.stats.flow_controlled += 1
                self._later(req, PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL)
                return
        elif self.model is MessageModel.CLUSTERING:
            if not pq.locked:
                self._later(req, self.cfg.pull_time_delay_ms_when_exception)
                return
            if not req.previously_locked:
                self.scheduler.submit(lambda: self._fix_offset_then_pull(req))
                return
        sub = self.subscriptions.get(req.mq.topic)
        if sub is None and req.mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            sub = SubscriptionData.build(req.mq.topic, "*")
        if sub is None:
            self._later(req, self.cfg.pull_time_delay_ms_when_exception)
            return
        self._send_pull(req, sub)

    def _fix_offset_then_pull(self, req: PullRequest) -> None:
        """Orderly's first pull after the lock: the offset is read from the broker again."""
        store = self.offset_store
        assert store is not None and self.consume_timestamp_ms is not None
        try:
            offset = compute_pull_from_where(req.mq, self.cfg.consume_from_where, store, self,
                                             self.consume_timestamp_ms)
        except Exception as exc:
            log.error("consumer %s: offset of %s not read: %s", self.group, req.mq, exc)
            offset = -1
        if offset < 0:
            self._later(req, self.cfg.pull_time_delay_ms_when_exception)
            return
        req.previously_locked = True
        req.next_offset = offset
        self._pull(req)

    def _send_pull(self, req: PullRequest, sub: SubscriptionData) -> None:
        services = self.services
        if services is None:
            return
        mq = req.mq
        found = services.routes.find_broker_address_in_subscribe(
            mq.broker_name, self.pull_api.recalculate_pull_from_which_node(mq), False)
        if found is None:  # pullKernelImpl: fetch the route, then try again
            self.scheduler.submit(lambda: self._refresh_route_then_pull(req))
            return
        commit = 0
        if self.model is MessageModel.CLUSTERING and self.offset_store is not None:
            commit = self.offset_store.read_memory(mq)
        post = self.cfg.post_subscription_when_pull and not sub.class_filter_mode
        sys_flag = build_sys_flag(commit > 0, True, post, found.slave)
        rid = services.new_pull(self)
        self.pending[rid] = req
        self.last_pull_sent = time.monotonic()
        services.send_pull([rid, found.broker_addr, self.group, mq.topic, mq.queue_id,
                            req.next_offset, self.cfg.pull_batch, sys_flag, max(commit, 0),
                            self.cfg.broker_suspend_max_ms, sub.sub_string if post else None,
                            sub.sub_version, sub.expression_type,
                            self.cfg.consumer_timeout_ms_when_suspend])

    def _refresh_route_then_pull(self, req: PullRequest) -> None:
        if self.handle is not None and self.state is ServiceState.RUNNING:
            try:
                self.handle.topic_route(req.mq.topic)
            except MQClientError as exc:
                log.info("consumer %s: route of %s: %s", self.group, req.mq.topic, exc)
        self._later(req, self.cfg.pull_time_delay_ms_when_exception)

    def on_pull_result(self, rid: int, status: int, next_begin: int, min_offset: int,
                       max_offset: int, suggest: int, tail: memoryview) -> None:
        """The PullCallback (I/O thread)."""
        req = self.pending.pop(rid, None)
        if req is None or self.state is not ServiceState.RUNNING:
            return
        pq, mq = req.pq, req.mq
        if status >= cc.BROKER_ERROR:
            if not mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("consumer %s: pull of %s failed: %s%s", self.group, mq,
                            f"code {next_begin} " if status == cc.BROKER_ERROR else "",
                            str(tail, "utf-8", "replace"))  # fmt: skip
            if status == cc.BROKER_ERROR and next_begin == ResponseCode.FLOW_CONTROL:
                self._later(req, PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL)
            else:
                self._later(req, self.cfg.pull_time_delay_ms_when_exception)
            return
        self.pull_api.update_pull_from_which_node(mq, suggest)
        pstatus = PullStatus(status)
        if pstatus is PullStatus.FOUND:
            req.next_offset = next_begin
            if pq.dropped or pq.revoking:
                return
            sub = self.subscriptions.get(mq.topic)
            msgs = decode_pull_messages(tail, mq, sub, min_offset, max_offset)
            if msgs:
                self.stats.pulled(mq.topic, len(msgs))
                dispatch = pq.put_messages(msgs, max_offset)
                assert self.consume is not None
                self.consume.submit_consume_request(msgs, pq, mq, dispatch)
            if msgs and self.cfg.pull_interval_ms > 0:
                self._later(req, self.cfg.pull_interval_ms)
            else:
                self._pull(req)
        elif pstatus in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            req.next_offset = next_begin
            if pq.msg_count == 0 and not pq.dropped and self.offset_store is not None:
                self.offset_store.update_offset(mq, next_begin, True)  # correctTagsOffset
            self._pull(req)
        else:  # OFFSET_ILLEGAL
            log.warning("consumer %s: pull offset %d of %s is illegal; fixing it to %d",
                        self.group, req.next_offset, mq, next_begin)  # fmt: skip
            req.next_offset = next_begin
            pq.dropped = True
            self.scheduler.schedule(OFFSET_ILLEGAL_FIX_DELAY_MS, lambda: self._fix_offset(req))

    def _fix_offset(self, req: PullRequest) -> None:
        """OFFSET_ILLEGAL, 10 s later: store the broker's offset and let the queue be taken anew."""
        mq = req.mq
        if self.offset_store is not None:
            self.offset_store.update_offset(mq, req.next_offset, False)
            self._persist([mq], sync=True)
        with self.lock:
            self.table.pop(mq, None)
        if self.services is not None:
            self.services.revoked(self.group, [cc.mq_row(mq)])

    def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """resetOffset: held queues of topic are dropped (cached messages discarded), their
        offsets stored and committed, and they are taken again from there."""
        released = []
        for mq, off in offsets.items():
            if mq.topic != topic:
                continue
            with self.lock:
                pq = self.table.pop(mq, None)
            if pq is None:
                continue
            pq.dropped = True
            pq.clear()
            if self.offset_store is not None:
                self.offset_store.update_offset(mq, off, False)
                self._persist([mq], sync=True)
                self.offset_store.remove_offset(mq)
            released.append(cc.mq_row(mq))
        if released and self.services is not None:
            self.services.revoked(self.group, released)

    # -- the periodic sweep ------------------------------------------------------------------------
    def _sweep_period_ms(self) -> int:
        return max(1000, min(self.cfg.consume_timeout_ms // 4, 60_000))

    def _sweep(self) -> None:
        """cleanExpireMsg (report only) and the 120 s pull idleness check."""
        if self.state is not ServiceState.RUNNING:
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


def _guess_type(expression: str) -> str:
    """A tag expression is "*" or names joined by "||"; anything with SQL syntax is SQL92."""
    e = (expression or "").strip()
    if e in ("", "*"):
        return EXPRESSION_TYPE_TAG
    sql_words = (" and ", " or ", " between ", " in ", " is ", " not ", "=", ">", "<")
    low = f" {e.lower()} "
    if any(w in low for w in sql_words):
        return EXPRESSION_TYPE_SQL92
    return EXPRESSION_TYPE_TAG
