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

CHAIN_STOP_WAIT_S = 2.0  # the pull actor confirms a chain's last pull was written


class MQConsumerInner(Protocol):
    """What the consumer-side request handlers read and call."""

    CONSUME_TYPE: ConsumeType

    @property
    def cfg(self) -> ConsumerConfig: ...

    @property
    def group(self) -> str: ...

    @property
    def model(self) -> MessageModel: ...

    @property
    def client_id(self) -> str: ...

    @property
    def start_ms(self) -> int: ...

    @property
    def lock(self) -> AbstractContextManager[Any]: ...

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

    def stop_chains(self, pqs: list[ProcessQueue[MessageExt]], wait_s: float = 0.0) -> None:
        """End the pull chains of pqs (wait_s: until their last pull was written)."""
        ...

    def wait_quiet(self, last_sent: float) -> None:
        """Until a pull sent at last_sent has had time to land."""
        ...

    def persist(self, mqs: list[MessageQueue], sync: bool) -> None:
        """Commit the offsets of mqs."""
        ...
