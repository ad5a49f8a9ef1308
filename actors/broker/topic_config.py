"""Topic configs, topic validation and the broker's topic table.

Mirrors common/TopicConfig.java, common/topic/TopicValidator.java and
broker/topic/TopicConfigManager.java, RocketMQ 4.9.x. The table here is a replica held by one
processor actor; the BrokerController actor owns the authoritative copy and topics.json.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import Any, Final

from actors.broker.config import BrokerConfig
from protocol.codes import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    NOT_ALLOWED_SEND_TOPICS,
    OFFSET_MOVED_EVENT,
    REPLY_TOPIC_POSTFIX,
    RMQ_SYS_TRANS_HALF_TOPIC,
    SCHEDULE_QUEUE_NUMS,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    PermName,
)

log = logging.getLogger(__name__)

# Plain ints (IntFlag arithmetic is slow on the send path).
PERM_PRIORITY: Final = int(PermName.PERM_PRIORITY)
PERM_READ: Final = int(PermName.PERM_READ)
PERM_WRITE: Final = int(PermName.PERM_WRITE)
PERM_INHERIT: Final = int(PermName.PERM_INHERIT)
TRANS_HALF_TOPIC: Final = RMQ_SYS_TRANS_HALF_TOPIC
MAX_TOPIC_LENGTH: Final = 127

_TOPIC_CHARS = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def is_writeable(perm: int) -> bool:
    """PermName.isWriteable."""
    return perm & PERM_WRITE == PERM_WRITE


def is_readable(perm: int) -> bool:
    """PermName.isReadable."""
    return perm & PERM_READ == PERM_READ


def is_inherited(perm: int) -> bool:
    """PermName.isInherited."""
    return perm & PERM_INHERIT == PERM_INHERIT


def perm_to_string(perm: int) -> str:
    """PermName.perm2String: "RWX" with '-' for each missing bit (6 -> "RW-")."""
    return (
        ("R" if is_readable(perm) else "-")
        + ("W" if is_writeable(perm) else "-")
        + ("X" if is_inherited(perm) else "-")
    )


def validate_topic(topic: str | None) -> str | None:
    """TopicValidator.validateTopic: None when valid, else the error remark."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if not _TOPIC_CHARS.match(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > MAX_TOPIC_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def is_not_allowed_send_topic(topic: str) -> bool:
    """TopicValidator.isNotAllowedSendTopic."""
    return topic in NOT_ALLOWED_SEND_TOPICS


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic's config (common/TopicConfig.java)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def __str__(self) -> str:
        """TopicConfig.toString (it appears in remarks, e.g. an illegal queueId on send)."""
        return (
            f"TopicConfig [topicName={self.topic_name}, readQueueNums={self.read_queue_nums}, "
            f"writeQueueNums={self.write_queue_nums}, perm={perm_to_string(self.perm)}, "
            f"topicFilterType={self.topic_filter_type}, topicSysFlag={self.topic_sys_flag}, "
            f"order={'true' if self.order else 'false'}]"
        )

    def to_json_obj(self) -> dict[str, Any]:
        """The fastjson member map (alphabetical when dumped with sort_keys)."""
        return {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json_obj(cls, obj: dict[str, Any], name: str | None = None) -> TopicConfig:
        """Lenient read of a TopicConfig member map."""
        ftype = obj.get("topicFilterType", "SINGLE_TAG")
        if isinstance(ftype, int) or (isinstance(ftype, str) and ftype.isdigit()):
            ftype = "MULTI_TAG" if int(ftype) == 1 else "SINGLE_TAG"
        return cls(
            topic_name=str(obj.get("topicName") or name or ""),
            read_queue_nums=int(obj.get("readQueueNums", 16)),
            write_queue_nums=int(obj.get("writeQueueNums", 16)),
            perm=int(obj.get("perm", 6)),
            topic_filter_type=str(ftype),
            topic_sys_flag=int(obj.get("topicSysFlag", obj.get("topicSynFlag", 0))),
            order=_as_bool(obj.get("order", False)),
        )


def _as_bool(v: Any) -> bool:
    if isinstance(v, str):
        return v.lower() in ("true", "1")
    return bool(v)


def startup_topics(bc: BrokerConfig) -> list[TopicConfig]:
    """The topics TopicConfigManager creates at broker startup (spec §8.3)."""
    rw = PERM_READ | PERM_WRITE
    out: list[TopicConfig] = [
        TopicConfig(SELF_TEST_TOPIC, 1, 1, rw),
    ]
    if bc.autoCreateTopicEnable:
        n = bc.defaultTopicQueueNums
        out.append(TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, rw | PERM_INHERIT))
    out.append(TopicConfig(BENCHMARK_TOPIC, 1024, 1024, rw))
    cperm = PERM_INHERIT | (rw if bc.clusterTopicEnable else 0)
    out.append(TopicConfig(bc.brokerClusterName, 16, 16, cperm))
    bperm = PERM_INHERIT | (rw if bc.brokerTopicEnable else 0)
    out.append(TopicConfig(bc.brokerName, 1, 1, bperm))
    out.append(TopicConfig(OFFSET_MOVED_EVENT, 1, 1, rw))
    out.append(TopicConfig(SCHEDULE_TOPIC, SCHEDULE_QUEUE_NUMS, SCHEDULE_QUEUE_NUMS, rw))
    if bc.traceTopicEnable:
        out.append(TopicConfig(bc.msgTraceTopicName, 1, 1, rw))
    out.append(TopicConfig(f"{bc.brokerClusterName}_{REPLY_TOPIC_POSTFIX}", 1, 1, rw))
    return out


