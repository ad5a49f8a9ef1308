"""The Python client: producers and consumers for RocketMQ 4.x clusters (actormq or Apache).

Mirrors the public API of RocketMQ 4.9.x's client module (DefaultMQProducer,
TransactionMQProducer, DefaultMQPushConsumer, DefaultLitePullConsumer) in Python terms:
context managers, futures, asyncio twins, frozen records (docs/CLIENT.md has the design).

    from actors.client import Producer, Message
    with Producer("pg", namesrv="127.0.0.1:9876") as p:
        r = p.send(Message("Orders", b"hello", tags="A", keys="order-1"))
"""

from actors.client.async_producer import AsyncProducer
from actors.client.consumer import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AsyncLitePullConsumer,
    AsyncPushConsumer,
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    LitePullConsumer,
    MessageModel,
    PushConsumer,
)
from actors.client.errors import (
    ClientClosedError,
    ClientErrorCode,
    InflightLimitError,
    MessageValidationError,
    MQBrokerError,
    MQClientError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
)
from actors.client.producer import Producer
from actors.client.records import (
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from actors.client.transaction_producer import TransactionListener, TransactionProducer

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AsyncLitePullConsumer",
    "AsyncProducer",
    "AsyncPushConsumer",
    "ClientClosedError",
    "ClientErrorCode",
    "ConsumeContext",
    "ConsumeFromWhere",
    "ConsumeResult",
    "InflightLimitError",
    "LitePullConsumer",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageValidationError",
    "Producer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "RemotingConnectError",
    "RemotingError",
    "RemotingTimeoutError",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
]
