"""The broker's processor groups and service actors: each one an actor of its own.

Mirrors broker/BrokerController.registerProcessor() and the services BrokerController.start()
starts, RocketMQ 4.9.x: each processor group is one of RocketMQ's executors (send, pull,
consumer manage, client manage / heartbeat, query, admin = the default processor); the service
groups are PullRequestHoldService ("hold"), GroupTransferService ("transfer", a SYNC_MASTER's),
ScheduleMessageService ("schedule") and TransactionalMessageCheckService ("txcheck", a
master's). The runtime creates one ProcessorActor per group, routes request codes by `codes`
(unknown codes go to DEFAULT_GROUP) and opens the links each group names (`links`).
"""

from __future__ import annotations

import logging
from typing import Any

from actors.broker.config import BrokerConfig
from actors.broker.context import BrokerContext
from actors.core import Outbox, ProcessorCore, ProcessorGroup
from protocol.codes import RequestCode as RC
from store.config import StoreConfig

log = logging.getLogger(__name__)

DEFAULT_GROUP = "admin"


def _build_send(ctx: BrokerContext) -> ProcessorCore:
    from actors.broker.processors.send import SendMessageProcessor

    return SendMessageProcessor(ctx)


def _build_pull(ctx: BrokerContext) -> ProcessorCore:
    from actors.broker.processors.pull import PullMessageProcessor

    return PullMessageProcessor(ctx)


def _build_consumer_manage(ctx: BrokerContext) -> ProcessorCore:
    from actors.broker.processors.consumer_manage import ConsumerManageProcessor

    return ConsumerManageProcessor(ctx)


def _build_client_manage(ctx: BrokerContext) -> ProcessorCore:
    from actors.broker.processors.client_manage import ClientManageProcessor

    return ClientManageProcessor(ctx)


def _build_query(ctx: BrokerContext) -> ProcessorCore:
    from actors.broker.processors.query import QueryMessageProcessor

    return QueryMessageProcessor(ctx)


def _build_admin(ctx: BrokerContext) -> ProcessorCore:
    from actors.broker.processors.admin import AdminBrokerProcessor

    return AdminBrokerProcessor(ctx)


def _wait_send(bc: BrokerConfig) -> int:
    return bc.waitTimeMillsInSendQueue


def _wait_pull(bc: BrokerConfig) -> int:
    return bc.waitTimeMillsInPullQueue


def _wait_heartbeat(bc: BrokerConfig) -> int:
    return bc.waitTimeMillsInHeartbeatQueue


def _wait_other(bc: BrokerConfig) -> int:
    return bc.waitTimeMillsInOtherQueue


def _build_hold(ctx: BrokerContext) -> ProcessorCore:
    from actors.broker.pull_hold_service import PullHoldServiceCore

    return PullHoldServiceCore(ctx)


def _build_transfer(ctx: BrokerContext) -> ProcessorCore:
    from actors.broker.group_transfer import GroupTransferService

    return GroupTransferService(ctx)


def _build_schedule(ctx: BrokerContext) -> ProcessorCore:
    from actors.broker.schedule import ScheduleMessageService

    return ScheduleMessageService(ctx.store, ctx.store_config,
                                  deliver=not ctx.broker_config.is_slave)  # fmt: skip


def _build_txcheck(ctx: BrokerContext) -> ProcessorCore:
    from actors.broker.transactional_message_check import TransactionalMessageCheckService

    return TransactionalMessageCheckService(ctx)


def _sync_master(bc: BrokerConfig) -> bool:
    return bc.brokerRole.upper() == "SYNC_MASTER"


def _master(bc: BrokerConfig) -> bool:
    return not bc.is_slave


