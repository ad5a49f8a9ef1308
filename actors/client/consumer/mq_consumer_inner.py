"""MQConsumerInner: a consumer as the broker's requests to it see it.

Mirrors client/impl/consumer/MQConsumerInner.java, RocketMQ 4.9.x: ClientRemotingProcessor's
consumer side (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, GET_CONSUMER_STATUS_FROM_
CLIENT, RESET_CONSUMER_CLIENT_OFFSET: actors.client.consumer.consumer_requests) works through
this declaration; ConsumerImplBase (actors.client.consumer.consumer_core) has it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from actors.client.consumer.consumer_config import ConsumerConfig
from actors.client.consumer.consumer_services import ConsumerServices
from actors.client.consumer.consumer_stats import ConsumerStats
from actors.client.consumer.offset_store import OffsetStore
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.mq_client_manager import InstanceHandle
from actors.client.records import MessageExt
from protocol.bodies import ConsumeType, MessageModel, MessageQueue, SubscriptionData


class ConsumerState(Protocol):
    """What a consumer core's pieces read of it (read only: its kinds narrow some of them,
    cfg): the request handlers (MQConsumerInner) and the pulling (pull_callback.PullHost)."""

    @property
    def cfg(self) -> ConsumerConfig: ...

    @property
    def group(self) -> str: ...

    @property
    def table(self) -> dict[MessageQueue, ProcessQueue[MessageExt]]: ...

    @property
    def stats(self) -> ConsumerStats: ...

    @property
    def handle(self) -> InstanceHandle | None: ...

    @property
    def services(self) -> ConsumerServices | None: ...

    @property
    def offset_store(self) -> OffsetStore | None: ...


class MQConsumerInner(ConsumerState, Protocol):
    """What the consumer-side request handlers read and call."""

    CONSUME_TYPE: ConsumeType

    @property
    def model(self) -> MessageModel: ...

    @property
    def client_id(self) -> str: ...

    @property
    def start_ms(self) -> int: ...

    @property
    def lock(self) -> AbstractContextManager[Any]: ...

    def all_subscriptions(self) -> list[SubscriptionData]:
        """Every subscription, the retry topic's included."""
        ...

    def running_properties(self) -> dict[str, str]:
        """The properties GET_CONSUMER_RUNNING_INFO reports."""
        ...

    def consume_message_directly(self, msg: MessageExt, mq: MessageQueue
                                 ) -> tuple[str, str, bool, bool]:  # fmt: skip
        """CONSUME_MESSAGE_DIRECTLY: (CMResult name, remark, autoCommit, order)."""
        ...

    def commit_final(self, queues: list[tuple[MessageQueue, ProcessQueue[MessageExt]]]) -> None:
        """Commit the offsets of queues let go, after any older one their pulls carry."""
        ...

    def persist(self, mqs: list[MessageQueue], sync: bool) -> None:
        """Commit the offsets of mqs."""
        ...
