"""MQAdminImpl: client/impl/MQAdminImpl.java of RocketMQ 4.9.x (maxOffset, minOffset,
searchOffset, fetchSubscribeMessageQueues) with the broker half of RemoteBrokerOffsetStore
(fetchConsumeOffsetFromBroker, updateConsumeOffsetToBroker), called from the consumer's own
threads in the user's process through the instance's MQClientAPI.

The address of a queue's broker comes from the instance's route table; a route not there yet
is fetched once (findBrokerAddressInSubscribe, then updateTopicRouteInfoFromNameServer).
"""

from __future__ import annotations

import logging
from typing import Final

from actors.client.consumer.offset_store import OffsetNotFoundError
from actors.client.errors import ClientErrorCode, MQClientError
from actors.client.mq_client_manager import InstanceHandle
from protocol.bodies import MessageQueue
from protocol.codes import MASTER_ID

log = logging.getLogger(__name__)

TIMEOUT_MS: Final = 3000


class MQAdminImpl:
    """Offset queries and commits of one consumer group (an OffsetBroker and OffsetAdmin)."""

    def __init__(self, handle: InstanceHandle, group: str) -> None:
        self.handle = handle
        self.group = group

    def master(self, mq: MessageQueue) -> str:
        """The address of mq's master (any address of its broker when there is no master)."""
        table = self.handle.table
        found = table.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if found is None:
            try:
                self.handle.topic_route(mq.topic)  # the route may still be on its way here
            except MQClientError as exc:
                log.info("consumer %s: route of %s: %s", self.group, mq.topic, exc)
            found = table.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if found is None:
            found = table.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, False)
        if found is None:
            raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION,
                                f"The broker[{mq.broker_name}] not exist")
        return str(found.broker_addr)

    def query_offset(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET; OffsetNotFoundError when the broker has none."""
        off = self.handle.api.query_consumer_offset(self.master(mq), self.group, mq.topic,
                                                    mq.queue_id, TIMEOUT_MS)  # fmt: skip
        if off is None or off < 0:
            raise OffsetNotFoundError(str(mq))
        return off

    def commit_offset(self, mq: MessageQueue, offset: int, *, oneway: bool) -> None:
        """UPDATE_CONSUMER_OFFSET (oneway: the 5 s persist; else answered: close, revoke)."""
        api, addr = self.handle.api, self.master(mq)
        if oneway:
            api.update_consumer_offset_oneway(addr, self.group, mq.topic, mq.queue_id, offset)
        else:
            api.update_consumer_offset(addr, self.group, mq.topic, mq.queue_id, offset,
                                       TIMEOUT_MS)  # fmt: skip

    def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET: the queue's next offset."""
        return int(self.handle.api.get_max_offset(self.master(mq), mq.topic, mq.queue_id,
                                                  TIMEOUT_MS) or 0)  # fmt: skip

    def min_offset(self, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET: the queue's first offset still stored."""
        return int(self.handle.api.get_min_offset(self.master(mq), mq.topic, mq.queue_id,
                                                  TIMEOUT_MS) or 0)  # fmt: skip

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after timestamp_ms."""
        return int(self.handle.api.search_offset(self.master(mq), mq.topic, mq.queue_id,
                                                 timestamp_ms, TIMEOUT_MS) or 0)  # fmt: skip

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues (fetched from the name server when not known)."""
        queues = self.handle.table.subscribe_queues(topic)
        if not queues:
            self.handle.topic_route(topic)
            queues = self.handle.table.subscribe_queues(topic)
        if not queues:
            raise MQClientError(ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
                                f"Can not find Message Queue for this topic, {topic}")
        return sorted(queues)
