"""RebalanceImpl core: allocation into the queue table, revoke/assign, orderly locks."""

from __future__ import annotations

import pytest

from actors.client.consumer.allocate import AllocateMessageQueueAveragely
from actors.client.consumer.offset_store import OffsetNotFoundError, RemoteBrokerOffsetStore
from actors.client.consumer.rebalance import (
    Assign,
    Lock,
    LockState,
    RebalanceImpl,
    Revoke,
    SubscriptionChanged,
    Unlock,
    compute_pull_from_where,
)
from protocol.bodies import ConsumeFromWhere, MessageModel, MessageQueue, SubscriptionData

T = "Orders"
QUEUES = [MessageQueue(T, b, q) for b in ("broker-a", "broker-b") for q in range(4)]
CIDS = ["10.0.0.1@1", "10.0.0.2@2", "10.0.0.3@3"]


def core(me: str = CIDS[0], *, orderly: bool = False,
         model: MessageModel = MessageModel.CLUSTERING) -> RebalanceImpl:
    r = RebalanceImpl("cg", me, model, AllocateMessageQueueAveragely(), orderly=orderly)
    r.subscriptions[T] = SubscriptionData.build(T, "*")
    r.set_topic_queues(T, QUEUES)
    return r


def kinds(actions: list[object], kind: type) -> list[object]:
    return [a for a in actions if isinstance(a, kind)]


def test_clustering_assign_then_stable_then_revoke() -> None:
    r = core()
    acts = r.rebalance_topic(T, list(reversed(CIDS)), now_ms=100)  # sorted inside
    assert [a.mq for a in kinds(acts, Assign)] == QUEUES[:3]  # type: ignore[attr-defined]
    changed = kinds(acts, SubscriptionChanged)
    assert len(changed) == 1 and changed[0].mq_divided == frozenset(QUEUES[:3])  # type: ignore[attr-defined]
    assert r.subscriptions[T].sub_version == 100
    assert r.rebalance_topic(T, CIDS, now_ms=200) == []  # nothing moved: nothing to do
    # a fourth member joins: 8 queues / 4 -> two each; this client keeps a0, a1
    acts = r.rebalance_topic(T, [*CIDS, "10.0.0.4@4"], now_ms=300)
    assert kinds(acts, Revoke) == [Revoke(QUEUES[2])]
    assert kinds(acts, Assign) == []
    assert r.held() == QUEUES[:2]
    assert r.on_revoked(QUEUES[2]) == []  # concurrently: no lock to give back
    assert QUEUES[2] not in r.table


def test_requeued_before_release_waits_for_it() -> None:
    r = core()
    r.rebalance_topic(T, CIDS, 1)
    r.rebalance_topic(T, [*CIDS, "10.0.0.4@4"], 2)  # QUEUES[2] revoking
    acts = r.rebalance_topic(T, CIDS, 3)  # back to three members before the release
    assert kinds(acts, Assign) == [] and r.retry_soon
    r.retry_soon = False
    r.on_revoked(QUEUES[2])
    assert r.retry_soon  # the next round takes it again
    acts = r.rebalance_topic(T, CIDS, 4)
    assert kinds(acts, Assign) == [Assign(QUEUES[2])]


def test_not_in_consumer_list_gets_nothing_and_no_list_changes_nothing() -> None:
    r = core("10.9.9.9@9")
    assert r.rebalance_topic(T, CIDS, 1) == []
    r2 = core()
    r2.rebalance_topic(T, CIDS, 1)
    assert r2.rebalance_topic(T, None, 2) == []  # the broker did not answer: keep what we hold
    assert r2.rebalance_topic(T, [], 3) == []  # Java's check throws: table unchanged
    assert len(r2.held()) == 3


