"""Heartbeat bodies: what a client tells the broker about its producers and consumers.

Mirrors common/protocol/heartbeat/HeartbeatData.java, ConsumerData.java, ProducerData.java,
SubscriptionData.java, ConsumeType.java and MessageModel.java, and
common/consumer/ConsumeFromWhere.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Final, Self

from protocol.bodies.json_body import (
    JsonBody,
    JsonObj,
)
from protocol.record import java_string_hash


class ConsumeType(enum.IntEnum):
    """Pull (actively) or push (passively)."""

    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1


class MessageModel(enum.IntEnum):
    """Broadcasting or clustering consumption."""

    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.IntEnum):
    """Where a new consumer group starts."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


EXPRESSION_TYPE_TAG: Final = "TAG"
EXPRESSION_TYPE_SQL92: Final = "SQL92"
SUB_ALL: Final = "*"


@dataclass(slots=True)
class SubscriptionData(JsonBody):
    """One topic subscription of a consumer group."""

    topic: str = ""
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False

    @classmethod
    def build(cls, topic: str, sub_string: str | None, sub_version: int = 0) -> Self:
        """Parse a tag expression ("TagA || TagB", "*") the way FilterAPI does."""
        sub = (sub_string or "").strip()
        if not sub or sub == SUB_ALL:
            return cls(topic, SUB_ALL, [], [], sub_version)
        tags = [t.strip() for t in sub.split("||")]
        tags = [t for t in tags if t]
        return cls(topic, sub, tags, [java_string_hash(t) for t in tags], sub_version)

    @property
    def is_all(self) -> bool:
        """True for the "*" subscription (or an empty one)."""
        return self.sub_string.strip() in ("", SUB_ALL)

    def to_obj(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "SubscriptionData") -> Self:
        o = JsonObj(obj, where)
        sub = o.string("subString", SUB_ALL)
        expr = o.string("expressionType", EXPRESSION_TYPE_TAG) or EXPRESSION_TYPE_TAG
        if o.has("tagsSet"):
            tags = o.str_list("tagsSet")
        elif expr == EXPRESSION_TYPE_TAG and sub.strip() not in ("", SUB_ALL):
            tags = [t.strip() for t in sub.split("||") if t.strip()]
        else:
            tags = []
        codes = o.int_list("codeSet")
        if not codes and tags:
            # Missing (or empty while tags exist): the broker's tag filter needs the hashes.
            codes = [java_string_hash(t) for t in tags]
        return cls(
            o.string("topic"),
            sub,
            tags,
            codes,
            o.integer("subVersion"),
            expr,
            o.boolean("classFilterMode"),
        )


@dataclass(slots=True)
class ConsumerData(JsonBody):
    """One consumer group in a heartbeat."""

    group_name: str = ""
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_obj(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where.name,
            "consumeType": self.consume_type.name,
            "groupName": self.group_name,
            "messageModel": self.message_model.name,
            "subscriptionDataSet": [s.to_obj() for s in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "ConsumerData") -> Self:
        o = JsonObj(obj, where)
        return cls(
            o.string("groupName"),
            o.choice("consumeType", ConsumeType, ConsumeType.CONSUME_PASSIVELY),
            o.choice("messageModel", MessageModel, MessageModel.CLUSTERING),
            o.choice(
                "consumeFromWhere", ConsumeFromWhere, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
            ),
            o.objs("subscriptionDataSet", SubscriptionData.from_obj),
            o.boolean("unitMode"),
        )


@dataclass(slots=True)
class ProducerData(JsonBody):
    """One producer group in a heartbeat."""

    group_name: str = ""

    def to_obj(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def from_obj(cls, obj: object, where: str = "ProducerData") -> Self:
        return cls(JsonObj(obj, where).string("groupName"))


@dataclass(slots=True)
class HeartbeatData(JsonBody):
    """HEART_BEAT request body."""

    client_id: str = ""
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)

    def to_obj(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_obj() for c in self.consumer_data_set],
            "producerDataSet": [p.to_obj() for p in self.producer_data_set],
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "HeartbeatData") -> Self:
        o = JsonObj(obj, where)
        return cls(
            o.string("clientID"),
            o.objs("producerDataSet", ProducerData.from_obj),
            o.objs("consumerDataSet", ConsumerData.from_obj),
        )
