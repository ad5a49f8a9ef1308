"""ProcessQueue: commit offset = smallest in flight, exact counts and sizes, orderly take/commit."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from actors.client.consumer.process_queue import MIB, ProcessQueue


@dataclass(frozen=True, slots=True)
class Msg:
    queue_offset: int
    body: bytes


def msgs(*offsets: int, size: int = 10) -> list[Msg]:
    return [Msg(o, b"x" * size) for o in offsets]


def test_commit_offset_is_smallest_in_flight() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue(0)
    batch = msgs(10, 11, 12, 13)
    assert pq.put_messages(batch, max_offset=20)
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max, pq.msg_acc_cnt) == (4, 40, 13, 7)
    assert pq.max_span() == 3
    # 11 and 12 finish first: 10 still pins the offset
    assert pq.remove_messages(batch[1:3], now_ms=5) == 10
    assert pq.remove_messages(batch[0:1], now_ms=6) == 13
    assert pq.remove_messages(batch[3:4], now_ms=7) == 14  # empty: highest seen + 1
    assert (pq.msg_count, pq.msg_size, pq.last_consume_ms) == (0, 0, 7)
    assert pq.remove_messages(batch, now_ms=8) == -1  # nothing cached


def test_duplicate_put_is_counted_once() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue(0)
    pq.put_messages(msgs(1, 2))
    assert not pq.put_messages(msgs(2, 3))  # already dispatched once (orderly flag)
    assert (pq.msg_count, pq.msg_size) == (3, 30)


def test_in_flight_reporting_never_includes_finished() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue(0)
    batch = msgs(1, 2, 3)
    pq.put_messages(batch)
    pq.mark_consuming(batch[:2], now_ms=1000)
    assert pq.in_flight_count() == 2
    assert pq.expired_in_flight(now_ms=1500, timeout_ms=1000) == []
    assert pq.expired_in_flight(now_ms=2500, timeout_ms=1000) == [(1, 1000), (2, 1000)]
    pq.remove_messages(batch[:1], now_ms=2600)
    pq.release_in_flight(batch[:1])
    assert pq.expired_in_flight(now_ms=2700, timeout_ms=1000) == [(2, 1000)]
    pq.release_in_flight(batch[1:2])  # a local retry keeps it cached, not running
    assert pq.expired_in_flight(now_ms=2700, timeout_ms=1000) == []
    assert pq.first_offset() == 2


def test_orderly_take_commit_rollback_and_again() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue(0)
    assert pq.put_messages(msgs(5, 6, 7, 8))
    taken = pq.take_messages(2, now_ms=1)
    assert [m.queue_offset for m in taken] == [5, 6]
    assert pq.has_temp_message()
    pq.make_message_to_consume_again(taken[1:])  # 6 goes back, 5 stays taken
    assert [m.queue_offset for m in pq.take_messages(1, now_ms=2)] == [6]
    assert pq.commit() == 7
    assert (pq.msg_count, pq.msg_size) == (2, 20)
    taken = pq.take_messages(10, now_ms=3)
    pq.rollback()
    assert [m.queue_offset for m in pq.take_messages(10, now_ms=4)] == [7, 8]
    assert pq.commit() == 9
    assert pq.take_messages(1, now_ms=5) == []
    assert not pq.consuming  # the next put dispatches again
    assert pq.put_messages(msgs(9))
    assert pq.commit() == -1


def test_lock_and_pull_expiry() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue(0)
    assert not pq.locked
    pq.set_locked(True, now_ms=100)
    assert not pq.is_lock_expired(30_100) and pq.is_lock_expired(30_101)
    pq.set_locked(False, now_ms=200)  # a refusal does not refresh the timestamp
    assert pq.last_lock_ms == 100
    assert not pq.is_pull_expired(120_000) and pq.is_pull_expired(120_001)


def test_info_for_running_info() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue(7)
    pq.put_messages(msgs(3, 4, 9, size=MIB))
    pq.take_messages(1, now_ms=8)
    info = pq.info(commit_offset=3).to_wire()
    assert info["cachedMsgMinOffset"] == 4 and info["cachedMsgMaxOffset"] == 9
    assert info["cachedMsgCount"] == 2 and info["cachedMsgSizeInMiB"] == 3
    assert info["transactionMsgMinOffset"] == 3 and info["transactionMsgCount"] == 1
    assert info["commitOffset"] == 3 and info["droped"] is False
    assert info["lastConsumeTimestamp"] == 8 and info["lastPullTimestamp"] == 7


@given(st.lists(st.integers(0, 200), min_size=1, max_size=60, unique=True),
       st.randoms(use_true_random=False))
def test_commit_never_passes_an_unfinished_message(offsets: list[int], rnd: object) -> None:
    import random

    assert isinstance(rnd, random.Random)
    pq: ProcessQueue[Msg] = ProcessQueue(0)
    batch = msgs(*sorted(offsets), size=3)
    pq.put_messages(batch)
    pending = list(batch)
    rnd.shuffle(pending)
    done: set[int] = set()
    while pending:
        k = rnd.randint(1, len(pending))
        chunk, pending = pending[:k], pending[k:]
        commit = pq.remove_messages(chunk, now_ms=1)
        done.update(m.queue_offset for m in chunk)
        left = [m.queue_offset for m in batch if m.queue_offset not in done]
        assert commit == (min(left) if left else max(offsets) + 1)
        assert pq.msg_size == 3 * len(left) and pq.msg_count == len(left)


def _check_offset_map(seed: int) -> None:
    """OffsetMap against a SortedDict (the TreeMap it stands for) through one seeded run of
    rising pulls, redeliveries below the last offset, removals in any order, first / last
    lookups, pop_first (orderly) and clears; one key at a time and a pull's batch at once
    (put_messages, pop_messages)."""
    from typing import NamedTuple

    class Msg(NamedTuple):
        queue_offset: int
        body: bytes

    import random

    from sortedcontainers import SortedDict

    from actors.client.consumer.process_queue import OffsetMap

    rng = random.Random(seed)
    got: OffsetMap[Msg] = OffsetMap()
    want: SortedDict[int, Msg] = SortedDict()
    nxt = rng.randrange(1000)
    for step in range(400):
        op = rng.random()
        if op < 0.35:  # a pull: rising offsets
            batch = []
            for _ in range(rng.randint(1, 8)):
                batch.append(Msg(nxt, b"m%d@%d" % (nxt, step)))
                nxt += rng.choice((1, 1, 1, 2))
            if rng.random() < 0.5:
                for m in batch:
                    got[m.queue_offset] = m
            else:
                assert got.put_messages(batch) == [m for m in batch if m.queue_offset not in want]
            want.update((m.queue_offset, m) for m in batch)
        elif op < 0.45:  # a redelivery below the last offset (a reset, a retry put back)
            offs = [rng.randrange(max(0, nxt - 50), nxt + 1) for _ in range(rng.randint(1, 3))]
            batch = [Msg(off, b"r%d@%d" % (off, step)) for off in dict.fromkeys(offs)]
            assert got.put_messages(batch) == [m for m in batch if m.queue_offset not in want]
            want.update((m.queue_offset, m) for m in batch)
        elif op < 0.8 and want:  # handlers finish in any order, mostly near the front
            front = list(want.keys())[: rng.randint(1, len(want))]
            done = rng.sample(front, rng.randint(1, min(4, len(front))))
            if rng.random() < 0.5:
                for off in done:
                    assert got.pop(off) == want.pop(off)
            else:
                gone = [want.pop(off) for off in done]
                assert got.pop_messages([*gone, Msg(-1, b"")]) == gone
            assert got.pop(-1, None) is None
        elif op < 0.9 and want:
            assert got.pop_first() == want.popitem(0)
        elif op < 0.92:
            got.clear()
            want.clear()
        assert len(got) == len(want) and bool(got) == bool(want)
        if want:
            assert (got.first(), got.last()) == (want.peekitem(0)[0], want.peekitem(-1)[0])
        if step % 25 == 0:
            assert list(got.items()) == list(want.items())
            assert sorted(got.values()) == sorted(want.values())
        probe = rng.randrange(max(0, nxt - 60), nxt + 2)
        assert (probe in got) == (probe in want)
        assert len(got._keys) - got._head <= (want.peekitem(-1)[0] - want.peekitem(0)[0] + 1
                                               if want else 0) + 64  # fmt: skip


def test_offset_map_is_the_tree_map_it_stands_for_in_every_seed() -> None:
    for seed in range(300):
        _check_offset_map(seed)
