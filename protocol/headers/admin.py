"""The admin tools' headers: topics, groups, stats, offsets reset, consumer status.

Mirrors common/protocol/header/CreateTopicRequestHeader.java, DeleteTopicRequestHeader,
GetConsumeStatsRequestHeader, ResetOffsetRequestHeader, GetConsumerRunningInfoRequestHeader,
QueryConsumeQueueRequestHeader, CloneGroupOffsetRequestHeader, ... (the MQAdmin requests),
RocketMQ 4.9.x (spec §3.4).
"""

from __future__ import annotations

from typing import ClassVar

from protocol.headers.command_custom_header import (
    CommandCustomHeader,
    Long,
    header,
)


@header
class CreateTopicRequestHeader(CommandCustomHeader):
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    order: bool = False
    topic_sys_flag: int | None = None


@header
class DeleteTopicRequestHeader(CommandCustomHeader):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str


@header
class DeleteSubscriptionGroupRequestHeader(CommandCustomHeader):
    """DELETE_SUBSCRIPTIONGROUP (207)."""

    group_name: str
    remove_offset: bool = False


@header
class GetConsumerConnectionListRequestHeader(CommandCustomHeader):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str


@header
class GetProducerConnectionListRequestHeader(CommandCustomHeader):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str


@header
class GetConsumeStatsRequestHeader(CommandCustomHeader):
    """GET_CONSUME_STATS (208)."""

    consumer_group: str
    topic: str | None = None


@header
class GetTopicStatsInfoRequestHeader(CommandCustomHeader):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str


@header
class ResetOffsetRequestHeader(CommandCustomHeader):
    """RESET_CONSUMER_CLIENT_OFFSET (220) and INVOKE_BROKER_TO_RESET_OFFSET (222)."""

    _KEYS: ClassVar[dict[str, str]] = {"is_force": "isForce"}

    topic: str
    group: str
    timestamp: Long
    is_force: bool


@header
class GetConsumerStatusRequestHeader(CommandCustomHeader):
    """GET_CONSUMER_STATUS_FROM_CLIENT (221) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223)."""

    topic: str
    group: str
    client_addr: str | None = None


@header
class GetConsumerRunningInfoRequestHeader(CommandCustomHeader):
    """GET_CONSUMER_RUNNING_INFO (307)."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@header
class ConsumeMessageDirectlyResultRequestHeader(CommandCustomHeader):
    """CONSUME_MESSAGE_DIRECTLY (309)."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None


@header
class GetBrokerConfigResponseHeader(CommandCustomHeader):
    """GET_BROKER_CONFIG (26) response: the config's data version."""

    version: str


@header
class QueryTopicConsumeByWhoRequestHeader(CommandCustomHeader):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str


@header
class QueryConsumeTimeSpanRequestHeader(CommandCustomHeader):
    """QUERY_CONSUME_TIME_SPAN (303)."""

    topic: str
    group: str


@header
class QueryConsumeQueueRequestHeader(CommandCustomHeader):
    """QUERY_CONSUME_QUEUE (321): no @CFNotNull field in Java (the primitives default to 0;
    mqadmin queryCq leaves consumerGroup out unless -g is given)."""

    topic: str
    queue_id: int = 0
    index: Long = 0
    count: int = 0
    consumer_group: str | None = None


@header
class CloneGroupOffsetRequestHeader(CommandCustomHeader):
    """CLONE_GROUP_OFFSET (314)."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@header
class ViewBrokerStatsDataRequestHeader(CommandCustomHeader):
    """VIEW_BROKER_STATS_DATA (315)."""

    stats_name: str
    stats_key: str


@header
class QueryCorrectionOffsetHeader(CommandCustomHeader):
    """QUERY_CORRECTION_OFFSET (308): filterGroups is a comma-separated list."""

    compare_group: str
    topic: str
    filter_groups: str | None = None


@header
class ResumeCheckHalfMessageRequestHeader(CommandCustomHeader):
    """RESUME_CHECK_HALF_MESSAGE (323)."""

    msg_id: str | None = None
