"""RebalanceServiceActor: client/impl/consumer/RebalanceService.java (+ the lockMQPeriodically of
ConsumeMessageOrderlyService and RebalanceImpl's broker calls), RocketMQ 4.9.x.

One per client instance with consumers. For each consumer group of the instance it is the
group's owner at the MQClientInstanceActor (RegisterConsumer): it receives the subscribed
topics' routes, the 5 s persist ticks and the requests brokers send for the group. Every
`interval_ms` (20 s, Java's rocketmq.client.rebalance.waitInterval) and at once on
NOTIFY_CONSUMER_IDS_CHANGED or a route change it runs a rebalance round per group: the consumer
id list from a broker of each topic (GET_CONSUMER_LIST_BY_GROUP), the allocation
(rebalance.RebalanceImpl), LOCK_BATCH_MQ before an orderly queue is assigned, and the queue
changes sent to the consumer core in the user's process over the channel (ASSIGN / REVOKE).
Orderly locks are renewed every `lock_interval_ms` (20 s). Requests the consumer core must
answer (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, RESET_CONSUMER_CLIENT_OFFSET,
GET_CONSUMER_STATUS_FROM_CLIENT) are relayed to it over the channel.

The adapter owns the sockets (its own RemotingClient, in-actor), the timers and the channel;
the decisions are RebalanceImpl's.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from actors.client import client_channel as ch
from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.messages import (
    AddConsumer,
    ConsumerAdded,
    ConsumerRemoved,
    RebalanceServiceStarted,
    RemoveConsumer,
    ServiceStartFailed,
    StartRebalanceService,
    UpdateSubscriptions,
)
from actors.client.consumer.rebalance import (
    Action,
    Assign,
    Lock,
    LockState,
    RebalanceImpl,
    Revoke,
    SubscriptionChanged,
    Unlock,
    route_retry_after,
)
from actors.client.errors import MQClientError
from actors.client.messages import (
    ConsumerRegistered,
    ConsumerUnregistered,
    PersistConsumerOffset,
    RefreshTopicRoute,
    RegisterConsumer,
    RelayedBrokerAnswer,
    RelayedBrokerRequest,
    TopicRouteUpdated,
    UnregisterConsumer,
    UpdateConsumerData,
)
from actors.client.mq_client_instance import TopicRouteTable
from actors.client.service_thread_actor import ServiceThreadActor
from actors.runtime.typed_record import TypedRecord
from protocol.bodies import (
    ConsumerData,
    LockBatchRequestBody,
    MessageModel,
    MessageQueue,
    TopicRouteData,
    UnlockBatchRequestBody,
)
from protocol.codes import MASTER_ID, RequestCode
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError

log = logging.getLogger(__name__)

LOCK_TIMEOUT_MS: Final = 1000.0  # RebalanceImpl's lock/unlock batch RPC timeout
CID_TIMEOUT_MS: Final = 3000.0  # findConsumerIdList
SCAN_MS: Final = 200.0


@dataclass
class GroupState:
    """One consumer group served here."""

    impl: RebalanceImpl
    data: ConsumerData
    requester: Any  # who asked AddConsumer / RemoveConsumer (answered when registered / gone)
    registered: bool = False
    running: bool = False  # a round is in flight
    again: bool = False  # something asked for a round meanwhile
    pending: set[str] = field(default_factory=set)  # topics whose consumer list is awaited
    closing: bool = False
    rebalance: bool = True  # False: queues are assigned by the user; never allocated here
    route_wait_ms: float = 0.0  # the last wait before asking again for a missing route


class RebalanceServiceActor(ServiceThreadActor):
    """Rebalances every consumer group of one client instance."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.start_msg: StartRebalanceService | None = None
        self.routes = TopicRouteTable()
        self.groups: dict[str, GroupState] = {}

    # -- control ------------------------------------------------------------------------------
    def on_control(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, StartRebalanceService):
            self._start(msg, sender)
        elif self.start_msg is None:
            return
        elif isinstance(msg, AddConsumer):
            self._add(msg, sender)
        elif isinstance(msg, ConsumerRegistered):
            self._registered(msg)
        elif isinstance(msg, UpdateSubscriptions):
            self._update(msg)
        elif isinstance(msg, RemoveConsumer):
            self._remove(msg, sender)
        elif isinstance(msg, ConsumerUnregistered):
            st = self.groups.pop(msg.group, None)
            if st is not None:
                self.send(st.requester, ConsumerRemoved(msg.group))
        elif isinstance(msg, TopicRouteUpdated):
            self._route(msg.topic, msg.route_json)
        elif isinstance(msg, PersistConsumerOffset):
            if msg.group in self.groups and self.channel is not None:
                self.channel.send_record(cc.PersistGroup(msg.group))
        elif isinstance(msg, RelayedBrokerRequest):
            self._relayed(msg)
        self._after_pass()

    def _start(self, msg: StartRebalanceService, sender: Any) -> None:
        try:
            self._connect(msg.config, msg.channel_path, f"rebalance:{msg.client_id}")
        except Exception as exc:
            log.exception("RebalanceService failed to start")
            self.send(sender, ServiceStartFailed(f"{type(exc).__name__}: {exc}"))
            return
        self.start_msg = msg
        self._rewatch()
        self.schedule("rebalance", msg.interval_ms)
        self.schedule("lock", msg.lock_interval_ms)
        self.schedule("scan", SCAN_MS)
        log.info("RebalanceService of %s started", msg.client_id)
        self.send(sender, RebalanceServiceStarted(os.getpid(), os.getpgid(0)))

    def _add(self, msg: AddConsumer, sender: Any) -> None:
        assert self.start_msg is not None
        data = ConsumerData.from_json(msg.consumer_data)
        if msg.group in self.groups:
            self.send(sender, ConsumerAdded(msg.group, False,
                                            f"the consumer group {msg.group} is served already"))
            return
        impl = RebalanceImpl(msg.group, self.start_msg.client_id, data.message_model,
                             msg.strategy, orderly=msg.orderly, consume_type=data.consume_type)
        impl.subscriptions = {s.topic: s for s in data.subscription_data_set}
        self.groups[msg.group] = GroupState(impl, data, sender, rebalance=msg.rebalance)
        self.send(self.start_msg.instance, RegisterConsumer(msg.group, msg.consumer_data,
                                                            self.myAddress))  # fmt: skip

    def _registered(self, msg: ConsumerRegistered) -> None:
        st = self.groups.get(msg.group)
        if st is None:
            return
        self.send(st.requester, ConsumerAdded(msg.group, msg.ok, msg.reason))
        if not msg.ok:
            del self.groups[msg.group]
            return
        st.registered = True
        for topic in st.impl.subscriptions:
            if topic in self.routes.routes:
                st.impl.set_topic_queues(topic, self.routes.subscribe_queues(topic))
        self._round(msg.group)  # Java's start(): rebalanceImmediately

    def _update(self, msg: UpdateSubscriptions) -> None:
        st = self.groups.get(msg.group)
        if st is None or self.start_msg is None:
            return
        st.data = ConsumerData.from_json(msg.consumer_data)
        st.impl.subscriptions = {s.topic: s for s in st.data.subscription_data_set}
        for topic in st.impl.subscriptions:
            if topic in self.routes.routes:
                st.impl.set_topic_queues(topic, self.routes.subscribe_queues(topic))
        # the instance fetches the routes of the new subscriptions and sends them here
        self.send(self.start_msg.instance, UpdateConsumerData(msg.group, msg.consumer_data))
        self._round(msg.group)

    def _remove(self, msg: RemoveConsumer, sender: Any) -> None:
        st = self.groups.get(msg.group)
        if st is None or self.start_msg is None:
            self.send(sender, ConsumerRemoved(msg.group))
            return
        st.closing = True
        st.requester = sender
        self._apply(msg.group, st.impl.unlock_all(), oneway=True)
        st.impl.destroy()
        self.send(self.start_msg.instance, UnregisterConsumer(msg.group))

    # -- routes and relayed requests ----------------------------------------------------------
    def _route(self, topic: str, route_json: bytes | None) -> None:
        route = TopicRouteData.from_json(route_json) if route_json is not None else None
        self.routes.update(topic, route)
        for group, st in self.groups.items():
            if topic in st.impl.subscriptions and st.impl.set_topic_queues(
                    topic, self.routes.subscribe_queues(topic)) and st.registered:
                self._round(group)

    def _relayed(self, msg: RelayedBrokerRequest) -> None:
        try:
            cmd = RemotingCommand.decode(memoryview(msg.frame)[4:])
        except ProtocolError as exc:
            log.warning("relayed request undecodable: %s", exc)
            return
        ext = cmd.ext_fields or {}
        group = ext.get("consumerGroup") or ext.get("group") or ""
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            log.info("NOTIFY_CONSUMER_IDS_CHANGED for %s from %s", group, msg.broker_addr)
            if group in self.groups:
                self._round(group)
            return
        if self.channel is not None and group in self.groups:
            self.channel.send_record(cc.Relay(group, msg.request_id, msg.broker_addr, msg.frame))

    # -- the rebalance round ------------------------------------------------------------------
    def _round(self, group: str) -> None:
        """doRebalance for one group (coalesced: one round at a time, then one more)."""
        st = self.groups.get(group)
        api = self.api
        if st is None or not st.registered or st.closing or api is None or not st.rebalance:
            return
        if st.running:
            st.again = True
            return
        st.running = True
        st.again = False
        impl = st.impl
        topics = list(impl.subscriptions)
        st.pending = set(topics)
        if not topics:
            self._end_round(group, st)
            return
        missing = False
        for topic in topics:
            if impl.model is MessageModel.BROADCASTING:
                self._topic_done(group, topic, None)
                continue
            addr = self.routes.find_broker_addr_by_topic(topic)
            if addr is None:
                missing = True
                if self.start_msg is not None:
                    self.send(self.start_msg.instance, RefreshTopicRoute(topic))
                self._topic_done(group, topic, None, skip=True)
                continue
            api.get_consumer_id_list_by_group(addr, group, CID_TIMEOUT_MS,
                                              callback=self._cids_callback(group, topic))
        self._retry_missing_routes(group, st, missing)

    def _retry_missing_routes(self, group: str, st: GroupState, missing: bool) -> None:
        """A subscribed topic without a route: a round again soon (backing off), so a route that
        reaches the name server just after this round (a new %RETRY% topic) is found in about
        a second rather than at the next periodic round."""
        msg = self.start_msg
        if not missing or msg is None:
            st.route_wait_ms = 0.0
            return
        st.route_wait_ms = route_retry_after(st.route_wait_ms, msg.retry_ms, msg.interval_ms)
        if st.route_wait_ms > 0:
            self.schedule(f"soon:{group}", st.route_wait_ms)

    def _cids_callback(self, group: str, topic: str) -> Callable[[Any, MQClientError | None], None]:
        def done(cids: Any, err: MQClientError | None) -> None:
            if err is not None:
                log.warning("rebalance %s %s: consumer id list failed: %s", group, topic, err)
                cids = None
            self._topic_done(group, topic, cids)

        return done

    def _topic_done(self, group: str, topic: str, cids: list[str] | None, *,
                    skip: bool = False) -> None:
        st = self.groups.get(group)
        if st is None or topic not in st.pending:
            return
        st.pending.discard(topic)
        if not st.closing and not skip:
            self._apply(group, st.impl.rebalance_topic(topic, cids, _now_ms()))
        if not st.pending:
            self._end_round(group, st)

    def _end_round(self, group: str, st: GroupState) -> None:
        if not st.closing:
            self._apply(group, st.impl.truncate_not_my_topics())
        st.running = False
        if st.again:
            self._round(group)
        elif st.impl.retry_soon and self.start_msg is not None:
            st.impl.retry_soon = False
            self.schedule(f"soon:{group}", self.start_msg.retry_ms)

    # -- actions ------------------------------------------------------------------------------
    def _apply(self, group: str, actions: list[Action], oneway: bool = False) -> None:
        assigns: list[cc.QueueLock] = []
        revokes: list[MessageQueue] = []
        states: list[cc.QueueLock] = []
        st = self.groups.get(group)
        for a in actions:
            if isinstance(a, Assign):
                assigns.append(cc.QueueLock(a.mq, a.locked, a.lock_ms))
            elif isinstance(a, Revoke):
                revokes.append(a.mq)
            elif isinstance(a, LockState):
                states.append(cc.QueueLock(a.mq, a.locked, a.lock_ms))
            elif isinstance(a, Lock):
                self._lock(group, a)
            elif isinstance(a, Unlock):
                self._unlock(group, a, oneway)
            elif isinstance(a, SubscriptionChanged) and st is not None:
                self._changed(group, st, a)
        ch_end = self.channel
        if ch_end is None:
            return
        out: list[TypedRecord] = []
        if revokes:
            out.append(cc.Revoke(group, tuple(sorted(revokes))))
        if assigns:
            out.append(cc.Assign(group, tuple(assigns)))
        if states:
            out.append(cc.LockStates(group, tuple(states)))
        if out:
            ch_end.send_records(out)

    def _changed(self, group: str, st: GroupState, a: SubscriptionChanged) -> None:
        """messageQueueChanged: the new subVersion goes out in a heartbeat at once."""
        st.data.subscription_data_set = list(st.impl.subscriptions.values())
        if self.start_msg is not None:
            self.send(self.start_msg.instance, UpdateConsumerData(group, st.data.to_json()))
        if self.channel is not None:
            self.channel.send_record(cc.QueuesChanged(group, a.topic, tuple(a.mq_all),
                                                      tuple(a.mq_divided)))  # fmt: skip

    def _lock(self, group: str, a: Lock) -> None:
        api, st = self.api, self.groups.get(group)
        if api is None or st is None or self.start_msg is None:
            return
        found = self.routes.find_broker_address_in_subscribe(a.broker_name, MASTER_ID, True)
        asked = sorted(a.mqs)
        if found is None:
            self._apply(group, st.impl.on_lock_result(asked, (), _now_ms()))
            return
        body = LockBatchRequestBody(group, self.start_msg.client_id, asked)

        def done(granted: Any, err: MQClientError | None) -> None:
            if err is not None:
                log.warning("LOCK_BATCH_MQ %s at %s failed: %s", group, found.broker_addr, err)
            s = self.groups.get(group)
            if s is not None and not s.closing:
                self._apply(group, s.impl.on_lock_result(asked, granted or (), _now_ms()))
                if s.impl.retry_soon and not s.running and self.start_msg is not None:
                    s.impl.retry_soon = False
                    self.schedule(f"soon:{group}", self.start_msg.retry_ms)

        api.lock_batch_mq(found.broker_addr, body, LOCK_TIMEOUT_MS, callback=done)

    def _unlock(self, group: str, a: Unlock, oneway: bool) -> None:
        api = self.api
        if api is None or self.start_msg is None:
            return
        found = self.routes.find_broker_address_in_subscribe(a.broker_name, MASTER_ID, True)
        if found is None:
            return
        body = UnlockBatchRequestBody(group, self.start_msg.client_id, sorted(a.mqs))
        api.unlock_batch_mq(found.broker_addr, body, LOCK_TIMEOUT_MS, oneway=True)

    # -- the channel --------------------------------------------------------------------------
    def _read_channel(self, end: ch.ChannelEnd) -> None:
        records = end.read_records()
        if records is None:
            self._orphaned()
            return
        for kind, payload in records:
            if kind == ch.BYE:
                continue
            try:
                self._on_record(kind, payload)
            except Exception:
                log.exception("rebalance channel record kind=%d failed", kind)

    def _on_record(self, kind: int, payload: memoryview) -> None:
        try:
            rec = ch.read_record(kind, payload)
        except ch.ChannelError as exc:
            log.warning("rebalance channel: %s", exc)
            return
        match rec:
            case cc.Revoked(group=group, mqs=mqs):
                st = self.groups.get(group)
                if st is None:
                    return
                for mq in mqs:
                    self._apply(group, st.impl.on_revoked(mq))
                if st.impl.retry_soon and not st.running and self.start_msg is not None:
                    st.impl.retry_soon = False
                    self.schedule(f"soon:{group}", self.start_msg.retry_ms)
            case cc.RelayAnswer(request_id=rid, frame=frame):
                if self.start_msg is not None:
                    self.send(self.start_msg.instance, RelayedBrokerAnswer(rid, frame))
            case cc.RebalanceNow(group=group):
                self._round(group)
            case _:
                log.warning("rebalance channel: unexpected %s", type(rec).__name__)

    def _orphaned(self) -> None:
        log.warning("RebalanceService: the user's process closed the channel")
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        self._rewatch()

    # -- readiness and timers -----------------------------------------------------------------
    def on_timer(self, key: str) -> None:
        msg = self.start_msg
        if msg is None:
            return
        if key == "rebalance":
            for group in list(self.groups):
                self._round(group)
            self.schedule("rebalance", msg.interval_ms)
        elif key == "lock":
            for group, st in list(self.groups.items()):
                if st.registered and not st.closing:
                    self._apply(group, st.impl.lock_all())
            self.schedule("lock", msg.lock_interval_ms)
        elif key.startswith("soon:"):
            self._round(key[5:])
        elif key == "scan":
            if self.remoting is not None:
                self.remoting.scan_response_table(time.monotonic())
            self.schedule("scan", SCAN_MS)
        self._after_pass()



def _now_ms() -> int:
    return int(time.time() * 1000)
