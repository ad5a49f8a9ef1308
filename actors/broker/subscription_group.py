"""Subscription group configs (subscriptionGroup.json).

Mirrors broker/subscription/SubscriptionGroupManager.java and
common/subscription/SubscriptionGroupConfig.java, RocketMQ 4.9.x. The config itself is
protocol.bodies.SubscriptionGroupConfig (the same JSON as the admin bodies).
"""

from __future__ import annotations

import logging
from typing import Any

from actors.broker.config import BrokerConfig
from protocol.bodies import SubscriptionGroupConfig
from protocol.codes import SYS_CONSUMER_GROUP_PREFIX

__all__ = ["STARTUP_GROUPS", "SubscriptionGroupConfig", "SubscriptionGroupManager",
           "group_config_from_obj"]

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


def group_config_from_obj(obj: Any, name: str | None = None) -> SubscriptionGroupConfig:
    """Lenient read of a SubscriptionGroupConfig member map; `name` when groupName is absent."""
    cfg = SubscriptionGroupConfig.from_obj(obj)
    if not cfg.group_name:
        if not name:
            raise ValueError("SubscriptionGroupConfig without groupName")
        cfg.group_name = name
    return cfg


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
        # MixAll.isSysConsumerGroup: system groups are created whatever the setting
        if not self.broker_config.autoCreateSubscriptionGroup and not group.startswith(
            SYS_CONSUMER_GROUP_PREFIX
        ):
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
