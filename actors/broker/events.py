"""Shared-state change events replicated between a broker's processor actors.

Mirrors the state RocketMQ's BrokerController shares between processors in one JVM
(TopicConfigManager, SubscriptionGroupManager, ConsumerManager). Here each processor actor holds
replicas; a core emits an event, the runtime sends the batch to the BrokerController actor, which
applies and persists it and forwards it to the actors named in the event's AUDIENCE (except the
origin). Events are small, frozen and picklable. Consumer offsets are not events: they are
written at the rate of pulls, so ConsumerOffsetManager's table is shared memory instead
(actors/broker/offsets.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from actors.broker.consumer_manager import ConsumerGroupInfo
from actors.broker.subscription_group import SubscriptionGroupConfig
from actors.broker.topic_config import TopicConfig

ALL_GROUPS: frozenset[str] = frozenset(
    {"send", "pull", "consumer_manage", "client_manage", "query", "admin"}
)
# the service actors (actors.broker.processors): they follow the few events they need
SERVICE_GROUPS: frozenset[str] = frozenset({"hold", "transfer", "schedule", "txcheck"})


@dataclass(frozen=True, slots=True)
class TopicConfigChanged:
    """A topic was created or updated; register=True asks for a name-server registration."""

    AUDIENCE: ClassVar[frozenset[str]] = ALL_GROUPS
    config: TopicConfig
    register: bool = True
    # != 0: the origin core holds its reply under this token until the controller has
    # re-registered with every name server (UPDATE_AND_CREATE_TOPIC, spec §3.4)
    barrier: int = 0


@dataclass(frozen=True, slots=True)
class TopicsDeleted:
    """Topics were deleted (DELETE_TOPIC_IN_BROKER, by the store writer, which has already
    dropped their consume queues when this is sent)."""

    AUDIENCE: ClassVar[frozenset[str]] = ALL_GROUPS
    topics: tuple[str, ...]
    # != 0: the origin holds its reply under this token until the controller has registered
    # without these topics with every name server (see actors.broker.held_replies)
    barrier: int = 0


@dataclass(frozen=True, slots=True)
class SubscriptionGroupChanged:
    """A subscription group was created (auto or admin) or updated."""

    AUDIENCE: ClassVar[frozenset[str]] = ALL_GROUPS
    config: SubscriptionGroupConfig


@dataclass(frozen=True, slots=True)
class SubscriptionGroupDeleted:
    """DELETE_SUBSCRIPTIONGROUP; remove_offset also drops the group's offsets."""

    AUDIENCE: ClassVar[frozenset[str]] = ALL_GROUPS
    group: str
    remove_offset: bool = False


@dataclass(frozen=True, slots=True)
class ConsumerGroupChanged:
    """A consumer group's channels or subscriptions changed (from heartbeats)."""

    AUDIENCE: ClassVar[frozenset[str]] = frozenset({"pull", "consumer_manage", "admin", "send"})
    info: ConsumerGroupInfo


@dataclass(frozen=True, slots=True)
class ConsumerGroupRemoved:
    """A consumer group lost its last channel."""

    AUDIENCE: ClassVar[frozenset[str]] = frozenset({"pull", "consumer_manage", "admin", "send"})
    group: str


@dataclass(frozen=True, slots=True)
class OffsetMoved:
    """A master answered a pull PULL_OFFSET_MOVED (21); the single writer stores the event."""

    # The pull actor's store is read-only, so the send actor writes the OFFSET_MOVED_EVENT
    # message (PullMessageProcessor.generateOffsetMovedEvent).

    AUDIENCE: ClassVar[frozenset[str]] = frozenset({"send"})
    group: str
    topic: str
    queue_id: int
    broker_name: str
    offset_request: int
    offset_new: int


@dataclass(frozen=True, slots=True)
class ProducerGroupChanged:
    """A producer group's live connections (heartbeats): transaction check-backs and reply
    messages (SEND_REPLY_MESSAGE) reach producers through them."""

    # ProducerManager lives in client_manage; the transaction check (txcheck) sends its
    # CHECK_TRANSACTION_STATE and the send actor its reply pushes through these channels.

    AUDIENCE: ClassVar[frozenset[str]] = frozenset({"send", "txcheck"})
    group: str
    conn_ids: tuple[int, ...]
    # (client id, conn id) of each channel: a reply message's push finds its requester by the
    # client id (ProducerManager.findChannel)
    clients: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class HaMasterChanged:
    """A slave learned its master at registration (RegisterBrokerResult's haServerAddr and
    masterAddr): the slave's store writer replicates from the HA address."""

    AUDIENCE: ClassVar[frozenset[str]] = frozenset({"send"})
    ha_addr: str
    master_addr: str


@dataclass(frozen=True, slots=True)
class BrokerConfigChanged:
    """UPDATE_BROKER_CONFIG: (property name, text value) pairs for the broker or store config."""

    AUDIENCE: ClassVar[frozenset[str]] = ALL_GROUPS | SERVICE_GROUPS
    updates: tuple[tuple[str, str], ...]
    at_ms: int = 0  # when it was made: the config data version's timestamp
    # != 0 (a brokerPermission change): the origin holds its reply under this token until the
    # controller has re-registered (registerBrokerAll in updateBrokerConfig)
    barrier: int = 0


@dataclass(frozen=True, slots=True)
class TableVersions:
    """The controller's topic and subscription-group data versions, (counter, timestamp) each,
    after a change (the admin group answers GET_ALL_TOPIC_CONFIG / GET_ALL_SUBSCRIPTIONGROUP_CONFIG
    with them, as TopicConfigManager / SubscriptionGroupManager's dataVersion)."""

    AUDIENCE: ClassVar[frozenset[str]] = frozenset({"admin"})
    topics: tuple[int, int]
    groups: tuple[int, int]


BrokerEvent = (
    TopicConfigChanged
    | TopicsDeleted
    | SubscriptionGroupChanged
    | SubscriptionGroupDeleted
    | ConsumerGroupChanged
    | ConsumerGroupRemoved
    | OffsetMoved
    | ProducerGroupChanged
    | HaMasterChanged
    | BrokerConfigChanged
    | TableVersions
)
