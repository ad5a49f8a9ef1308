"""JSON request/response bodies and config-file shapes.

Mirrors common/protocol/body/*.java, common/protocol/route/*.java, common/protocol/heartbeat/
*.java, common/TopicConfig.java, common/DataVersion.java and common/subscription/
SubscriptionGroupConfig.java, RocketMQ 4.9.x: one module per family (route, heartbeat,
topic_config, message_queue, lists, subscription_group, offset_wrappers) on the lenient
reader / compact writer of json_body; this package re-exports them all, each imported when
first used (protocol.lazy_exports).
"""

# ruff: noqa: F401  (the names are imported for the type checker, and re-exported)
from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from protocol.bodies.body_classes import (
        BODY_CLASSES,
    )
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

__getattr__, __all__ = lazy_exports(__name__, {
    "protocol.bodies.heartbeat": (
        "EXPRESSION_TYPE_SQL92",
        "EXPRESSION_TYPE_TAG",
        "SUB_ALL",
        "ConsumeFromWhere",
        "ConsumerData",
        "ConsumeType",
        "HeartbeatData",
        "MessageModel",
        "ProducerData",
        "SubscriptionData",
    ),
    "protocol.bodies.json_body": (
        "BodyError",
        "JsonBody",
        "JsonObj",
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
    ),
    "protocol.bodies.lists": (
        "GetConsumerListByGroupResponseBody",
        "KVTable",
        "TopicList",
    ),
    "protocol.bodies.message_queue": (
        "LockBatchRequestBody",
        "LockBatchResponseBody",
        "MessageQueue",
        "UnlockBatchRequestBody",
    ),
    "protocol.bodies.offset_wrappers": (
        "ConsumerOffsetSerializeWrapper",
        "DelayOffsetSerializeWrapper",
    ),
    "protocol.bodies.route": (
        "MASTER_ID",
        "BrokerData",
        "ClusterInfo",
        "QueueData",
        "TopicRouteData",
    ),
    "protocol.bodies.subscription_group": (
        "SubscriptionGroupConfig",
        "SubscriptionGroupWrapper",
    ),
    "protocol.bodies.topic_config": (
        "DataVersion",
        "RegisterBrokerBody",
        "TopicConfig",
        "TopicConfigSerializeWrapper",
        "TopicFilterType",
        "data_version_of",
    ),
    "protocol.bodies.body_classes": (
        "BODY_CLASSES",
    ),
})
