"""The client_manage group: HEART_BEAT (34) and UNREGISTER_CLIENT (35), plus channel
housekeeping and NOTIFY_CONSUMER_IDS_CHANGED (40, oneway, server-initiated).

Mirrors broker/processor/ClientManageProcessor.java, broker/client/ClientHousekeepingService
.java and DefaultConsumerIdsChangeListener.java, RocketMQ 4.9.x (spec §9.2). This actor owns
the consumer and producer channel tables; consumer group snapshots go to other actors as events.

A heartbeat that creates a group's %RETRY% topic is answered, and its consumers notified, only
once the name servers have the broker's registration with it (or registerBrokerTimeoutMills
passed): heartBeat's createTopicInSendMessageBackMethod registers (registerBrokerAll) before
registerConsumer sends NOTIFY_CONSUMER_IDS_CHANGED, so the rebalance the notice starts finds the
retry topic's route. Notified earlier, a new consumer would learn its retry queue only at its
next periodic rebalance (20 s), and its first retries would wait that long.
"""

from __future__ import annotations

import logging
from typing import Final

from actors.broker.consumer_manager import ClientChannel, ConsumerManager
from actors.broker.context import BrokerContext
from actors.broker.events import (
    ConsumerGroupChanged,
    ConsumerGroupRemoved,
    ProducerGroupChanged,
    SubscriptionGroupChanged,
    TopicConfigChanged,
)
from actors.broker.held_replies import HeldReplies
from actors.broker.producer_manager import ProducerManager
from actors.broker.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from actors.core import CodeDispatchCore, Request
from protocol.bodies import (
    EXPRESSION_TYPE_TAG,
    HeartbeatData,
    SubscriptionData,
    dumps_compact,
    loads_lenient,
)
from protocol.codes import CLIENT_INNER_PRODUCER_GROUP, TopicSysFlag, language_name, retry_topic
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import (
    GetProducerConnectionListRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)

log = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL_MS: Final = 10_000


