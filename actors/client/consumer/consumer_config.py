"""Consumer settings and lifecycle: the fields DefaultMQPushConsumer and DefaultLitePullConsumer
share (client/consumer/*.java, RocketMQ 4.9.x, Java's defaults), ServiceState
(common/ServiceState.java, plus STOPPING for the drain) and the rebalance listener (Java's
MessageQueueListener, aiokafka's on_assigned / on_revoked)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

from actors.client.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueStrategy,
)
from actors.client.validators import check_group
from actors.runtime.tls import TlsConfig
from protocol.bodies import ConsumeFromWhere, MessageModel, MessageQueue


class ServiceState(enum.Enum):
    """The consumer's lifecycle (Java's ServiceState, plus STOPPING for the drain)."""

    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"


class RebalanceListener(Protocol):
    """on_assigned after queues were taken; on_revoked after they were drained and committed."""

    def on_assigned(self, queues: set[MessageQueue]) -> None: ...

    def on_revoked(self, queues: set[MessageQueue]) -> None: ...


@dataclass
class ConsumerConfig:
    """Settings both consumers have (Java defaults; the rebalance intervals are ours to
    shorten)."""

    group: str
    namesrv: str | list[str] | tuple[str, ...]
    instance_name: str | None = None
    model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp_ms: int | None = None  # CONSUME_FROM_TIMESTAMP; default: 30 min ago
    strategy: AllocateMessageQueueStrategy = field(default_factory=AllocateMessageQueueAveragely)
    pull_batch: int = 32  # pullBatchSize
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue_mib: int = 100
    pull_threshold_for_topic: int = -1
    pull_threshold_size_for_topic_mib: int = -1
    max_cached_messages: int = 20_000  # ours: every queue's cache together (-1: no budget)
    max_cached_mib: int = 512  # ours
    pull_time_delay_ms_when_exception: int = 1000
    broker_suspend_max_ms: int = 15_000
    consumer_timeout_ms_when_suspend: int = 30_000
    revoke_drain_timeout_ms: int = 10_000
    rebalance_interval_ms: float = 20_000.0
    lock_interval_ms: float = 20_000.0
    rebalance_retry_ms: float = 1_000.0
    offset_store_dir: str | None = None  # BROADCASTING: default ~/.rocketmq_offsets
    serialize_type: int | None = None  # header serialization of our requests (default JSON)
    # ACL: requests signed as AclClientRPCHook signs them when access_key is set
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    security_token: str | None = field(default=None, repr=False)
    # TLS to name servers and brokers (True, or a TlsConfig: client_config.tls_setting)
    use_tls: bool | TlsConfig = False
    # message trace (enableMsgTrace / customizedTraceTopic): SubBefore / SubAfter records
    enable_trace: bool = False
    trace_topic: str | None = None

    def check(self) -> None:
        """checkConfig (Java's ranges)."""
        check_group(self.group)
        if self.trace_topic is not None and not self.enable_trace:
            raise ValueError("trace_topic needs enable_trace=True")
        ranges = {"pull_threshold_for_queue": (1, 65535),
                  "pull_threshold_size_for_queue_mib": (1, 1024), "pull_batch": (1, 1024)}
        for name, (lo, hi) in ranges.items():
            v = getattr(self, name)
            if not lo <= v <= hi:
                raise ValueError(f"{name} {v} is out of range [{lo}, {hi}]")
        topic_max = self.pull_threshold_for_topic
        if topic_max != -1 and not 1 <= topic_max <= 6553500:
            raise ValueError("pull_threshold_for_topic out of range [1, 6553500]")
