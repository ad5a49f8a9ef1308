"""JSON request/response bodies and config-file shapes.

Mirrors common/protocol/body/*.java, common/protocol/route/*.java, common/protocol/heartbeat/
*.java, common/TopicConfig.java, common/DataVersion.java and common/subscription/
SubscriptionGroupConfig.java, RocketMQ 4.9.x: one module per family (route, heartbeat,
topic_config, message_queue, lists, subscription_group, offset_wrappers) on the lenient
reader / compact writer of json_body; this package re-exports them all.
"""

from __future__ import annotations

from typing import Final

from protocol.bodies.heartbeat import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    SUB_ALL,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from protocol.bodies.json_body import (
    BodyError,
    JsonBody,
    JsonObj,
    drop_none,
    dumps_compact,
    dumps_object_map,
    dumps_pretty,
    int_keyed,
    loads_lenient,
    loads_object_map,
    to_bool,
    to_enum,
    to_int,
    to_str,
)
from protocol.bodies.lists import (
    GetConsumerListByGroupResponseBody,
    KVTable,
    TopicList,
)
from protocol.bodies.message_queue import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    UnlockBatchRequestBody,
)
from protocol.bodies.offset_wrappers import (
    ConsumerOffsetSerializeWrapper,
    DelayOffsetSerializeWrapper,
)
from protocol.bodies.route import (
    MASTER_ID,
    BrokerData,
    ClusterInfo,
    QueueData,
    TopicRouteData,
)
from protocol.bodies.subscription_group import (
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from protocol.bodies.topic_config import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
    data_version_of,
)

__all__ = [
    "BODY_CLASSES",
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "MASTER_ID",
    "SUB_ALL",
    "BodyError",
    "BrokerData",
    "ClusterInfo",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "ConsumerOffsetSerializeWrapper",
    "DataVersion",
    "DelayOffsetSerializeWrapper",
    "GetConsumerListByGroupResponseBody",
    "HeartbeatData",
    "JsonBody",
    "JsonObj",
    "KVTable",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "MessageQueue",
    "ProducerData",
    "QueueData",
    "RegisterBrokerBody",
    "SubscriptionData",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicFilterType",
    "TopicList",
    "TopicRouteData",
    "UnlockBatchRequestBody",
    "data_version_of",
    "drop_none",
    "dumps_compact",
    "dumps_object_map",
    "dumps_pretty",
    "int_keyed",
    "loads_lenient",
    "loads_object_map",
    "to_bool",
    "to_enum",
    "to_int",
    "to_str",
]


BODY_CLASSES: Final[tuple[type[JsonBody], ...]] = (
    TopicRouteData,
    QueueData,
    BrokerData,
    ClusterInfo,
    HeartbeatData,
    ConsumerData,
    ProducerData,
    SubscriptionData,
    TopicConfig,
    DataVersion,
    TopicConfigSerializeWrapper,
    RegisterBrokerBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
    GetConsumerListByGroupResponseBody,
    TopicList,
    KVTable,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    MessageQueue,
    ConsumerOffsetSerializeWrapper,
    DelayOffsetSerializeWrapper,
)
