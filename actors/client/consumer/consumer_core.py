"""What DefaultMQPushConsumerImpl and DefaultLitePullConsumerImpl share: client/impl/consumer/
MQConsumerInner.java and the pulling both impls do (pullMessage's gates and PullCallback:
pull_callback.PullCallback, which this core hosts and answers as its PullHost; the queue
table RebalanceImpl fills), RocketMQ 4.9.x, as the base of the two consumer cores that live
in the user's process.

A core holds its group's ProcessQueues and offset store. The RebalanceServiceActor tells it
which queues it holds (ASSIGN / REVOKE over the channel) and the PullMessageServiceActor
executes its pulls (PULL / PULL_RESULT). The gates before each pull, in Java's order: dropped,
not running, paused (1 s later), cached count > pullThresholdForQueue or cached MiB >
pullThresholdSizeForQueue or the consumer's cache budget spent (50 ms later), then the
subclass's own (the push consumer's span and orderly lock). A failed pull is retried 1 s later
(20 ms after a broker FLOW_CONTROL).

Queue lifecycle: ASSIGN -> computePullFromWhere (a broker call, on the scheduler thread) ->
pulling; REVOKE -> no new pull, no new handler, what is running finishes (bounded by
`revoke_drain_timeout_ms`), the offset is committed synchronously (after any older one its pull
that is out carries: commit_final), then REVOKED goes back and
the rebalance listener's on_revoked runs. OFFSET_ILLEGAL: the queue is dropped and, 10 s later,
its offset fixed and the queue taken again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial

from actors.client.client_config import (
    ClientConfig,
    default_instance_name,
    parse_namesrv,
    tls_setting,
)
from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.consumer_config import (
    ConsumerConfig,
    RebalanceListener,
    ServiceState,
)
from actors.client.consumer.consumer_requests import answer_relayed, base_properties
from actors.client.consumer.consumer_scheduler import ConsumerScheduler
from actors.client.consumer.consumer_services import ConsumerServices
from actors.client.consumer.consumer_stats import ConsumerStats
from actors.client.consumer.filter_api import build_subscription
from actors.client.consumer.mq_admin_impl import MQAdminImpl
from actors.client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    RemoteBrokerOffsetStore,
)
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.consumer.pull_callback import PullCallback, now_ms
from actors.client.consumer.pull_request import PullRequest
from actors.client.consumer.rebalance import compute_pull_from_where
from actors.client.errors import ClientErrorCode, MQClientError
from actors.client.mq_client_api import MQClientAPI
from actors.client.mq_client_instance import TopicRouteTable
from actors.client.mq_client_manager import CONSUMER, InstanceHandle, MQClientManager
from actors.client.producer import trace_dispatcher
from actors.client.records import MessageExt
from actors.client.trace_dispatcher import AsyncTraceDispatcher
from actors.client.validators import check_topic
from protocol.acl import SessionCredentials
from protocol.bodies import (
    ConsumerData,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from protocol.codes import retry_topic

log = logging.getLogger(__name__)

class ConsumerImplBase:
    """A consumer core: queue table, offsets, pulling (subclasses: push, lite pull)."""

    CONSUME_TYPE = ConsumeType.CONSUME_PASSIVELY
    ROLE = "PushConsumer"
    DEFER_REGISTER = False  # the lite pull consumer registers at subscribe() / assign()

    def __init__(self, cfg: ConsumerConfig, listener: RebalanceListener | None = None) -> None:
        cfg.check()
        self.cfg = cfg
        self.group = cfg.group
        self.model = cfg.model
        self.listener = listener
        self.state = ServiceState.CREATE_JUST
        self.paused = False
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.table: dict[MessageQueue, ProcessQueue[MessageExt]] = {}
        self.stats = ConsumerStats()
        self.lock = threading.RLock()
        self.scheduler = ConsumerScheduler(f"ConsumerScheduler_{cfg.group}")
        self.handle: InstanceHandle | None = None
        self.tracer: AsyncTraceDispatcher | None = None  # enable_trace: this core's records
        self.services: ConsumerServices | None = None
        self.api: MQClientAPI | None = None
        self.admin: MQAdminImpl | None = None
        self.offset_store: OffsetStore | None = None
        self.start_ms = 0
        self.registered = False
        self.subs_changed_at = time.monotonic()
        self.queue_thresholds = (cfg.pull_threshold_for_queue,
                                 cfg.pull_threshold_size_for_queue_mib)
        self.consume_timestamp_ms = cfg.consume_timestamp_ms
        self.pulling = PullCallback(self)  # owns the pulls that are out

    # -- hooks of the subclasses ----------------------------------------------------------------
    def correct_tags_offset(self) -> bool:
        """PullHost: whether a NO_NEW / NO_MATCHED answer moves the consume offset."""
        return True

    def pull_gate(self, req: PullRequest) -> bool:
        """PullHost: the kind's own flow control; False when it rescheduled the request."""
        return True

    def pull_spec(self, mq: MessageQueue, sub: SubscriptionData, slave: bool
                  ) -> tuple[int, int, str | None, int]:  # fmt: skip
        """PullHost: (sys_flag, commit offset, subscription sent or None, suspend ms)."""
        raise NotImplementedError

    def dispatch_pulled(self, msgs: list[MessageExt], pq: ProcessQueue[MessageExt],
                        mq: MessageQueue, dispatch_to_consume: bool) -> None:  # fmt: skip
        """PullHost: hand pulled messages to what consumes them."""
        raise NotImplementedError

    def pull_interval_ms(self) -> int:
        """PullHost: pullInterval (push only)."""
        return 0

    def gates_read_process_queue(self) -> bool:
        """PullHost: whether the kind's gates read only its ProcessQueues (then a batch
        counted by ProcessQueue.expect is seen by them)."""
        return True

    def offset_illegal(self, req: PullRequest, next_begin: int) -> None:
        """PullHost: an OFFSET_ILLEGAL answer."""
        raise NotImplementedError

    def _pull(self, req: PullRequest) -> None:
        """pullMessage for req (a queue just taken, or pulled again by the kind)."""
        self.pulling.pull(req)

    def _start_consume(self) -> None:
        """Start what consumes (the push consumer's consume service)."""

    def _orderly(self) -> bool:
        """True for an orderly push consumer (its queues are locked at the broker)."""
        return False

    def _before_release(self, mq: MessageQueue, pq: ProcessQueue[MessageExt]) -> None:
        """A queue is being released: store its consumed offset (lite pull) before the commit."""

    def _drained(self, pq: ProcessQueue[MessageExt]) -> bool:
        """True when nothing of pq is being consumed now."""
        return not pq.in_flight

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """Stop pulling, drain what is being consumed (bounded), commit, unregister; True when
        everything finished in time (nothing consumed twice on the next start)."""
        if self.state is not ServiceState.RUNNING:
            if self.state is ServiceState.CREATE_JUST:
                self.state = ServiceState.SHUTDOWN_ALREADY
            return True
        self.state = ServiceState.STOPPING
        if self.services is not None:
            self.services.forget_pulls(self.pulling)
        drained = self._stop_consume(timeout_s)
        with self.lock:
            queues = list(self.table.items())
            for mq, pq in queues:
                pq.dropped = True
                self._before_release(mq, pq)
        self.commit_final(queues)
        held = [mq for mq, _pq in queues]
        if self.listener is not None and held:
            try:
                self.listener.on_revoked(set(held))  # drained and committed, as on a rebalance
            except Exception:
                log.exception("consumer %s: on_revoked raised", self.group)
        if self.services is not None:
            self.services.remove_consumer(self.group)
        self.scheduler.stop()
        self.state = ServiceState.SHUTDOWN_ALREADY
        self._release()
        log.info("%s %s closed", self.ROLE, self.group)
        return drained

    def _stop_consume(self, timeout_s: float) -> bool:
        """Stop consuming; True when nothing is being consumed any more."""
        return True

    def _took(self, mq: MessageQueue, offset: int) -> None:
        """A queue was taken and is pulled from offset."""

    def _start_offset(self, mq: MessageQueue) -> int | None:
        """Where a taken queue starts when the user said so (lite pull assign); None: from
        the offset store / consume_from_where."""
        return None

    def _sweep(self) -> None:
        """Periodic work (push: the consumeTimeout report, the pull idleness check)."""

    def running_properties(self) -> dict[str, str]:
        """The properties GET_CONSUMER_RUNNING_INFO reports (Java's field names)."""
        return base_properties(self)

    def consume_message_directly(self, msg: MessageExt, mq: MessageQueue
                                 ) -> tuple[str, str, bool, bool]:  # fmt: skip
        """CONSUME_MESSAGE_DIRECTLY: (CMResult name, remark, autoCommit, order)."""
        raise NotImplementedError(f"{self.ROLE} does not consume directly")

    @property
    def client_id(self) -> str:
        """This client's id (ip@instance)."""
        return self.handle.client_id if self.handle is not None else ""

    def subscribe(self, topic: str, expression: str = "*", expression_type: str | None = None
                  ) -> None:  # fmt: skip
        """Subscribe topic by tag expression ("*", "TagA || TagB") or SQL92."""
        check_topic(topic)
        sub = build_subscription(topic, expression, expression_type, now_ms())
        with self.lock:
            self.subscriptions[topic] = sub
        self._subscriptions_changed()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming topic (its queues are released at the next rebalance)."""
        with self.lock:
            self.subscriptions.pop(topic, None)
        self._subscriptions_changed()

    def all_subscriptions(self) -> list[SubscriptionData]:
        subs = list(self.subscriptions.values())
        if self.model is MessageModel.CLUSTERING:  # copySubscription: the retry topic too
            rt = retry_topic(self.group)
            if rt not in self.subscriptions:
                subs.append(SubscriptionData.build(rt, "*", self.start_ms))
        return subs

    def consumer_data(self) -> ConsumerData:
        """This consumer's ConsumerData for heartbeats."""
        return ConsumerData(self.group, self.CONSUME_TYPE, self.model,
                            self.cfg.consume_from_where, self.all_subscriptions())

    def _subscriptions_changed(self) -> None:
        self.subs_changed_at = time.monotonic()
        if self.state is ServiceState.RUNNING and self.services is not None and self.registered:
            self.services.update_subscriptions(self.group, self.consumer_data().to_json())

    def register(self, rebalance: bool = True) -> None:
        """Register the group at the RebalanceService (rebalance=False: queues are assigned by
        the user; the group is only heartbeated)."""
        if self.registered or self.services is None:
            return
        self.services.add_consumer(self, self.consumer_data().to_json(), self.cfg.strategy,
                                   self._orderly(), rebalance)
        self.registered = True
        self.subs_changed_at = time.monotonic()

    def start(self) -> None:
        """Start: instance, services, offsets, consume service; register the group."""
        if self.state is not ServiceState.CREATE_JUST:
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT,
                                f"The {self.ROLE} service state not OK, maybe started once, "
                                f"{self.state.value}")
        cfg = self.cfg
        self.start_ms = now_ms()
        if self.consume_timestamp_ms is None:
            self.consume_timestamp_ms = self.start_ms - 30 * 60_000
        explicit = cfg.instance_name is not None
        ccfg = ClientConfig(parse_namesrv(cfg.namesrv),
                            instance_name=cfg.instance_name or default_instance_name(),
                            credentials=SessionCredentials.of(cfg.access_key, cfg.secret_key,
                                                              cfg.security_token),
                            tls=tls_setting(cfg.use_tls))
        if cfg.serialize_type is not None:
            import dataclasses

            ccfg = dataclasses.replace(ccfg, serialize_type=cfg.serialize_type)
        self.handle = MQClientManager.acquire(ccfg, CONSUMER, self.group, explicit)
        try:
            self.services = ConsumerServices.acquire(
                self.handle, interval_ms=cfg.rebalance_interval_ms,
                lock_interval_ms=cfg.lock_interval_ms, retry_ms=cfg.rebalance_retry_ms)
            self.api = self.handle.api
            self.admin = MQAdminImpl(self.handle, self.group)
            if self.model is MessageModel.BROADCASTING:
                # Java keeps a broadcasting consumer's instance name "DEFAULT" (only clustering
                # ones take the pid), so its offsets live under ip@DEFAULT: under ip@<pid>, a
                # restarted process found none and started from consume_from again
                store_id = ccfg.with_instance(cfg.instance_name or "DEFAULT").client_id()
                self.offset_store = LocalFileOffsetStore(self.group, store_id,
                                                         cfg.offset_store_dir)
            else:
                self.offset_store = RemoteBrokerOffsetStore(self.group, self.admin)
            self.offset_store.load()
            if cfg.enable_trace:
                self.tracer = trace_dispatcher(
                    self.group, "CONSUME", namesrv=cfg.namesrv, trace_topic=cfg.trace_topic,
                    access_key=cfg.access_key, secret_key=cfg.secret_key, use_tls=cfg.use_tls)
                self.tracer.start()
            self._start_consume()
            self.scheduler.start()
            self.state = ServiceState.RUNNING
            if not self.DEFER_REGISTER:
                self.register()
        except BaseException:
            self.state = ServiceState.SHUTDOWN_ALREADY
            self._release()
            raise
        self.scheduler.submit(self._sweep)
        log.info("%s %s started (%s, %s)", self.ROLE, self.group, self.client_id,
                 self.model.name)

    def _release(self) -> None:
        self.scheduler.stop()
        if self.services is not None:
            self.services.cores.pop(self.group, None)
            self.services.release()
            self.services = None
        if self.handle is not None:
            MQClientManager.release(self.handle, CONSUMER, self.group)
            self.handle = None
        tracer, self.tracer = self.tracer, None
        if tracer is not None:  # after the last handler: its records are queued
            tracer.close()

    def persist(self, mqs: list[MessageQueue], sync: bool) -> None:
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

    def commit_final(self, queues: list[tuple[MessageQueue, ProcessQueue[MessageExt]]]) -> None:
        """Commit the offsets of queues let go (synchronously), once no pull of theirs that
        is out can carry an older one to the broker after it (PullCallback.settle_commits)."""
        store = self.offset_store
        if store is None or not queues:
            return
        self.pulling.settle_commits([(pq, store.read_memory(mq)) for mq, pq in queues])
        self.persist([mq for mq, _pq in queues], sync=True)

    def _routes(self) -> TopicRouteTable:
        assert self.services is not None
        return self.services.routes

    now_ms = staticmethod(now_ms)  # wall clock in ms

    def schedule(self, delay_ms: int, fn: Callable[[], None]) -> None:
        """Run fn on the scheduler thread after delay_ms."""
        self.scheduler.schedule(delay_ms, fn)

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """The offset store's updateOffset."""
        if self.offset_store is not None:
            self.offset_store.update_offset(mq, offset, increase_only)

    def on_rebalance_record(self, rec: cc.GroupRecord) -> None:
        """A record of the RebalanceService for this group."""
        if self.state is not ServiceState.RUNNING:
            if isinstance(rec, cc.Revoke) and self.services is not None:
                self.services.revoked(self.group, list(rec.mqs))
            return
        match rec:
            case cc.Assign(queues=queues):
                self._assign(queues)
            case cc.Revoke(mqs=mqs):
                # behind any _take still pending on the scheduler: a queue assigned and
                # revoked in quick succession (a second consumer joining) is then found in
                # the table and released, where revoking it before its _take ran reported it
                # released at once and the _take kept it, held by two consumers and never
                # revoked again
                self.scheduler.submit(lambda: self._revoke(list(mqs)))
            case cc.LockStates(queues=queues):
                for q in queues:
                    pq = self.table.get(q.mq)
                    if pq is not None:
                        pq.set_locked(q.locked, q.lock_ms)
            case cc.PersistGroup():
                self.scheduler.submit(lambda: self.persist(list(self.table), sync=False))
            case cc.Relay(request_id=rid, broker_addr=addr, frame=frame):
                self.scheduler.submit(lambda: answer_relayed(self, rid, addr, frame))
            case cc.QueuesChanged():
                self._recompute_thresholds()
            case _:
                log.warning("consumer %s: unexpected %s", self.group, type(rec).__name__)

    def _assign(self, queues: tuple[cc.QueueLock, ...]) -> None:
        fresh: list[tuple[MessageQueue, ProcessQueue[MessageExt]]] = []
        now = now_ms()
        for q in queues:
            if q.mq in self.table:
                continue
            pq: ProcessQueue[MessageExt] = ProcessQueue(now)
            if q.locked:
                pq.set_locked(True, q.lock_ms)
            fresh.append((q.mq, pq))
        if fresh:
            self.scheduler.submit(lambda: self._take(fresh))

    def _take(self, fresh: list[tuple[MessageQueue, ProcessQueue[MessageExt]]]) -> None:
        """The second half of updateProcessQueueTableInRebalance (scheduler thread)."""
        store = self.offset_store
        assert store is not None and self.consume_timestamp_ms is not None
        taken: set[MessageQueue] = set()
        failed: list[tuple[MessageQueue, ProcessQueue[MessageExt]]] = []
        for mq, pq in fresh:
            if self.state is not ServiceState.RUNNING:
                failed.append((mq, pq))
                continue
            if mq in self.table:
                # assigned again before this take ran (the first take won): a second
                # ProcessQueue would pull beside the first, outside the table, and no revoke
                # would ever stop it or settle the commit offsets its pulls carry
                continue
            store.remove_offset(mq)  # removeDirtyOffset
            try:
                assert self.admin is not None
                offset = self._start_offset(mq)
                if offset is None:
                    offset = compute_pull_from_where(mq, self.cfg.consume_from_where, store,
                                                     self.admin, self.consume_timestamp_ms)
            except Exception as exc:
                log.info("consumer %s: compute offset of %s failed: %s", self.group, mq, exc)
                offset = -1
            if offset < 0:
                failed.append((mq, pq))
                continue
            with self.lock:
                self.table[mq] = pq
            self._took(mq, offset)
            taken.add(mq)
            log.info("consumer %s: took %s from offset %d", self.group, mq, offset)
            self._pull(PullRequest(mq, pq, offset, pq.locked))
        if failed:
            self._take_failed(failed)
        if taken:
            self._recompute_thresholds()
            if self.listener is not None:
                try:
                    self.listener.on_assigned(taken)
                except Exception:
                    log.exception("consumer %s: on_assigned raised", self.group)

    def _take_failed(self, failed: list[tuple[MessageQueue, ProcessQueue[MessageExt]]]) -> None:
        """Queues whose start offset could not be read: given back, the next round tries them
        again."""
        if self.services is not None:
            self.services.revoked(self.group, [mq for mq, _pq in failed])

    def _revoke(self, mqs: list[MessageQueue]) -> None:
        for mq in mqs:
            pq = self.table.get(mq)
            if pq is None:
                if self.services is not None:
                    self.services.revoked(self.group, [mq])
                continue
            pq.revoking = True
            if self._drained(pq):
                self.scheduler.submit(partial(self._finish_revoke, mq, False))
            else:
                self.scheduler.schedule(self.cfg.revoke_drain_timeout_ms,
                                        partial(self._finish_revoke, mq, True))

    def _finish_revoke(self, mq: MessageQueue, timed_out: bool) -> None:
        """removeUnnecessaryMessageQueue once the queue is drained (scheduler thread)."""
        pq = self.table.get(mq)
        if pq is None or not pq.revoking or pq.dropped:
            return
        if not timed_out and not self._drained(pq):
            return  # on_drained comes back
        if timed_out and not self._drained(pq):
            if self._orderly():
                # removeUnnecessaryMessageQueue, orderly: a queue whose handler still runs
                # keeps its broker lock (released, another consumer could lock it and consume
                # the same ordered queue at once); it is tried again later, as Java does
                pq.try_unlock_times += 1
                log.warning("consumer %s: %s is still being consumed after %d ms; keeping it "
                            "locked (try %d)", self.group, mq, self.cfg.revoke_drain_timeout_ms,
                            pq.try_unlock_times)  # fmt: skip
                self.scheduler.schedule(self.cfg.revoke_drain_timeout_ms,
                                        partial(self._finish_revoke, mq, True))
                return
            log.warning("consumer %s: %s still had %d messages in handlers after %d ms; they will "
                        "be consumed again by its next owner", self.group, mq, len(pq.in_flight),
                        self.cfg.revoke_drain_timeout_ms)  # fmt: skip
        pq.dropped = True
        self._before_release(mq, pq)
        self.commit_final([(mq, pq)])
        if self.offset_store is not None:
            self.offset_store.remove_offset(mq)
        with self.lock:
            self.table.pop(mq, None)
        self.pulling.pull_api.pull_from_which_node.pop(mq, None)
        if self.services is not None:
            self.services.revoked(self.group, [mq])
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
