"""Pull answers for a queue the consumer is letting go (revoking, or dropped) change nothing.

Found by a review of the consumer's races: a FOUND answer for a revoking queue is not cached,
so a NO_MATCHED answer after it moved the queue's offset past those records (correctTagsOffset
with nothing cached), and the revoke committed it: the next owner skipped them. A late
OFFSET_ILLEGAL for a queue let go and taken again removed the new ProcessQueue 10 s later.
A chain answering after its queue's chain id was cleared must still be ended, by its own id."""

from __future__ import annotations

from typing import Any

from actors.client.consumer.consumer_config import ConsumerConfig, ServiceState
from actors.client.consumer.consumer_core import ConsumerImplBase
from actors.client.consumer.offset_store import OffsetStore
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.consumer.pull_request import PullRequest
from actors.client.records import PullStatus
from protocol.bodies import MessageQueue

MQ = MessageQueue("T", "broker-a", 1)
EMPTY = memoryview(b"")


class _Services:
    """Records the chains the core ends and the queues it reports released."""

    def __init__(self) -> None:
        self.stopped: list[int] = []
        self.revoked_rows: list[list[Any]] = []

    def stop_chains(self, rids: list[int], wait_s: float = 0.0) -> None:
        self.stopped.extend(rids)

    def revoked(self, group: str, rows: list[list[Any]]) -> None:
        self.revoked_rows.extend(rows)


class _Core(ConsumerImplBase):
    """The core with nothing behind it: no pulls leave, no broker."""

    def _pull(self, req: Any) -> None:
        pass

    def persist(self, mqs: list[MessageQueue], sync: bool) -> None:
        pass


def _core() -> tuple[_Core, _Services]:
    core = _Core(ConsumerConfig("letgo_cg", "127.0.0.1:9876"))
    services = _Services()
    core.services = services  # type: ignore[assignment]
    core.offset_store = OffsetStore("letgo_cg")
    core.state = ServiceState.RUNNING
    return core, services


def _pending(core: _Core, rid: int, pq: ProcessQueue[Any], offset: int) -> PullRequest:
    req = PullRequest(MQ, pq, offset, False)
    core.pending[rid] = req
    return req


def test_no_matched_after_an_uncached_found_keeps_a_revoking_queues_offset() -> None:
    core, _ = _core()
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[MQ] = pq
    assert core.offset_store is not None
    core.offset_store.update_offset(MQ, 100, False)
    _pending(core, 7, pq, 100)
    pq.revoking = True  # REVOKE ran while pull@100 was out
    core.on_pull_result(7, PullStatus.FOUND.value, 132, 0, 200, 0, EMPTY)  # 100..131: dropped
    _pending(core, 8, pq, 132)
    core.on_pull_result(8, PullStatus.NO_MATCHED_MSG.value, 141, 0, 200, 0, EMPTY)
    assert pq.msg_count == 0
    assert core.offset_store.read_memory(MQ) == 100  # what the revoke commits


def test_a_late_offset_illegal_leaves_the_queues_next_process_queue_alone() -> None:
    core, services = _core()
    old: ProcessQueue[Any] = ProcessQueue(0)
    req = _pending(core, 9, old, 300)
    old.dropped = True  # let go while its pull was held at the broker
    new: ProcessQueue[Any] = ProcessQueue(0)
    core.table[MQ] = new  # and taken again
    assert core.offset_store is not None
    core.offset_store.update_offset(MQ, 300, False)
    core.on_pull_result(9, PullStatus.OFFSET_ILLEGAL.value, 5000, 0, 6000, 0, EMPTY)
    assert not new.dropped
    core._fix_offset(req)  # had it been scheduled: the table holds another queue now
    assert core.table.get(MQ) is new
    assert core.offset_store.read_memory(MQ) == 300
    assert services.revoked_rows == []


def test_a_repulled_answer_for_a_queue_let_go_ends_its_chain_by_id() -> None:
    core, services = _core()
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[MQ] = pq
    _pending(core, 11, pq, 0)
    pq.revoking = True
    pq.chain = 0  # cleared (and STOP sent) before chain 11's first pull reached the actor
    core.on_pull_result(11, PullStatus.NO_NEW_MSG.value, 0, 0, 0, 0, EMPTY, repulled=True)
    assert services.stopped == [11]