BROKER_PROCESSOR_GROUPS: tuple[ProcessorGroup, ...] = (
    ProcessorGroup(
        "send",
        frozenset(
            {
                RC.SEND_MESSAGE,
                RC.SEND_MESSAGE_V2,
                RC.SEND_BATCH_MESSAGE,
                RC.CONSUMER_SEND_MSG_BACK,
                RC.END_TRANSACTION,  # the commit is a put: THE writer serves it (DESIGN.md)
                RC.SEND_REPLY_MESSAGE,  # ReplyMessageProcessor: a put, then a push to the
                RC.SEND_REPLY_MESSAGE_V2,  # requester whose answer comes back here
                RC.RESUME_CHECK_HALF_MESSAGE,  # a put back to the half queue
                # the admin codes that change the store: in order with the sends (admin_store)
                RC.DELETE_TOPIC_IN_BROKER,
                RC.CLEAN_UNUSED_TOPIC,
                RC.CLEAN_EXPIRED_CONSUMEQUEUE,
                RC.DELETE_EXPIRED_COMMITLOG,
            }
        ),
        _wait_send,
        _build_send,
        spin_us=50.0,
        shed_codes=frozenset({RC.SEND_MESSAGE, RC.SEND_MESSAGE_V2, RC.SEND_BATCH_MESSAGE,
                              RC.CONSUMER_SEND_MSG_BACK, RC.END_TRANSACTION}),
        links=("hold", "transfer"),  # arrival notices; SYNC_MASTER sends waiting for a slave
    ),
    ProcessorGroup("pull", frozenset({RC.PULL_MESSAGE}), _wait_pull, _build_pull,
                   reply_flush_every=1, direct_replies=True, holds_requests=True,
                   links=("hold",)),
    ProcessorGroup(
        "consumer_manage",
        frozenset(
            {RC.QUERY_CONSUMER_OFFSET, RC.UPDATE_CONSUMER_OFFSET, RC.GET_CONSUMER_LIST_BY_GROUP}
        ),
        _wait_other,
        _build_consumer_manage,
    ),
    ProcessorGroup(
        "client_manage",
        frozenset(
            {
                RC.HEART_BEAT,
                RC.UNREGISTER_CLIENT,
                RC.GET_PRODUCER_CONNECTION_LIST,
                RC.GET_ALL_PRODUCER_INFO,
                RC.CHECK_CLIENT_CONFIG,
            }
        ),
        _wait_heartbeat,
        _build_client_manage,
    ),
    ProcessorGroup(
        "query",
        frozenset({RC.QUERY_MESSAGE, RC.VIEW_MESSAGE_BY_ID}),
        _wait_other,
        _build_query,
    ),
    ProcessorGroup(
        "admin",
        frozenset(
            {
                RC.UPDATE_AND_CREATE_TOPIC,
                RC.GET_ALL_TOPIC_CONFIG,
                RC.GET_BROKER_RUNTIME_INFO,
                RC.SEARCH_OFFSET_BY_TIMESTAMP,
                RC.GET_MAX_OFFSET,
                RC.GET_MIN_OFFSET,
                RC.GET_EARLIEST_MSG_STORETIME,
                RC.LOCK_BATCH_MQ,
                RC.UNLOCK_BATCH_MQ,
                RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                RC.DELETE_SUBSCRIPTIONGROUP,
                RC.GET_ALL_CONSUMER_OFFSET,
                RC.GET_CONSUMER_CONNECTION_LIST,
                RC.GET_CONSUME_STATS,
                RC.GET_TOPIC_STATS_INFO,
                RC.GET_BROKER_CONFIG,
                RC.UPDATE_BROKER_CONFIG,
                RC.INVOKE_BROKER_TO_RESET_OFFSET,
                RC.QUERY_TOPIC_CONSUME_BY_WHO,
                RC.QUERY_CONSUME_QUEUE,
                RC.CLONE_GROUP_OFFSET,
                RC.QUERY_CONSUME_TIME_SPAN,
                RC.VIEW_BROKER_STATS_DATA,
                RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                RC.QUERY_CORRECTION_OFFSET,
                RC.UPDATE_AND_CREATE_ACL_CONFIG,
                RC.DELETE_ACL_CONFIG,
                RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                RC.GET_BROKER_CLUSTER_ACL_INFO,
                RC.GET_BROKER_CLUSTER_ACL_CONFIG,
            }
        ),
        _wait_other,
        _build_admin,
    ),
    # the services (no request codes but the live delay offsets)
    ProcessorGroup("hold", frozenset(), _wait_pull, _build_hold),
    # its answers reach producers whose next send is near: the RemotingServer spins after
    # reading them, as it does after the send group's; its own spin yields the CPU to the
    # RemotingServer it just woke
    ProcessorGroup("transfer", frozenset(), _wait_send, _build_transfer,
                   spin_us=50.0, runs_on=_sync_master),
    ProcessorGroup("schedule", frozenset({RC.GET_ALL_DELAY_OFFSET}), _wait_other,
                   _build_schedule, links=("send",)),
    ProcessorGroup("txcheck", frozenset(), _wait_other, _build_txcheck,
                   links=("send",), runs_on=_master),
)

GROUPS_BY_NAME: dict[str, ProcessorGroup] = {g.name: g for g in BROKER_PROCESSOR_GROUPS}


def group_for_code(code: int) -> str:
    """The processor group serving a request code (DEFAULT_GROUP when unknown)."""
    for g in BROKER_PROCESSOR_GROUPS:
        if code in g.codes:
            return g.name
    return DEFAULT_GROUP


def make_context(
    broker_config: BrokerConfig,
    store_config: StoreConfig,
    *,
    group: str,
    outbox: Outbox | None,
    now_ms: int,
) -> BrokerContext:
    """A context for one actor: "send" opens the writer store, "controller" no store,
    every other group a read-only MessageStoreReader."""
    store: Any = None
    if group == "send":
        from store.message_store import DefaultMessageStore

        store = DefaultMessageStore(store_config)
        if not store.load(now_ms):
            raise RuntimeError("message store failed to load")
        store.start(now_ms)
    elif group != "controller":
        from store.message_store_reader import MessageStoreReader

        store = MessageStoreReader(store_config)
    return BrokerContext(broker_config, store_config, group=group, outbox=outbox, store=store)
