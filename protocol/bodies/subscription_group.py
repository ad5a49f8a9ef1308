"""Subscription group bodies: subscriptionGroup.json and GET_ALL_SUBSCRIPTIONGROUP_CONFIG.

Mirrors common/subscription/SubscriptionGroupConfig.java and
common/protocol/body/SubscriptionGroupWrapper.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from protocol.bodies.json_body import (
    JsonBody,
    JsonObj,
    dumps_pretty,
)
from protocol.bodies.topic_config import DataVersion, data_version_of


@dataclass(slots=True)
class SubscriptionGroupConfig(JsonBody):
    """One consumer group's broker-side settings."""

    group_name: str = ""
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_obj(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "SubscriptionGroupConfig") -> Self:
        o = JsonObj(obj, where)
        return cls(
            o.string("groupName"),
            o.boolean("consumeEnable", True),
            o.boolean("consumeFromMinEnable", True),
            o.boolean("consumeBroadcastEnable", True),
            o.integer("retryQueueNums", 1),
            o.integer("retryMaxTimes", 16),
            o.integer("brokerId", 0),
            o.integer("whichBrokerWhenConsumeSlowly", 1),
            o.boolean("notifyConsumerIdsChangedEnable", True),
        )


@dataclass(slots=True)
class SubscriptionGroupWrapper(JsonBody):
    """subscriptionGroup.json content and GET_ALL_SUBSCRIPTIONGROUP_CONFIG body."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_obj(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_obj(),
            "subscriptionGroupTable": {
                k: v.to_obj() for k, v in self.subscription_group_table.items()
            },
        }

    def to_json_pretty(self) -> bytes:
        """Tab-indented form for config/subscriptionGroup.json."""
        return dumps_pretty(self.to_obj())

    @classmethod
    def from_obj(cls, obj: object, where: str = "SubscriptionGroupWrapper") -> Self:
        o = JsonObj(obj, where)
        w = f"{where}.subscriptionGroupTable"
        table = {
            k: SubscriptionGroupConfig.from_obj(v, w)
            for k, v in o.mapping("subscriptionGroupTable").items()
            if v is not None
        }
        return cls(table, data_version_of(o))
