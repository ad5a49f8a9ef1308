"""Thespian control messages of the consumer services (never one per message or per pull).

Mirrors the calls a Java consumer makes into its MQClientInstance's services
(registerConsumer, RebalanceService.wakeup, PullMessageService.start, unregisterConsumer),
RocketMQ 4.9.x. Class names are unique across the project (Thespian dispatch matches bare
class names); everything pickles (bodies as JSON bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors.client.client_config import ClientConfig


@dataclass(frozen=True)
class StartRebalanceService:
    """User's process -> RebalanceServiceActor: serve this client instance's consumer groups."""

    client_id: str
    config: ClientConfig
    instance: Any  # the MQClientInstanceActor's address
    channel_path: str
    interval_ms: float = 20_000.0  # rocketmq.client.rebalance.waitInterval
    lock_interval_ms: float = 20_000.0  # rocketmq.client.rebalance.lockInterval
    retry_ms: float = 1_000.0  # a refused lock / a queue being released: try again this soon


@dataclass(frozen=True)
class RebalanceServiceStarted:
    """RebalanceServiceActor -> user's process: up (its pids, for a bounded shutdown)."""

    pid: int
    pgid: int


@dataclass(frozen=True)
class StartPullService:
    """User's process -> PullMessageServiceActor: execute this instance's pull requests."""

    client_id: str
    config: ClientConfig
    channel_path: str


@dataclass(frozen=True)
class PullServiceStarted:
    """PullMessageServiceActor -> user's process: up."""

    pid: int
    pgid: int


@dataclass(frozen=True)
class ServiceStartFailed:
    """A consumer service could not start."""

    reason: str


@dataclass(frozen=True)
class AddConsumer:
    """User's process -> RebalanceServiceActor: rebalance this group for this client."""

    group: str
    consumer_data: bytes  # protocol.bodies.ConsumerData JSON (retry topic included)
    strategy: Any  # an AllocateMessageQueueStrategy (importable, picklable)
    orderly: bool
    rebalance: bool = True  # False: the user assigns the queues (lite pull assign())


@dataclass(frozen=True)
class ConsumerAdded:
    """RebalanceServiceActor -> user's process: the instance registered the group (or not)."""

    group: str
    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class UpdateSubscriptions:
    """User's process -> RebalanceServiceActor: the group's subscriptions changed."""

    group: str
    consumer_data: bytes


@dataclass(frozen=True)
class RemoveConsumer:
    """User's process -> RebalanceServiceActor: the consumer closed (its offsets are persisted):
    give back its orderly locks, unregister the group from every broker."""

    group: str


@dataclass(frozen=True)
class ConsumerRemoved:
    """RebalanceServiceActor -> user's process: every broker was told."""

    group: str
