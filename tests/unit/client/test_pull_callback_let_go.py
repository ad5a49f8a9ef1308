"""Pull answers for a queue the consumer is letting go (revoking, or dropped) change nothing.

Found by a review of the consumer's races: a FOUND answer for a revoking queue is not cached,
so a NO_MATCHED answer after it moved the queue's offset past those records (correctTagsOffset
with nothing cached), and the revoke committed it: the next owner skipped them. A late
OFFSET_ILLEGAL for a queue let go and taken again removed the new ProcessQueue 10 s later.
A commit made while the queue's pull is out (revoke, close, reset) goes after that pull's older
commit offset, acknowledged, never after a sleep."""

from __future__ import annotations

from typing import Any

from actors.client.consumer.consumer_channel import PullAnswer, PullCommand
from actors.client.consumer.consumer_config import ServiceState
from actors.client.consumer.default_mq_push_consumer_impl import (
    DefaultMQPushConsumerImpl,
    PushConsumerConfig,
)
from actors.client.consumer.offset_store import OffsetStore
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.consumer.pull_callback import PullCallback
from actors.client.consumer.pull_request import PullRequest
from actors.client.records import PullStatus
from protocol.bodies import MessageQueue
from protocol.codes import PullSysFlag

MQ = MessageQueue("T", "broker-a", 1)
EMPTY = memoryview(b"")


class _Services:
    """Records the commits the core settles and the queues it reports released."""

    def __init__(self, log: list[tuple[Any, ...]] | None = None) -> None:
        self.revoked_mqs: list[MessageQueue] = []
        self.log = log if log is not None else []
        self.rids = 1000

    def new_rid(self) -> int:
        self.rids += 1
        return self.rids

    def settle(self, cmds: list[PullCommand], timeout_s: float) -> bool:
        self.log.append(("settle", cmds))
        return True

    def revoked(self, group: str, mqs: list[MessageQueue]) -> None:
        self.revoked_mqs.extend(mqs)


class _NoPulls(PullCallback):
    """The core's pulling with nothing behind it: no pull leaves."""

    def pull(self, req: PullRequest) -> None:
        pass


class _Core(DefaultMQPushConsumerImpl):
    """The core with nothing behind it: no pulls leave, no broker; commits are logged."""

    log: list[tuple[Any, ...]]

    def persist(self, mqs: list[MessageQueue], sync: bool) -> None:
        assert self.offset_store is not None
        self.log.append(("persist", [self.offset_store.read_memory(mq) for mq in mqs]))


def _core() -> tuple[_Core, _Services]:
    core = _Core(PushConsumerConfig("letgo_cg", "127.0.0.1:9876"), lambda msgs: None)
    core.pulling = _NoPulls(core)
    core.log = []
    services = _Services(core.log)
    core.services = services  # type: ignore[assignment]
    core.offset_store = OffsetStore("letgo_cg")
    core.state = ServiceState.RUNNING
    return core, services


def _pending(core: _Core, rid: int, pq: ProcessQueue[Any], offset: int,
             commit: int = 0) -> PullRequest:  # fmt: skip
    """A pull of pq at offset that is out (carrying commit, when > 0)."""
    req = PullRequest(MQ, pq, offset, False)
    core.pulling.pending[rid] = req
    flag = PullSysFlag.build(commit > 0, True, False)
    req.out = PullCommand(rid, "127.0.0.1:10911", "letgo_cg", MQ.topic, MQ.queue_id, offset, 32,
                          int(flag), commit, 15_000, None, 0, "TAG", 30_000)
    return req


def _answer(rid: int, status: PullStatus, next_begin: int, max_offset: int) -> PullAnswer:
    return PullAnswer(rid, status.value, next_begin, 0, max_offset, 0)


def test_no_matched_after_an_uncached_found_keeps_a_revoking_queues_offset() -> None:
    core, _ = _core()
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[MQ] = pq
    assert core.offset_store is not None
    core.offset_store.update_offset(MQ, 100, False)
    _pending(core, 7, pq, 100)
    pq.revoking = True  # REVOKE ran while pull@100 was out
    core.pulling.on_pull_result(_answer(7, PullStatus.FOUND, 132, 200), EMPTY)  # 100..131: dropped
    _pending(core, 8, pq, 132)
    core.pulling.on_pull_result(_answer(8, PullStatus.NO_MATCHED_MSG, 141, 200), EMPTY)
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
    core.pulling.on_pull_result(_answer(9, PullStatus.OFFSET_ILLEGAL, 5000, 6000), EMPTY)
    assert not new.dropped
    core._fix_offset(req)  # had it been scheduled: the table holds another queue now
    assert core.table.get(MQ) is new
    assert core.offset_store.read_memory(MQ) == 300
    assert services.revoked_mqs == []


