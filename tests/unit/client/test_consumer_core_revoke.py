"""The consumer core's side of a rebalance: a queue revoked while its assignment is still being
taken (its first offset is being fetched on the scheduler thread) ends released, once.

Found by the clustering test against the reference broker: a second consumer joined while the
first was still computing its queues' offsets; the REVOKE found no queue in the table,
answered "released" at once, and the late take kept the queue, held by two consumers."""

from __future__ import annotations

import threading
import time
from typing import Any

from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.consumer_config import ConsumerConfig, ServiceState
from actors.client.consumer.consumer_core import ConsumerImplBase
from actors.client.consumer.offset_store import OffsetStore
from protocol.bodies import MessageQueue

WAIT_S = 10.0
TAKE_S = 0.2  # how long fetching the first offset takes


class _Services:
    """Records what the core tells the RebalanceService."""

    def __init__(self) -> None:
        self.revoked_mqs: list[MessageQueue] = []
        self.done = threading.Event()

    def revoked(self, group: str, mqs: list[MessageQueue]) -> None:
        self.revoked_mqs.extend(mqs)
        self.done.set()


class _SlowTakeCore(ConsumerImplBase):
    """A core whose queues take TAKE_S to start (a broker round trip), with no pulls."""

    def _start_offset(self, mq: MessageQueue) -> int | None:
        time.sleep(TAKE_S)
        return 0

    def _pull(self, req: Any) -> None:
        pass

    def persist(self, mqs: list[MessageQueue], sync: bool) -> None:
        pass


def test_a_queue_revoked_before_its_take_finished_is_released() -> None:
    core = _SlowTakeCore(ConsumerConfig("revoke_cg", "127.0.0.1:9876"))
    services = _Services()
    core.services = services  # type: ignore[assignment]
    core.offset_store = OffsetStore("revoke_cg")
    core.admin = object()  # type: ignore[assignment]
    core.consume_timestamp_ms = 0
    core.state = ServiceState.RUNNING
    core.scheduler.start()
    mq = MessageQueue("T", "broker-a", 3)
    try:
        core.on_rebalance_record(cc.Assign("revoke_cg", (cc.QueueLock(mq),)))
        core.on_rebalance_record(cc.Revoke("revoke_cg", (mq,)))  # its take still running
        assert services.done.wait(WAIT_S), "the revoke was never reported"
        settled = threading.Event()
        core.scheduler.submit(settled.set)  # behind the take: it has finished by then
        assert settled.wait(WAIT_S)
        assert mq not in core.table, "the queue was kept after the RebalanceService let it go"
        assert services.revoked_mqs == [mq]
    finally:
        core.scheduler.stop()
