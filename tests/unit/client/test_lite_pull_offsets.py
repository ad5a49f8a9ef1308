"""The lite pull consumer's offsets move only with what the user was given and committed.

Found by a review of the consumer (session 15): a NO_NEW / NO_MATCHED answer moved the stored
offset past messages poll() had returned but the user had not committed (the push consumer's
correctTagsOffset, with nothing cached once poll() took them), and close() committed the last
poll()'s messages although the loop over them may have raised (Java's shutdown commits
nothing). A late timer of a request a seek replaced made it the queue's request again, so the
next seek cancelled it instead of the live one."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from actors.client.consumer.consumer_channel import PullAnswer
from actors.client.consumer.consumer_config import ServiceState
from actors.client.consumer.default_lite_pull_consumer_impl import (
    DefaultLitePullConsumerImpl,
    LitePullConsumerConfig,
)
from actors.client.consumer.offset_store import OffsetStore
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.consumer.pull_request import PullRequest
from actors.client.records import PullStatus
from protocol.bodies import MessageQueue

MQ = MessageQueue("T", "broker-a", 0)


class _Store(OffsetStore):
    """The in-memory offset table; persisting records what would reach the broker."""

    def __init__(self) -> None:
        super().__init__("lite_cg")
        self.persisted: list[dict[MessageQueue, int]] = []

    def persist_all(self, mqs: Any) -> None:
        self.persisted.append({mq: self.table[mq] for mq in mqs if mq in self.table})

    def persist(self, mq: MessageQueue, sync: bool = False) -> None:
        self.persist_all([mq])


EMPTY = memoryview(b"")


def _lite(auto_commit: bool = False
          ) -> tuple[DefaultLitePullConsumerImpl, _Store, ProcessQueue[Any]]:  # fmt: skip
    cfg = LitePullConsumerConfig("lite_cg", "127.0.0.1:9876", auto_commit=auto_commit)
    core = DefaultLitePullConsumerImpl(cfg)
    store = _Store()
    core.offset_store = store
    core.state = ServiceState.RUNNING
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[MQ] = pq
    store.update_offset(MQ, 0, False)  # committed: nothing
    return core, store, pq


def test_a_no_matched_answer_leaves_the_committed_offset_alone() -> None:
    core, store, pq = _lite()
    core.consume_offsets[MQ] = 10  # poll() returned 0..9; the user has not committed them
    core.pulling.pending[5] = PullRequest(MQ, pq, 10, False)
    core.pulling.on_pull_result(PullAnswer(5, PullStatus.NO_MATCHED_MSG.value, 14, 0, 14, 0), EMPTY)
    assert store.read_memory(MQ) == 0


def test_close_persists_what_was_committed_not_what_poll_returned() -> None:
    core, store, _pq = _lite(auto_commit=True)
    core.consume_offsets[MQ] = 10  # the last poll()'s messages, maybe never processed
    core.shutdown(1.0)
    assert store.persisted and all(p.get(MQ, 0) == 0 for p in store.persisted)


def test_a_late_timer_of_a_replaced_request_does_not_become_the_queues_request() -> None:
    core, _store, pq = _lite()
    old = PullRequest(MQ, pq, 5, False)
    live = PullRequest(MQ, pq, 50, False)
    core.requests[MQ] = live  # a seek cancelled `old` and started `live`
    old.cancelled = True
    core._pull(old)  # its back-off timer fires now
    assert core.requests[MQ] is live


def test_an_illegal_offset_moves_the_pull_on_and_keeps_the_queue() -> None:
    """OFFSET_ILLEGAL (say an assigned start offset below what retention kept): the queue pulls
    on from the broker's offset, as Java's PullTaskImpl does. Dropped as the push consumer
    drops it, an assigned queue was never taken again (assign() runs no rebalance)."""
    core, _store, pq = _lite()
    pulled: list[int] = []
    core.pulling.pull = lambda req: pulled.append(req.next_offset)  # type: ignore[method-assign]
    core.scheduler.start()
    try:
        core.pulling.pending[6] = PullRequest(MQ, pq, 3, False)
        core.pulling.on_pull_result(
            PullAnswer(6, PullStatus.OFFSET_ILLEGAL.value, 500, 500, 900, 0), EMPTY)
        for _ in range(100):  # bounded: the scheduler runs it at once
            if pulled:
                break
            time.sleep(0.01)
    finally:
        core.scheduler.stop()
    assert pulled == [500]
    assert core.table.get(MQ) is pq and not pq.dropped


def test_an_assigned_queue_whose_start_offset_failed_is_taken_again() -> None:
    """assign(): a queue whose first offset could not be read (a broker timeout) is tried
    again after the exception delay; given back to a rebalance that never comes, it was lost
    from assignment() for good."""
    core, _store, _pq = _lite()
    del core.table[MQ]
    core.assigned_only = True
    core.assigned = {MQ}
    core.consume_timestamp_ms = 0
    core.admin = object()  # type: ignore[assignment]
    answers: Iterator[int | Exception] = iter([RuntimeError("timeout"), 7])

    def start_offset(mq: MessageQueue) -> int | None:
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    core._start_offset = start_offset  # type: ignore[method-assign]
    core.cfg.pull_time_delay_ms_when_exception = 10
    core.scheduler.start()
    try:
        core._take([(MQ, ProcessQueue(0))])
        assert MQ not in core.table
        for _ in range(200):  # bounded: retried 10 ms later
            if MQ in core.table:
                break
            time.sleep(0.01)
    finally:
        core.scheduler.stop()
    assert MQ in core.table
