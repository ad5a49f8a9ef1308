"""The Python client: producers and consumers for RocketMQ 4.x clusters (actormq or Apache).

Mirrors the public API of RocketMQ 4.9.x's client module (DefaultMQProducer,
TransactionMQProducer, DefaultMQPushConsumer, DefaultLitePullConsumer) in Python terms:
context managers, futures, asyncio twins, frozen records (docs/CLIENT.md has the design).

    from actors.client import Producer, Message
    with Producer("pg", namesrv="127.0.0.1:9876") as p:
        r = p.send(Message("Orders", b"hello", tags="A", keys="order-1"))
"""

# ruff: noqa: F401  (the names are imported for the type checker, and re-exported)
from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from actors.client.async_producer import (
        AsyncProducer,
    )
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
    from actors.client.producer import (
        Producer,
    )
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
    from actors.client.transaction_producer import (
        TransactionListener,
        TransactionProducer,
    )
    from protocol.bodies.heartbeat import (
        ConsumeFromWhere,
        MessageModel,
    )

__getattr__, __all__ = lazy_exports(__name__, {
    "actors.client.async_producer": (
        "AsyncProducer",
    ),
    "actors.client.consumer.allocate": (
        "AllocateMachineRoomNearby",
        "AllocateMessageQueueAveragely",
        "AllocateMessageQueueAveragelyByCircle",
        "AllocateMessageQueueByConfig",
        "AllocateMessageQueueByMachineRoom",
        "AllocateMessageQueueConsistentHash",
    ),
    "actors.client.consumer.lite_pull_consumer": (
        "AsyncLitePullConsumer",
        "LitePullConsumer",
    ),
    "actors.client.consumer.push_consumer": (
        "AsyncPushConsumer",
        "PushConsumer",
    ),
    "actors.client.consumer.consume_message_service": (
        "ConsumeContext",
        "ConsumeResult",
    ),
    "protocol.bodies.heartbeat": (
        "ConsumeFromWhere",
        "MessageModel",
    ),
    "actors.client.errors": (
        "ClientClosedError",
        "ClientErrorCode",
        "InflightLimitError",
        "MessageValidationError",
        "MQBrokerError",
        "MQClientError",
        "RemotingConnectError",
        "RemotingError",
        "RemotingTimeoutError",
    ),
    "actors.client.producer": (
        "Producer",
    ),
    "actors.client.records": (
        "LocalTransactionState",
        "Message",
        "MessageExt",
        "MessageQueue",
        "PullResult",
        "PullStatus",
        "SendResult",
        "SendStatus",
        "TransactionSendResult",
    ),
    "actors.client.transaction_producer": (
        "TransactionListener",
        "TransactionProducer",
    ),
})
