"""Subscription group configs (subscriptionGroup.json).

Mirrors broker/subscription/SubscriptionGroupManager.java and
common/subscription/SubscriptionGroupConfig.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from actors.broker.config import BrokerConfig

log = logging.getLogger(__name__)

# Groups RocketMQ pre-creates at startup (SubscriptionGroupManager.init).
STARTUP_GROUPS = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",
)


def _b(v: Any, default: bool) -> bool:
    if v is None:
        return default
    if isinstance(v, str):
        return v.lower() in ("true", "1")
    return bool(v)


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """One consumer group's broker-side settings (spec §4.5)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json_obj(self) -> dict[str, Any]:
        """The fastjson member map."""
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
    def from_json_obj(cls, obj: dict[str, Any], name: str | None = None) -> SubscriptionGroupConfig:
        """Lenient read of a SubscriptionGroupConfig member map."""
        group = obj.get("groupName") or name
        if not group:
            raise ValueError("SubscriptionGroupConfig without groupName")
        return cls(
            group_name=str(group),
            consume_enable=_b(obj.get("consumeEnable"), True),
            consume_from_min_enable=_b(obj.get("consumeFromMinEnable"), True),
            consume_broadcast_enable=_b(obj.get("consumeBroadcastEnable"), True),
            retry_queue_nums=int(obj.get("retryQueueNums", 1)),
            retry_max_times=int(obj.get("retryMaxTimes", 16)),
            broker_id=int(obj.get("brokerId", 0)),
            which_broker_when_consume_slowly=int(obj.get("whichBrokerWhenConsumeSlowly", 1)),
            notify_consumer_ids_changed_enable=_b(obj.get("notifyConsumerIdsChangedEnable"), True),
        )


class SubscriptionGroupManager:
    """The group table of one actor (replica; the controller persists)."""

    def __init__(self, broker_config: BrokerConfig) -> None:
        self.broker_config = broker_config
        self.table: dict[str, SubscriptionGroupConfig] = {
            g: SubscriptionGroupConfig(g) for g in STARTUP_GROUPS
        }

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The config if present (no auto-create)."""
        return self.table.get(group)

    def find_or_create(self, group: str) -> tuple[SubscriptionGroupConfig | None, bool]:
        """findSubscriptionGroupConfig: (config or None, created now)."""
        cfg = self.table.get(group)
        if cfg is not None:
            return cfg, False
        if not self.broker_config.autoCreateSubscriptionGroup:
            return None, False
        cfg = SubscriptionGroupConfig(group)
        self.table[group] = cfg
        log.info("auto-created subscription group=%s", group)
        return cfg, True

    def put(self, cfg: SubscriptionGroupConfig) -> None:
        """Insert or replace."""
        self.table[cfg.group_name] = cfg

    def delete(self, group: str) -> bool:
        """Remove; True when it existed."""
        return self.table.pop(group, None) is not None
