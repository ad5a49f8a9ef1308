"""Every JSON body class, for the tests that round-trip them all.

Mirrors nothing in RocketMQ: the list of the classes of protocol.bodies that are JSON bodies.
"""

from __future__ import annotations

from typing import Final

from protocol.bodies.heartbeat import (
    ConsumerData,
    HeartbeatData,
    ProducerData,
    SubscriptionData,
)
from protocol.bodies.json_body import (
    JsonBody,
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
)

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