class ClientManageProcessor(CodeDispatchCore):
    """The client_manage core (ProcessorCore)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        expiry = ctx.broker_config.channelExpiredTimeout
        self.consumers = ConsumerManager(expiry)
        self.producers = ProducerManager(expiry)
        self._next_scan_ms: int | None = None
        # heartbeats that created a %RETRY% topic: their reply and notices wait for the
        # registration (BarrierCore)
        self.held = HeldReplies(ctx.outbox, ctx.broker_config.registerBrokerTimeoutMills)
        self.handlers = {
            RC.HEART_BEAT: self._heartbeat,
            RC.UNREGISTER_CLIENT: self._unregister,
            RC.GET_PRODUCER_CONNECTION_LIST: self._producer_connections,
            RC.GET_ALL_PRODUCER_INFO: self._all_producer_info,
            RC.CHECK_CLIENT_CONFIG: self._check_client_config,
        }

    # --- ProcessorCore --------------------------------------------------------------------

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Remove the channel from every group and notify the remaining consumers."""
        self.held.forget(conn_id)
        for group in self.producers.on_connection_closed(conn_id):
            self._producers_changed(group)
        # doChannelCloseEvent notifies whatever the group's notifyConsumerIdsChangedEnable
        for group in self.consumers.on_connection_closed(conn_id):
            self._group_changed(group, notify=True, group_flag=False)

    def on_connection_lost(self, conn_id: int, now_ms: int) -> None:
        """ConnectionLossCore: the connection died with the RemotingServer. Its registrations
        stay (lost channels, actors.broker.consumer_manager): nobody is notified, and only
        the producers' live channels (check-backs) shrink."""
        self.held.forget(conn_id)
        for group in self.producers.on_connection_lost(conn_id):
            self._producers_changed(group)
        for group in self.consumers.on_connection_lost(conn_id):
            self._group_changed(group, notify=False)  # its client had a new one already

    def tick(self, now_ms: int) -> int | None:
        """ClientHousekeepingService: every 10 s drop channels silent for 120 s; held heartbeat
        replies answered once registerBrokerTimeoutMills passed."""
        held_wait = self.held.expire(now_ms)
        if self._next_scan_ms is None:
            self._next_scan_ms = now_ms + HOUSEKEEPING_INTERVAL_MS
        if now_ms >= self._next_scan_ms:
            self._next_scan_ms = now_ms + HOUSEKEEPING_INTERVAL_MS
            gone_producers = self.producers.scan_expired(now_ms)
            gone_consumers = self.consumers.scan_expired(now_ms)
            for group in {g for g, _ in gone_producers}:
                self._producers_changed(group)
            for group in {g for g, _ in gone_consumers}:
                self._group_changed(group, notify=True)
            # Java closes an expired channel too (RemotingUtil.closeChannel): the client
            # reconnects and re-registers with its next heartbeat. (A lost one has no
            # connection left to close.)
            self._close({ch.conn_id for _, ch in gone_producers + gone_consumers
                         if not ch.lost})  # fmt: skip
        wait = max(0, self._next_scan_ms - now_ms)
        return wait if held_wait is None else min(wait, held_wait)

    def release(self, token: int, now_ms: int) -> bool:
        """The registration with the new %RETRY% topics went out: the heartbeat's notices and
        reply held under `token` are sent (False if gone)."""
        return self.held.release(token)

    def _close(self, conn_ids: set[int]) -> None:
        outbox = self.ctx.outbox
        if outbox is None:
            return
        for conn_id in sorted(conn_ids):
            outbox.close_conn(conn_id)

    # --- helpers --------------------------------------------------------------------------

    def _producers_changed(self, group: str) -> None:
        """Tell the send actor (transaction check-backs) the group's live connections."""
        if group == CLIENT_INNER_PRODUCER_GROUP:  # every client has it; never transactional
            return
        conns = self.producers.live(group)
        self.ctx.emit(ProducerGroupChanged(
            group, tuple(sorted(conns)),
            tuple(sorted((ch.client_id, c) for c, ch in conns.items())),
        ))  # fmt: skip

    def _group_changed(self, group: str, *, notify: bool, group_flag: bool = True) -> None:
        """Tell the other actors; notify the group's consumers at once."""
        self._send_all(self._group_event(group, notify=notify, group_flag=group_flag))

    def _group_event(self, group: str, *, notify: bool, group_flag: bool = True
                     ) -> list[tuple[int, RemotingCommand]]:  # fmt: skip
        """Emit the group's snapshot; the notices to send (none unless `notify`)."""
        info = self.consumers.info(group)
        if info is None:
            self.ctx.emit(ConsumerGroupRemoved(group))
            return []
        self.ctx.emit(ConsumerGroupChanged(info))
        return self._notices(group, group_flag) if notify else []

    def _notices(self, group: str, group_flag: bool = True) -> list[tuple[int, RemotingCommand]]:
        """NOTIFY_CONSUMER_IDS_CHANGED (oneway) for every channel of the group; the group's own
        notifyConsumerIdsChangedEnable is consulted on register/unregister only (group_flag)."""
        if not self.ctx.broker_config.notifyConsumerIdsChangedEnable:
            return []
        cfg = self.ctx.groups.get(group) if group_flag else None
        if cfg is not None and not cfg.notify_consumer_ids_changed_enable:
            return []
        ext = NotifyConsumerIdsChangedRequestHeader(group).to_ext()
        return [(ch.conn_id, RemotingCommand.request(RC.NOTIFY_CONSUMER_IDS_CHANGED, dict(ext),
                                                     oneway=True))
                for ch in self.consumers.live_channels(group)]  # fmt: skip

    def _send_all(self, sends: list[tuple[int, RemotingCommand]]) -> None:
        outbox = self.ctx.outbox
        if outbox is None:
            return
        for conn_id, cmd in sends:
            outbox.send(conn_id, cmd)

    # --- HEART_BEAT -----------------------------------------------------------------------

    def _heartbeat(self, req: Request, now_ms: int) -> RemotingCommand | None:
        cmd = req.cmd
        if not cmd.body:  # HeartbeatData.decode(null) throws there
            return cmd.make_response(RS.SYSTEM_ERROR, "bad heartbeat body: none")
        try:
            data = HeartbeatData.from_json(cmd.body)
        except ValueError as e:
            log.warning("bad heartbeat body from %s:%d: %s", req.peer[0], req.peer[1], e)
            return cmd.make_response(RS.SYSTEM_ERROR, f"bad heartbeat body: {e}")
        channel = ClientChannel(
            req.conn_id, data.client_id, cmd.language, cmd.version, now_ms, req.peer
        )
        made: list[TopicConfig] = []  # %RETRY% topics this heartbeat created
        notices: list[tuple[int, RemotingCommand]] = []
        for cd in data.consumer_data_set:
            group = cd.group_name
            if not group:
                continue
            cfg, created = self.ctx.groups.find_or_create(group)
            if created and cfg is not None:
                self.ctx.emit(SubscriptionGroupChanged(cfg))
            if cfg is not None:
                rt, created_rt = self.ctx.topics.create_in_send_back(
                    retry_topic(group), cfg.retry_queue_nums, PERM_READ | PERM_WRITE,
                    TopicSysFlag.FLAG_UNIT_SUB if cd.unit_mode else 0,
                )  # fmt: skip
                if created_rt:
                    made.append(rt)
            changed, notify = self.consumers.register(
                group,
                channel,
                cd.consume_type.name,
                cd.message_model.name,
                cd.consume_from_where.name,
                [s for s in cd.subscription_data_set if s.topic],
            )
            if changed or notify:
                notices += self._group_event(group, notify=notify)
        for pd in data.producer_data_set:
            if pd.group_name and self.producers.register(pd.group_name, channel):
                self._producers_changed(pd.group_name)
        resp = cmd.make_response(RS.SUCCESS, None, None)
        if not made or not self.ctx.registration_barrier or cmd.is_oneway:
            for tc in made:
                self.ctx.emit(TopicConfigChanged(tc, register=True))
            self._send_all(notices)
            return resp
        # createTopicInSendMessageBackMethod registers synchronously in Java, before the
        # consumer is registered and notified: notices and reply wait for the registration
        token = self.held.hold(req.conn_id, resp, now_ms, before=notices)
        for i, tc in enumerate(made):
            last = i == len(made) - 1
            self.ctx.emit(TopicConfigChanged(tc, register=True, barrier=token if last else 0))
        return None

    # --- UNREGISTER_CLIENT ----------------------------------------------------------------

    def _unregister(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        h = UnregisterClientRequestHeader.from_ext(cmd.ext_fields)
        producer_group = h.producer_group
        consumer_group = h.consumer_group
        # by the connection (Java), and the client's lost channels, if any (a client that
        # reconnected after a RemotingServer died says goodbye on its new connection)
        client_id = h.client_id or None
        if producer_group and self.producers.unregister(producer_group, req.conn_id, client_id):
            self._producers_changed(producer_group)
        if consumer_group and self.consumers.unregister(consumer_group, req.conn_id, client_id):
            self._group_changed(consumer_group, notify=True)
        return cmd.make_response(RS.SUCCESS, None, {})

    # --- GET_PRODUCER_CONNECTION_LIST ---------------------------------------------------------

    def _producer_connections(self, req: Request, now_ms: int) -> RemotingCommand:
        """ProducerConnection of a group (this actor owns the producer table)."""
        cmd = req.cmd
        group = GetProducerConnectionListRequestHeader.from_ext(cmd.ext_fields).producer_group
        chans = self.producers.groups.get(group)
        if not chans:
            return cmd.make_response(RS.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        conns = [
            {"clientAddr": f"{c.peer[0]}:{c.peer[1]}", "clientId": c.client_id,
             "language": language_name(c.language), "version": c.version}
            for c in sorted(chans.values(), key=lambda c: c.conn_id)
        ]  # fmt: skip
        return cmd.make_response(RS.SUCCESS, None, None, dumps_compact({"connectionSet": conns}))

    # --- CHECK_CLIENT_CONFIG ------------------------------------------------------------------

    def _check_client_config(self, req: Request, now_ms: int) -> RemotingCommand:
        """A consumer with a SQL92 subscription asks at start whether this broker can filter it."""
        from actors.broker.sql92 import SubscriptionRefused, compile_subscription

        cmd = req.cmd
        try:
            obj = loads_lenient(cmd.body) if cmd.body else {}
            raw = obj.get("subscriptionData") if isinstance(obj, dict) else None
            sd = SubscriptionData.from_obj(raw or {}, "subscriptionData")
        except ValueError as e:
            return cmd.make_response(RS.SYSTEM_ERROR, f"bad CheckClientRequestBody: {e}")
        if raw is None:  # ClientManageProcessor.checkClientConfig: nothing to check
            return cmd.make_response(RS.SUCCESS)
        expr = sd.expression_type or EXPRESSION_TYPE_TAG
        if expr == EXPRESSION_TYPE_TAG:
            return cmd.make_response(RS.SUCCESS)
        try:
            compile_subscription(expr, sd.sub_string, self.ctx.broker_config.enablePropertyFilter)
        except SubscriptionRefused as e:
            return cmd.make_response(e.code, e.remark)
        return cmd.make_response(RS.SUCCESS)

    # --- GET_ALL_PRODUCER_INFO (mqadmin producer) ----------------------------------------------

    def _all_producer_info(self, req: Request, now_ms: int) -> RemotingCommand:
        """ProducerTableInfo: every producer group (CLIENT_INNER_PRODUCER too, as Java keeps
        it) -> its channels as ProducerInfo, the address as Java's "/ip:port"."""
        data = {
            group: [
                {"clientId": c.client_id, "language": language_name(c.language),
                 "lastUpdateTimestamp": c.last_update_ms, "remoteIP": f"/{c.peer[0]}:{c.peer[1]}",
                 "version": c.version}
                for c in sorted(chans.values(), key=lambda c: c.conn_id)
            ]
            for group, chans in sorted(self.producers.groups.items())
        }  # fmt: skip
        return req.cmd.make_response(RS.SUCCESS, None, None, dumps_compact({"data": data}))
