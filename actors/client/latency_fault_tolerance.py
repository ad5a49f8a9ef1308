"""Which queue a producer sends to next: round robin, steering around slow or failed brokers.

Mirrors client/latency/MQFaultStrategy.java and LatencyFaultToleranceImpl.java, RocketMQ
4.9.x. Without sendLatencyFaultEnable (the default) a send picks the next queue round robin,
skipping the broker of the previous failed attempt. With it, every send's latency marks its
broker unavailable for notAvailableDuration[i] where latency >= latencyMax[i] (a failure
counts as 30 s); unavailable brokers are skipped, and when all are, one of the better half
(available first, then lower latency, then sooner available) is tried anyway. Time is passed
in (now_ms).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Final

from actors.client.records import MessageQueue
from actors.client.topic_publish_info import TopicPublishInfo

LATENCY_MAX: Final = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION: Final = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY_MS: Final = 30000


@dataclass(slots=True)
class FaultItem:
    """One broker's last latency and when it becomes available again."""

    name: str
    current_latency: int
    start_timestamp: int

    def is_available(self, now_ms: int) -> bool:
        """True once start_timestamp has passed."""
        return now_ms >= self.start_timestamp

    def sort_key(self, now_ms: int) -> tuple[int, int, int]:
        """FaultItem.compareTo: available first, then latency, then start time."""
        return (0 if self.is_available(now_ms) else 1, self.current_latency,
                self.start_timestamp)


class LatencyFaultTolerance:
    """faultItemTable: broker name -> FaultItem."""

    def __init__(self) -> None:
        self.items: dict[str, FaultItem] = {}
        self._worst = itertools.count()
        self._lock = threading.Lock()

    def update_fault_item(self, name: str, latency_ms: int, not_available_ms: int,
                          now_ms: int) -> None:  # fmt: skip
        """Record a latency and the unavailability window it earns."""
        item = self.items.get(name)
        if item is not None:
            item.current_latency = latency_ms
            item.start_timestamp = now_ms + not_available_ms
            return
        with self._lock:
            self.items[name] = FaultItem(name, latency_ms, now_ms + not_available_ms)

    def is_available(self, name: str, now_ms: int) -> bool:
        """True when the broker has no open window."""
        item = self.items.get(name)
        return item is None or item.is_available(now_ms)

    def remove(self, name: str | None) -> None:
        """Forget a broker."""
        if name is not None:
            with self._lock:
                self.items.pop(name, None)

    def pick_one_at_least(self, now_ms: int) -> str | None:
        """One of the better half of the known brokers, in turn."""
        with self._lock:
            items = sorted(self.items.values(), key=lambda i: i.sort_key(now_ms))
        if not items:
            return None
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        return items[next(self._worst) % half].name


class MQFaultStrategy:
    """selectOneMessageQueue / updateFaultItem."""

    def __init__(self, send_latency_fault_enable: bool = False) -> None:
        self.enabled = send_latency_fault_enable
        self.tolerance = LatencyFaultTolerance()

    def select_one_message_queue(self, info: TopicPublishInfo, last_broker_name: str | None,
                                 now_ms: int) -> MessageQueue:  # fmt: skip
        """The queue for the next attempt."""
        if not self.enabled:
            return info.select_one_message_queue(last_broker_name)
        mqs = info.message_queue_list
        index = info.next_index()
        for _ in range(len(mqs)):
            mq = mqs[index % len(mqs)]
            index += 1
            if self.tolerance.is_available(mq.broker_name, now_ms):
                return mq
        not_best = self.tolerance.pick_one_at_least(now_ms)
        if not_best is not None:
            nums = info.write_queue_nums(not_best)
            if nums > 0:
                mq = info.select_one_message_queue()
                return MessageQueue(mq.topic, not_best, info.next_index() % nums)
            self.tolerance.remove(not_best)
        return info.select_one_message_queue()

    def update_fault_item(self, broker_name: str, latency_ms: int, isolation: bool,
                          now_ms: int) -> None:  # fmt: skip
        """Record a send's latency (isolation: it failed)."""
        if self.enabled:
            duration = self.compute_not_available_duration(
                ISOLATION_LATENCY_MS if isolation else latency_ms)
            self.tolerance.update_fault_item(broker_name, latency_ms, duration, now_ms)

    @staticmethod
    def compute_not_available_duration(latency_ms: int) -> int:
        """notAvailableDuration for the largest latencyMax the latency reaches."""
        for i in range(len(LATENCY_MAX) - 1, -1, -1):
            if latency_ms >= LATENCY_MAX[i]:
                return NOT_AVAILABLE_DURATION[i]
        return 0