def test_orderly_locks_before_assigning() -> None:
    r = core(orderly=True)
    acts = r.rebalance_topic(T, CIDS, 1)
    assert acts == [Lock("broker-a", frozenset(QUEUES[:3]))]
    acts = r.on_lock_result(QUEUES[:3], QUEUES[:2], now_ms=5)
    assert kinds(acts, Assign) == [Assign(QUEUES[0], True, 5), Assign(QUEUES[1], True, 5)]
    assert len(kinds(acts, SubscriptionChanged)) == 1
    assert r.retry_soon and QUEUES[2] not in r.table  # refused: retried soon, not in 20 s
    acts = r.rebalance_topic(T, CIDS, 6)
    assert acts == [Lock("broker-a", frozenset({QUEUES[2]}))]
    # renewal: one lock lost
    r.on_lock_result([QUEUES[2]], [QUEUES[2]], 7)
    renew = r.lock_all()
    assert renew == [Lock("broker-a", frozenset(QUEUES[:3]), renew=True)]
    acts = r.on_lock_result(QUEUES[:3], QUEUES[1:3], 30)
    assert acts == [LockState(QUEUES[0], False, 5), LockState(QUEUES[1], True, 30),
                    LockState(QUEUES[2], True, 30)]
    # revoked orderly queue: unlocked once released
    r.rebalance_topic(T, [*CIDS, "10.0.0.4@4"], 40)
    assert r.on_revoked(QUEUES[2]) == [Unlock("broker-a", frozenset({QUEUES[2]}))]
    assert r.unlock_all() == [Unlock("broker-a", frozenset(QUEUES[:2]))]


def test_lock_granted_after_the_queue_moved_is_given_back() -> None:
    r = core(orderly=True)
    r.rebalance_topic(T, CIDS, 1)  # LOCKING a0..a2
    r.rebalance_topic(T, [*CIDS, "10.0.0.4@4"], 2)  # a2 no longer ours while locking
    acts = r.on_lock_result(QUEUES[:3], QUEUES[:3], 3)
    assert Unlock("broker-a", frozenset({QUEUES[2]})) in acts
    assert [a.mq for a in kinds(acts, Assign)] == QUEUES[:2]  # type: ignore[attr-defined]


def test_broadcasting_takes_every_queue_and_truncates_old_topics() -> None:
    r = core(model=MessageModel.BROADCASTING)
    acts = r.rebalance_topic(T, None, 1)
    assert sorted(a.mq for a in kinds(acts, Assign)) == sorted(QUEUES)  # type: ignore[attr-defined]
    del r.subscriptions[T]
    assert sorted(a.mq for a in r.truncate_not_my_topics()) == sorted(QUEUES)  # type: ignore[attr-defined]
    assert r.held() == []


class Admin:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def max_offset(self, mq: MessageQueue) -> int:
        self.asked.append("max")
        return 500

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        self.asked.append(f"search {timestamp_ms}")
        return 42


class Broker:
    def __init__(self, offsets: dict[MessageQueue, int], down: bool = False) -> None:
        self.offsets = offsets
        self.down = down

    def query_offset(self, mq: MessageQueue) -> int:
        if self.down:
            raise ConnectionError("down")
        if mq not in self.offsets:
            raise OffsetNotFoundError(str(mq))
        return self.offsets[mq]

    def commit_offset(self, mq: MessageQueue, offset: int, *, oneway: bool) -> None:
        self.offsets[mq] = offset


@pytest.mark.parametrize(("where", "topic", "want", "asked"), [
    (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, T, 500, ["max"]),
    (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, "%RETRY%cg", 0, []),
    (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, T, 0, []),
    (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, T, 42, ["search 1700000000000"]),
    (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, "%RETRY%cg", 500, ["max"]),
])
def test_compute_pull_from_where_new_group(where: ConsumeFromWhere, topic: str, want: int,
                                           asked: list[str]) -> None:
    admin = Admin()
    store = RemoteBrokerOffsetStore("cg", Broker({}))
    mq = MessageQueue(topic, "broker-a", 0)
    assert compute_pull_from_where(mq, where, store, admin, 1_700_000_000_000) == want
    assert admin.asked == asked


def test_compute_pull_from_where_stored_offset_wins_and_errors_give_minus_one() -> None:
    mq = QUEUES[0]
    admin = Admin()
    store = RemoteBrokerOffsetStore("cg", Broker({mq: 77}))
    for where in ConsumeFromWhere:
        assert compute_pull_from_where(mq, where, store, admin, 0) == 77
    assert admin.asked == []
    down = RemoteBrokerOffsetStore("cg", Broker({}, down=True))
    assert compute_pull_from_where(mq, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, down, admin,
                                   0) == -1
    store.update_offset(mq, 90, False)  # a seek in the lite pull consumer
    assert compute_pull_from_where(mq, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, store, admin,
                                   0, memory_first=True) == 90


def test_missing_route_is_asked_again_backing_off_to_the_interval() -> None:
    from actors.client.consumer.rebalance import route_retry_after

    waits, last = [], 0.0
    for _ in range(8):
        last = route_retry_after(last, 1_000.0, 20_000.0)
        waits.append(last)
        if not last:
            break
    assert waits == [1_000.0, 2_000.0, 4_000.0, 8_000.0, 16_000.0, 0.0]