def test_a_reset_commits_after_the_queues_pull_that_is_out() -> None:
    """RESET_CONSUMER_CLIENT_OFFSET while the queue's pull (carrying commit 500) is out: that
    pull would store 500 after the reset's commit of 40 (the reset undone). The reset's
    offset goes to the broker behind it first, as a commit pull that does not wait, and is
    committed once that is answered."""
    from actors.client.consumer.consumer_requests import reset_offsets

    core, services = _core()
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[MQ] = pq
    assert core.offset_store is not None
    core.offset_store.update_offset(MQ, 500, False)
    _pending(core, 21, pq, 532, commit=500)
    reset_offsets(core, "T", {MQ: 40})
    assert pq.dropped and MQ not in core.table
    assert [e[0] for e in core.log] == ["settle", "persist"]
    (cmd,) = core.log[0][1]
    assert cmd.rid not in (0, 21) and cmd.commit_offset == 40 and cmd.suspend_ms == 0
    assert cmd.sys_flag & PullSysFlag.FLAG_COMMIT_OFFSET
    assert not cmd.sys_flag & PullSysFlag.FLAG_SUSPEND and cmd.max_nums == 1
    assert (cmd.addr, cmd.topic, cmd.queue_id) == ("127.0.0.1:10911", "T", 1)
    assert core.log[1] == ("persist", [40])
    assert services.revoked_mqs == [MQ]


def test_a_revoke_settles_only_a_pull_out_with_another_commit() -> None:
    """A revoke commits at once when the queue has no pull out, or its pull carries the same
    offset; a pull out with an older one is settled first. Other queues' pulls do not count."""
    for out_commit, settled in ((None, False), (700, False), (650, True)):
        core, services = _core()
        pq: ProcessQueue[Any] = ProcessQueue(0)
        core.table[MQ] = pq
        assert core.offset_store is not None
        core.offset_store.update_offset(MQ, 700, False)
        if out_commit is not None:
            _pending(core, 5, pq, 720, commit=out_commit)
        _pending(core, 6, ProcessQueue(0), 10, commit=3)  # another queue's
        pq.revoking = True
        core._finish_revoke(MQ, False)
        assert MQ not in core.table
        assert [e[0] for e in core.log] == (["settle", "persist"] if settled else ["persist"])
        if settled:
            assert [c.commit_offset for c in core.log[0][1]] == [700]
        assert core.log[-1] == ("persist", [700])
        assert services.revoked_mqs == [MQ]


def test_an_answer_ends_the_pull_that_is_out() -> None:
    """Once a pull is answered nothing of it is out: a commit after it needs no settling."""
    core, _ = _core()
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[MQ] = pq
    assert core.offset_store is not None
    core.offset_store.update_offset(MQ, 90, False)
    req = _pending(core, 31, pq, 100, commit=80)
    core.pulling.on_pull_result(_answer(31, PullStatus.NO_NEW_MSG, 100, 100), EMPTY)
    assert req.out is None and 31 not in core.pulling.pending
    pq.revoking = True
    core._finish_revoke(MQ, False)
    assert [e[0] for e in core.log] == ["persist"]


def test_an_orderly_queue_still_being_consumed_is_not_released_on_timeout() -> None:
    """An orderly queue whose handler still runs when the drain times out keeps its lock and
    is tried again later (released, another consumer could lock it and consume the same
    ordered queue concurrently); once the handler is done it is released."""

    class _Orderly(_Core):
        def _orderly(self) -> bool:
            return True

    core = _Orderly(PushConsumerConfig("letgo_cg", "127.0.0.1:9876"), lambda msgs: None)
    core.pulling = _NoPulls(core)
    core.log = []
    services = _Services(core.log)
    core.services = services  # type: ignore[assignment]
    core.offset_store = OffsetStore("letgo_cg")
    core.state = ServiceState.RUNNING
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[MQ] = pq
    pq.revoking = True
    pq.in_flight[42] = 0  # the handler is still running
    core._finish_revoke(MQ, True)
    assert core.table.get(MQ) is pq and not pq.dropped and services.revoked_mqs == []
    assert pq.try_unlock_times == 1
    del pq.in_flight[42]
    core._finish_revoke(MQ, True)
    assert MQ not in core.table and services.revoked_mqs == [MQ]
