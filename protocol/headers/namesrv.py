"""The name server's headers: broker registration, routes, KV config, write permission.

Mirrors common/protocol/header/namesrv/*.java (RegisterBrokerRequestHeader,
GetRouteInfoRequestHeader, QueryDataVersionRequestHeader, PutKVConfigRequestHeader,
WipeWritePermOfBrokerRequestHeader, ...), RocketMQ 4.9.x (spec §3.3).
"""

from __future__ import annotations

from protocol.headers.command_custom_header import (
    CommandCustomHeader,
    Long,
    header,
)


@header
class RegisterBrokerRequestHeader(CommandCustomHeader):
    """REGISTER_BROKER (103)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Long
    compressed: bool | None = None
    body_crc32: int | None = None


@header
class RegisterBrokerResponseHeader(CommandCustomHeader):
    """REGISTER_BROKER response: filled only for a slave whose master is alive."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@header
class UnRegisterBrokerRequestHeader(CommandCustomHeader):
    """UNREGISTER_BROKER (104)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@header
class GetRouteInfoRequestHeader(CommandCustomHeader):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str
    accept_standard_json_only: bool | None = None


@header
class QueryDataVersionRequestHeader(CommandCustomHeader):
    """QUERY_DATA_VERSION (322); body is the broker's DataVersion."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@header
class QueryDataVersionResponseHeader(CommandCustomHeader):
    """QUERY_DATA_VERSION response."""

    changed: bool


@header
class PutKVConfigRequestHeader(CommandCustomHeader):
    """PUT_KV_CONFIG (100)."""

    namespace: str
    key: str
    value: str


@header
class GetKVConfigRequestHeader(CommandCustomHeader):
    """GET_KV_CONFIG (101)."""

    namespace: str
    key: str


@header
class GetKVConfigResponseHeader(CommandCustomHeader):
    """GET_KV_CONFIG response."""

    value: str | None = None


@header
class DeleteKVConfigRequestHeader(CommandCustomHeader):
    """DELETE_KV_CONFIG (102)."""

    namespace: str
    key: str


@header
class GetKVListByNamespaceRequestHeader(CommandCustomHeader):
    """GET_KVLIST_BY_NAMESPACE (219)."""

    namespace: str


@header
class WipeWritePermOfBrokerRequestHeader(CommandCustomHeader):
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    broker_name: str


@header
class WipeWritePermOfBrokerResponseHeader(CommandCustomHeader):
    """WIPE_WRITE_PERM_OF_BROKER response."""

    wipe_topic_count: int


@header
class AddWritePermOfBrokerRequestHeader(CommandCustomHeader):
    """ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str


@header
class AddWritePermOfBrokerResponseHeader(CommandCustomHeader):
    """ADD_WRITE_PERM_OF_BROKER response."""

    add_topic_count: int


@header
class GetTopicsByClusterRequestHeader(CommandCustomHeader):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str


@header
class DeleteTopicFromNamesrvRequestHeader(CommandCustomHeader):
    """DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str
    cluster_name: str | None = None
