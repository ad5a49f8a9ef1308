"""Helpers for the consumer tests: topic creation, a recording handler, bounded waits.

Consumers under test run in the test process (PushConsumer, LitePullConsumer) or, where a
process must be killed, in a child process (tests/clients/py_consumer.py) stopped by PID.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from actors.client import Message, Producer
from actors.client.consumer import ConsumeResult
from actors.client.records import MessageExt
from deploy.wire import BlockingClient
from protocol.bodies import MessageQueue
from tests.integration.client_helpers import Target, route_of
from tests.integration.e2e_helpers import RPC_TIMEOUT_S, create_topic_cmd, simple_cmd

FAST = {"rebalance_interval_ms": 1000.0, "lock_interval_ms": 1000.0, "rebalance_retry_ms": 200.0}


def create_topic(target: Target, topic: str, queues: int = 8, order: bool = False) -> None:
    """UPDATE_AND_CREATE_TOPIC on every broker; wait (bounded) until the route lists them all."""
    for addr in target.brokers.values():
        host, port = addr.split(":")
        cmd = create_topic_cmd(topic, queues)
        if order:
            cmd = simple_cmd(17, topic=topic, defaultTopic="TBW102", readQueueNums=queues,
                             writeQueueNums=queues, perm=6, topicFilterType="SINGLE_TAG",
                             topicSysFlag=0, order="true")
        with BlockingClient((host, int(port))) as c:
            r = c.invoke(cmd, RPC_TIMEOUT_S)
            assert r.code == 0, (r.code, r.remark)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        route = route_of(target, topic)
        if route is not None and len(route.queue_datas) == len(target.brokers):
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} never routed on every broker")


def produce(namesrv: str, topic: str, bodies: Iterable[bytes], *, tags: str | None = None,
            **props: str) -> int:
    """Send each body (sync); the number sent."""
    n = 0
    with Producer("consumer_test_pg", namesrv=namesrv) as p:
        for b in bodies:
            r = p.send(Message(topic, b, tags=tags, properties=props))
            assert r.status == "SEND_OK", r
            n += 1
    return n


@dataclass
class Recorder:
    """A handler that records every delivery (thread-safe); `result` decides the answer."""

    name: str = ""
    result: Callable[[MessageExt], ConsumeResult] = lambda m: ConsumeResult.SUCCESS
    sleep_s: float = 0.0
    deliveries: list[tuple[str, bytes, MessageExt]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, msgs: tuple[MessageExt, ...]) -> ConsumeResult:
        if self.sleep_s:
            time.sleep(self.sleep_s)
        out = ConsumeResult.SUCCESS
        with self.lock:
            for m in msgs:
                self.deliveries.append((self.name, m.body, m))
                r = self.result(m)
                if r is not ConsumeResult.SUCCESS:
                    out = r
        return out

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [b for _, b, _ in self.deliveries]


def wait_for(fn: Callable[[], Any], timeout_s: float, step_s: float = 0.05) -> Any:
    """fn() until truthy (bounded); its last value."""
    deadline = time.monotonic() + timeout_s
    value = fn()
    while not value and time.monotonic() < deadline:
        time.sleep(step_s)
        value = fn()
    return value


def disjoint_cover(assignments: list[set[MessageQueue]], topic: str, queues: int,
                   brokers: int = 1) -> bool:
    """True when the sets, restricted to topic, are disjoint and cover every queue."""
    own = [{q for q in a if q.topic == topic} for a in assignments]
    total = sum(len(a) for a in own)
    union = set().union(*own) if own else set()
    return total == len(union) == queues * brokers


def dup_count(bodies: list[bytes]) -> int:
    """Deliveries beyond the first of each body."""
    return sum(n - 1 for n in Counter(bodies).values() if n > 1)