class TopicConfigManager:
    """The topic table of one actor; changes are returned so the caller can emit events."""

    def __init__(self, broker_config: BrokerConfig) -> None:
        self.broker_config = broker_config
        self.table: dict[str, TopicConfig] = {
            t.topic_name: t for t in startup_topics(broker_config)
        }

    def get(self, topic: str) -> TopicConfig | None:
        """selectTopicConfig."""
        return self.table.get(topic)

    def put(self, tc: TopicConfig) -> None:
        """Insert or replace (no event; the caller emits)."""
        self.table[tc.topic_name] = tc

    def delete(self, topic: str) -> bool:
        """Remove a topic; True when it existed."""
        return self.table.pop(topic, None) is not None

    def create_in_send_message_method(
        self, topic: str, default_topic: str, client_queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """Auto-create from the template topic (spec §9.1 step 3); None when not allowed."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        template = self.table.get(default_topic)
        if template is None:
            log.warning(
                "auto-create: template topic missing topic=%s default=%s", topic, default_topic
            )
            return None
        if (
            default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC
            and not self.broker_config.autoCreateTopicEnable
        ):
            template = replace(template, perm=PERM_READ | PERM_WRITE)
        if not is_inherited(template.perm):
            log.warning(
                "auto-create: template has no inherit perm default=%s perm=%d",
                default_topic,
                template.perm,
            )
            return None
        queue_nums = max(1, min(client_queue_nums, template.write_queue_nums))
        tc = TopicConfig(
            topic,
            read_queue_nums=queue_nums,
            write_queue_nums=queue_nums,
            perm=template.perm & ~PERM_INHERIT,
            topic_sys_flag=topic_sys_flag,
        )
        self.table[topic] = tc
        log.info("auto-created topic=%s queues=%d from=%s", topic, queue_nums, default_topic)
        return tc

    def create_in_send_back(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> tuple[TopicConfig, bool]:
        """createTopicInSendMessageBackMethod: (config, created)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing, False
        tc = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
        self.table[topic] = tc
        log.info("created topic=%s queues=%d", topic, queue_nums)
        return tc, True
