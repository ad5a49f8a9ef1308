"""Thespian control messages between the client actors (never one per message sent or pulled).

Mirrors the calls between MQClientInstance and its consumers in RocketMQ 4.9.x
(registerConsumer, updateTopicRouteInfoFromNameServer -> updateTopicSubscribeInfo,
persistAllConsumerOffset, ClientRemotingProcessor's hand-offs). Class names are unique across
the project (Thespian dispatch matches bare class names). Bodies travel as JSON bytes and
RemotingCommands as encoded frames, so every message pickles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors.client.client_config import ClientConfig


@dataclass(frozen=True)
class StartClientInstance:
    """Runtime -> MQClientInstanceActor: serve this client id; connect to the channel."""

    config: ClientConfig
    channel_path: str  # the user's process listener (Unix socket)
    user_pgid: int = 0  # the user's process group: never the one an orphaned system kills


@dataclass(frozen=True)
class ClientInstanceStarted:
    """MQClientInstanceActor -> runtime: up; its process ids (for a bounded shutdown)."""

    client_id: str
    pid: int
    pgid: int


@dataclass(frozen=True)
class ClientInstanceStartFailed:
    """MQClientInstanceActor -> runtime: could not start."""

    reason: str


@dataclass(frozen=True)
class RegisterConsumer:
    """Consumer actor -> instance: heartbeat this group; send me its routes and ticks."""

    group: str
    consumer_data: bytes  # protocol.bodies.ConsumerData JSON (its retry topic included)
    owner: Any  # the consumer actor's address: routes, persist ticks, relayed requests


@dataclass(frozen=True)
class ConsumerRegistered:
    """Instance -> consumer actor: the registration's outcome."""

    group: str
    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class UpdateConsumerData:
    """Consumer actor -> instance: subscriptions changed; heartbeat at once."""

    group: str
    consumer_data: bytes


@dataclass(frozen=True)
class UnregisterConsumer:
    """Consumer actor -> instance: drop the group, UNREGISTER_CLIENT to every broker."""

    group: str


@dataclass(frozen=True)
class ConsumerUnregistered:
    """Instance -> consumer actor: every broker was told (or failed to answer)."""

    group: str


@dataclass(frozen=True)
class RefreshTopicRoute:
    """Consumer actor -> instance: fetch this topic's route now."""

    topic: str


@dataclass(frozen=True)
class TopicRouteUpdated:
    """Instance -> consumer actor: a subscribed topic's route (None: the topic is gone)."""

    topic: str
    route_json: bytes | None  # protocol.bodies.TopicRouteData JSON


@dataclass(frozen=True)
class PersistConsumerOffset:
    """Instance -> consumer actor, every persistConsumerOffsetInterval (5 s)."""

    group: str


@dataclass(frozen=True)
class RelayedBrokerRequest:
    """Instance -> consumer actor: a request a broker sent for the group (decode with
    RemotingCommand.decode(frame[4:])); answer with RelayedBrokerAnswer unless oneway."""

    request_id: int
    broker_addr: str
    frame: bytes


@dataclass(frozen=True)
class RelayedBrokerAnswer:
    """Consumer actor -> instance: the encoded response to a RelayedBrokerRequest."""

    request_id: int
    frame: bytes | None
