"""The consumer side of the client: DefaultMQPushConsumer / DefaultLitePullConsumer and their parts.

Mirrors client/impl/consumer and client/consumer of RocketMQ 4.9.x: allocation strategies,
ProcessQueue, RebalanceImpl, PullAPIWrapper, PullMessageService, the concurrent and orderly
consume services and the offset stores, each a pure core in its own module.
"""

from actors.client.consumer.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
)
from actors.client.consumer.consume_message_service import ConsumeContext, ConsumeResult
from actors.client.consumer.lite_pull_consumer import AsyncLitePullConsumer, LitePullConsumer
from actors.client.consumer.push_consumer import AsyncPushConsumer, PushConsumer
from protocol.bodies import ConsumeFromWhere, MessageModel

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AsyncLitePullConsumer",
    "AsyncPushConsumer",
    "ConsumeContext",
    "ConsumeFromWhere",
    "ConsumeResult",
    "LitePullConsumer",
    "MessageModel",
    "PushConsumer",
]
