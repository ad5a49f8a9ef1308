"""What every processor core of one broker sees: config, store, outbox and state replicas.

Mirrors the shared BrokerController fields RocketMQ's processors reach through
`brokerController.getXxx()` (broker/BrokerController.java, RocketMQ 4.9.x). Here each
processor actor has its own BrokerContext; shared state changes travel as events
(actors.broker.events) through the BrokerController actor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors.broker.config import BrokerConfig
from actors.broker.consumer_manager import ConsumerGroupInfo
from actors.broker.events import (
    BrokerEvent,
    ConsumerGroupChanged,
    ConsumerGroupRemoved,
    OffsetCommitted,
    OffsetMoved,
    SubscriptionGroupChanged,
    SubscriptionGroupDeleted,
    TopicConfigChanged,
    TopicsDeleted,
)
from actors.broker.offsets import ConsumerOffsetManager
from actors.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from actors.broker.topic_config import TopicConfig, TopicConfigManager
from actors.core import Outbox

log = logging.getLogger(__name__)

# (topic, queue_id, max_offset_plus_one, tags_code, store_timestamp)
ArrivalNotice = tuple[str, int, int, int, int]


@dataclass(frozen=True, slots=True)
class BrokerSnapshot:
    """The controller's state sent to each processor actor at startup."""

    topics: tuple[TopicConfig, ...] = ()
    groups: tuple[SubscriptionGroupConfig, ...] = ()
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    consumer_groups: tuple[ConsumerGroupInfo, ...] = ()


class BrokerContext:
    """Per-actor broker state: replicas, store handle, outbox, pending events and arrivals."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_config: Any,
        *,
        group: str,
        outbox: Outbox | None,
        store: Any = None,
    ) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.group = group
        self.outbox = outbox
        self.store = store
        self.topics = TopicConfigManager(broker_config)
        self.groups = SubscriptionGroupManager(broker_config)
        self.offsets = ConsumerOffsetManager()
        self.consumer_groups: dict[str, ConsumerGroupInfo] = {}
        self._events: list[BrokerEvent] = []
        self._offset_events: dict[tuple[str, str, int], OffsetCommitted] = {}
        self._arrivals: list[ArrivalNotice] = []
        self._handlers: dict[type, Callable[[Any, int], None]] = {}
        # Set by a runtime that implements the registration barrier (controller.take_barriers
        # -> the origin core's release(token)); off, replies are never held.
        self.registration_barrier = False
        if store is not None and group == "send" and hasattr(store, "arrival_listener"):
            store.arrival_listener = self._on_arrival

    # --- events -------------------------------------------------------------------------

    def emit(self, event: BrokerEvent) -> None:
        """Apply a change locally and queue it for the controller (offsets coalesce)."""
        self._apply_local(event)
        if isinstance(event, OffsetCommitted):
            self._offset_events[(event.group, event.topic, event.queue_id)] = event
        else:
            self._events.append(event)

    def drain_events(self) -> list[BrokerEvent]:
        """Events emitted since the last drain, offsets coalesced per (group, topic, queue)."""
        if not self._events and not self._offset_events:
            return []
        out = self._events
        out.extend(self._offset_events.values())
        self._events = []
        self._offset_events = {}
        return out

    def apply(self, event: BrokerEvent, now_ms: int) -> None:
        """Apply an event forwarded by the controller from another actor."""
        self._apply_local(event)
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event, now_ms)

    def on_event(self, event_type: type, handler: Callable[[Any, int], None]) -> None:
        """Have `handler(event, now_ms)` run for each forwarded event of that type (a core's
        reaction to another actor's change, e.g. the send core storing OFFSET_MOVED_EVENT)."""
        self._handlers[event_type] = handler

    def _apply_local(self, event: BrokerEvent) -> None:
        if isinstance(event, OffsetCommitted):
            self.offsets.commit_offset(event.group, event.topic, event.queue_id, event.offset)
        elif isinstance(event, TopicConfigChanged):
            self.topics.put(event.config)
        elif isinstance(event, TopicsDeleted):
            for t in event.topics:
                self.topics.delete(t)
                self.offsets.remove_topic(t)
        elif isinstance(event, SubscriptionGroupChanged):
            self.groups.put(event.config)
        elif isinstance(event, SubscriptionGroupDeleted):
            self.groups.delete(event.group)
            if event.remove_offset:
                self.offsets.remove_group(event.group)
        elif isinstance(event, ConsumerGroupChanged):
            self.consumer_groups[event.info.group] = event.info
        elif isinstance(event, ConsumerGroupRemoved):
            self.consumer_groups.pop(event.group, None)
        elif isinstance(event, OffsetMoved):
            pass  # no replica: the send core stores it (on_event)
        else:
            log.warning("unknown broker event %r", event)

    def load_snapshot(self, snapshot: BrokerSnapshot) -> None:
        """Replace the replicas with the controller's state."""
        for t in snapshot.topics:
            self.topics.put(t)
        for g in snapshot.groups:
            self.groups.put(g)
        self.offsets.table = {k: dict(v) for k, v in snapshot.offsets.items()}
        self.consumer_groups = {c.group: c for c in snapshot.consumer_groups}

    # --- arrivals (send group only) --------------------------------------------------------

    def _on_arrival(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int, store_ts: int
    ) -> None:
        self._arrivals.append((topic, queue_id, max_offset, tags_code, store_ts))

    def drain_arrivals(self) -> list[ArrivalNotice]:
        """Arrival notices collected from the writer store since the last drain."""
        if not self._arrivals:
            return []
        out = self._arrivals
        self._arrivals = []
        return out
