"""What every processor core of one broker sees: config, store, outbox and state replicas.

Mirrors the shared BrokerController fields RocketMQ's processors reach through
`brokerController.getXxx()` (broker/BrokerController.java, RocketMQ 4.9.x). Here each
processor actor has its own BrokerContext; shared state changes travel as events
(actors.broker.events) through the BrokerController actor, except consumer offsets, which every
actor reads and writes in one shared table (`offsets`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from actors.broker.config import BrokerConfig
from actors.broker.events import BrokerEvent, SubscriptionGroupDeleted, TopicsDeleted
from actors.broker.state import BrokerSnapshot, BrokerState
from actors.core import Outbox

__all__ = ["ArrivalNotice", "BrokerContext", "BrokerSnapshot"]

log = logging.getLogger(__name__)

# (topic, queue_id, max_offset_plus_one, tags_code, store_timestamp)
ArrivalNotice = tuple[str, int, int, int, int]


class BrokerContext(BrokerState):
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
        super().__init__(broker_config)
        self.store_config = store_config
        self.group = group
        self.outbox = outbox
        self.store = store
        self.runtime_dir = ""  # the broker's private directory on this host (set by the actor)
        self._events: list[BrokerEvent] = []
        self._arrivals: list[ArrivalNotice] = []
        self._handlers: dict[type, Callable[[Any, int], None]] = {}
        # Set by a runtime that implements the registration barrier (controller.take_barriers
        # -> the origin core's release(token)); off, replies are never held.
        self.registration_barrier = False
        if store is not None and group == "send":  # the writer (DefaultMessageStore)
            store.arrival_listener = self._on_arrival

    # --- events -------------------------------------------------------------------------

    def emit(self, event: BrokerEvent) -> None:
        """Apply a change locally and queue it for the controller. A delete's part in the
        shared offset table is done here, once, by the actor that made it: every replica
        applying it later would also wipe offsets committed in between."""
        self._apply_local(event)
        if isinstance(event, TopicsDeleted):
            for topic in event.topics:
                self.offsets.remove_topic(topic)
        elif isinstance(event, SubscriptionGroupDeleted) and event.remove_offset:
            self.offsets.remove_group(event.group)
        self._events.append(event)

    def drain_events(self) -> list[BrokerEvent]:
        """Events emitted since the last drain."""
        if not self._events:
            return []
        out, self._events = self._events, []
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
        if self.apply_state(event) is None:
            log.warning("unknown broker event %r", event)

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