class _ChainingCore(_Core):
    """A push-concurrently core: the pull actor re-pulls its queues itself (chains)."""

    def __init__(self, cfg: ConsumerConfig, log: list[tuple[Any, ...]]) -> None:
        super().__init__(cfg)
        self.log = log

    def _chain_limits(self) -> list[int] | None:
        return [1000, 100, 2000, 0, 0]

    def persist(self, mqs: list[MessageQueue], sync: bool) -> None:
        assert self.offset_store is not None
        self.log.append(("persist", [self.offset_store.read_memory(mq) for mq in mqs]))


def test_a_reset_ends_the_queues_pull_chain_before_it_commits() -> None:
    """RESET_CONSUMER_CLIENT_OFFSET: the chain's next pull would carry the old commit offset
    after the reset's commit and the broker would keep that one (the reset undone)."""
    from actors.client.consumer.consumer_requests import reset_offsets

    log: list[tuple[Any, ...]] = []

    class _Logged(_Services):
        def stop_chains(self, rids: list[int], wait_s: float = 0.0) -> None:
            log.append(("stop", rids, wait_s))

    core = _ChainingCore(ConsumerConfig("letgo_cg", "127.0.0.1:9876"), log)
    services = _Logged()
    core.services = services  # type: ignore[assignment]
    core.offset_store = OffsetStore("letgo_cg")
    core.state = ServiceState.RUNNING
    pq: ProcessQueue[Any] = ProcessQueue(0)
    pq.chain = 21
    core.table[MQ] = pq
    core.offset_store.update_offset(MQ, 500, False)
    reset_offsets(core, "T", {MQ: 40})
    assert pq.dropped and MQ not in core.table
    stops = [i for i, e in enumerate(log) if e[0] == "stop" and 21 in e[1]]
    assert stops and log[stops[0]][2] > 0  # ended, waiting for its last pull to be written
    assert log[stops[0] + 1 :] == [("persist", [40])]  # then the reset offset is committed
    assert services.revoked_rows and services.revoked_rows[0][:3] == ["T", "broker-a", 1]


def test_a_revoke_does_not_wait_for_other_queues_to_stop_pulling() -> None:
    """The quiet wait before a revoke's commit is for the queue's own last pull (the only one
    that carries its commit offset): pulls of other queues every few ms kept it waiting."""
    import time

    core, services = _core()
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[MQ] = pq
    pq.revoking = True
    pq.last_pull_sent = time.monotonic() - 1.0  # its own last pull left a second ago
    core.last_pull_sent = time.monotonic()  # another queue's pull just left
    core._finish_revoke(MQ, False)
    assert MQ not in core.table
    assert [r[:3] for r in services.revoked_rows] == [["T", "broker-a", 1]]


def test_an_orderly_queue_still_being_consumed_is_not_released_on_timeout() -> None:
    """An orderly queue whose handler still runs when the drain times out keeps its lock and
    is tried again later (released, another consumer could lock it and consume the same
    ordered queue concurrently); once the handler is done it is released."""

    class _Orderly(_Core):
        def _orderly(self) -> bool:
            return True

    core = _Orderly(ConsumerConfig("letgo_cg", "127.0.0.1:9876"))
    services = _Services()
    core.services = services  # type: ignore[assignment]
    core.offset_store = OffsetStore("letgo_cg")
    core.state = ServiceState.RUNNING
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[MQ] = pq
    pq.revoking = True
    pq.in_flight[42] = 0  # the handler is still running
    core._finish_revoke(MQ, True)
    assert core.table.get(MQ) is pq and not pq.dropped and services.revoked_rows == []
    assert pq.try_unlock_times == 1
    del pq.in_flight[42]
    core._finish_revoke(MQ, True)
    assert MQ not in core.table and [r[:3] for r in services.revoked_rows] == [["T", "broker-a", 1]]
