"""The consumer side of the client: DefaultMQPushConsumer / DefaultLitePullConsumer and their parts.

Mirrors client/impl/consumer and client/consumer of RocketMQ 4.9.x: allocation strategies,
ProcessQueue, RebalanceImpl, PullAPIWrapper, PullMessageService, the concurrent and orderly
consume services and the offset stores, each a pure core in its own module.
"""

# ruff: noqa: F401  (the names are imported for the type checker, and re-exported)
from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from actors.client.consumer.allocate import (
        AllocateMachineRoomNearby,
        AllocateMessageQueueAveragely,
        AllocateMessageQueueAveragelyByCircle,
        AllocateMessageQueueByConfig,
        AllocateMessageQueueByMachineRoom,
        AllocateMessageQueueConsistentHash,
    )
    from actors.client.consumer.consume_message_service import (
        ConsumeContext,
        ConsumeResult,
    )
    from actors.client.consumer.lite_pull_consumer import (
        AsyncLitePullConsumer,
        LitePullConsumer,
    )
    from actors.client.consumer.push_consumer import (
        AsyncPushConsumer,
        PushConsumer,
    )
    from protocol.bodies.heartbeat import (
        ConsumeFromWhere,
        MessageModel,
    )

__getattr__, __all__ = lazy_exports(__name__, {
    "actors.client.consumer.allocate": (
        "AllocateMachineRoomNearby",
        "AllocateMessageQueueAveragely",
        "AllocateMessageQueueAveragelyByCircle",
        "AllocateMessageQueueByConfig",
        "AllocateMessageQueueByMachineRoom",
        "AllocateMessageQueueConsistentHash",
    ),
    "actors.client.consumer.consume_message_service": (
        "ConsumeContext",
        "ConsumeResult",
    ),
    "actors.client.consumer.lite_pull_consumer": (
        "AsyncLitePullConsumer",
        "LitePullConsumer",
    ),
    "actors.client.consumer.push_consumer": (
        "AsyncPushConsumer",
        "PushConsumer",
    ),
    "protocol.bodies.heartbeat": (
        "ConsumeFromWhere",
        "MessageModel",
    ),
})
