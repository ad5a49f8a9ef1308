"""The consumer's headers: pull, offsets, client (un)registration, send-back, query.

Mirrors common/protocol/header/PullMessageRequestHeader.java, QueryConsumerOffset*,
UpdateConsumerOffset*, GetMaxOffset*, GetMinOffset*, SearchOffset*, GetEarliestMsgStoretime*,
UnregisterClient*, GetConsumerListByGroup*, NotifyConsumerIdsChangedRequestHeader,
ConsumerSendMsgBackRequestHeader, QueryMessage* and ViewMessageRequestHeader, RocketMQ 4.9.x
(spec §3.2).
"""

from __future__ import annotations

from typing import ClassVar, Final

from protocol.headers.command_custom_header import (
    CommandCustomHeader,
    Long,
    header,
)


@header
class PullMessageRequestHeader(CommandCustomHeader):
    """PULL_MESSAGE (11)."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: Long
    max_msg_nums: int
    sys_flag: int
    commit_offset: Long
    suspend_timeout_millis: Long
    sub_version: Long
    subscription: str | None = None
    expression_type: str | None = None
    bname: str | None = None


@header
class PullMessageResponseHeader(CommandCustomHeader):
    """Pull response; required on all four pull statuses (0, 19, 20, 21)."""

    suggest_which_broker_id: Long
    next_begin_offset: Long
    min_offset: Long
    max_offset: Long


@header
class QueryConsumerOffsetRequestHeader(CommandCustomHeader):
    """QUERY_CONSUMER_OFFSET (14)."""

    consumer_group: str
    topic: str
    queue_id: int
    bname: str | None = None


@header
class QueryConsumerOffsetResponseHeader(CommandCustomHeader):
    """QUERY_CONSUMER_OFFSET response."""

    offset: Long


@header
class UpdateConsumerOffsetRequestHeader(CommandCustomHeader):
    """UPDATE_CONSUMER_OFFSET (15), usually oneway."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: Long
    bname: str | None = None


@header
class UpdateConsumerOffsetResponseHeader(CommandCustomHeader):
    """UPDATE_CONSUMER_OFFSET response (no fields)."""


@header
class GetMaxOffsetRequestHeader(CommandCustomHeader):
    """GET_MAX_OFFSET (30)."""

    topic: str
    queue_id: int
    bname: str | None = None


@header
class GetMaxOffsetResponseHeader(CommandCustomHeader):
    """GET_MAX_OFFSET response: the next offset to be written."""

    offset: Long


@header
class GetMinOffsetRequestHeader(CommandCustomHeader):
    """GET_MIN_OFFSET (31)."""

    topic: str
    queue_id: int
    bname: str | None = None


@header
class GetMinOffsetResponseHeader(CommandCustomHeader):
    """GET_MIN_OFFSET response (-1 for an unknown queue)."""

    offset: Long


@header
class SearchOffsetRequestHeader(CommandCustomHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP (29)."""

    topic: str
    queue_id: int
    timestamp: Long
    bname: str | None = None


@header
class SearchOffsetResponseHeader(CommandCustomHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP response."""

    offset: Long


@header
class GetEarliestMsgStoretimeRequestHeader(CommandCustomHeader):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str
    queue_id: int
    bname: str | None = None


@header
class GetEarliestMsgStoretimeResponseHeader(CommandCustomHeader):
    """GET_EARLIEST_MSG_STORETIME response."""

    timestamp: Long


@header
class UnregisterClientRequestHeader(CommandCustomHeader):
    """UNREGISTER_CLIENT (35): one request per group on client shutdown."""

    _KEYS: ClassVar[dict[str, str]] = {"client_id": "clientID"}

    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None


@header
class UnregisterClientResponseHeader(CommandCustomHeader):
    """UNREGISTER_CLIENT response (no fields)."""


@header
class GetConsumerListByGroupRequestHeader(CommandCustomHeader):
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumer_group: str


@header
class GetConsumerListByGroupResponseHeader(CommandCustomHeader):
    """GET_CONSUMER_LIST_BY_GROUP response (no fields; the body carries the ids)."""


@header
class NotifyConsumerIdsChangedRequestHeader(CommandCustomHeader):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker to consumer, oneway."""

    consumer_group: str


@header
class ConsumerSendMsgBackRequestHeader(CommandCustomHeader):
    """CONSUMER_SEND_MSG_BACK (36): offset is the commit-log offset of the message."""

    offset: Long
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False  # Java primitive boolean: always on the wire
    max_reconsume_times: int | None = None
    bname: str | None = None


@header
class QueryMessageRequestHeader(CommandCustomHeader):
    """QUERY_MESSAGE (12); `_UNIQUE_KEY_QUERY`="true" asks for a unique-key lookup."""

    _KEYS: ClassVar[dict[str, str]] = {"unique_key_query": "_UNIQUE_KEY_QUERY"}

    topic: str
    key: str
    max_num: int
    begin_timestamp: Long
    end_timestamp: Long
    unique_key_query: bool | None = None


UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"


@header
class QueryMessageResponseHeader(CommandCustomHeader):
    """QUERY_MESSAGE response."""

    index_last_update_timestamp: Long
    index_last_update_phyoffset: Long


@header
class ViewMessageRequestHeader(CommandCustomHeader):
    """VIEW_MESSAGE_BY_ID (33): offset is a commit-log offset."""

    offset: Long
