"""MessageQueue and the queue lock bodies.

Mirrors common/message/MessageQueue.java and common/protocol/body/LockBatchRequestBody.java,
UnlockBatchRequestBody.java and LockBatchResponseBody.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from protocol.bodies.json_body import (
    JsonBody,
    JsonObj,
)


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue(JsonBody):
    """A (topic, brokerName, queueId) triple; hashable and ordered like Java's compareTo."""

    topic: str = ""
    broker_name: str = ""
    queue_id: int = 0

    def to_obj(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_obj(cls, obj: object, where: str = "MessageQueue") -> Self:
        o = JsonObj(obj, where)
        return cls(o.string("topic"), o.string("brokerName"), o.integer("queueId"))


@dataclass(slots=True)
class LockBatchRequestBody(JsonBody):
    """LOCK_BATCH_MQ request body."""

    consumer_group: str = ""
    client_id: str = ""
    mq_set: list[MessageQueue] = field(default_factory=list)
    only_this_broker: bool = False

    def to_obj(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": [q.to_obj() for q in self.mq_set],
        }
        if self.only_this_broker:
            d["onlyThisBroker"] = True
        return d

    @classmethod
    def from_obj(cls, obj: object, where: str = "LockBatchRequestBody") -> Self:
        o = JsonObj(obj, where)
        return cls(
            o.string("consumerGroup"),
            o.string("clientId"),
            o.objs("mqSet", MessageQueue.from_obj),
            o.boolean("onlyThisBroker"),
        )


@dataclass(slots=True)
class UnlockBatchRequestBody(JsonBody):
    """UNLOCK_BATCH_MQ request body."""

    consumer_group: str = ""
    client_id: str = ""
    mq_set: list[MessageQueue] = field(default_factory=list)

    def to_obj(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": [q.to_obj() for q in self.mq_set],
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "UnlockBatchRequestBody") -> Self:
        o = JsonObj(obj, where)
        return cls(
            o.string("consumerGroup"), o.string("clientId"), o.objs("mqSet", MessageQueue.from_obj)
        )


@dataclass(slots=True)
class LockBatchResponseBody(JsonBody):
    """LOCK_BATCH_MQ response body: the queues now locked by the client."""

    lock_ok_mq_set: list[MessageQueue] = field(default_factory=list)

    def to_obj(self) -> dict[str, Any]:
        return {"lockOKMQSet": [q.to_obj() for q in self.lock_ok_mq_set]}

    @classmethod
    def from_obj(cls, obj: object, where: str = "LockBatchResponseBody") -> Self:
        return cls(JsonObj(obj, where).objs("lockOKMQSet", MessageQueue.from_obj))
