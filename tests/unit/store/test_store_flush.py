"""ASYNC_FLUSH: the flush thread (fdatasync), and msync slices in the tick without it."""

from __future__ import annotations

import threading

import pytest

from store.config import StoreConfig
from store.flush_service import FLUSH_BYTES_PER_TICK
from store.message_store import WARM_STEP_INTERVAL_MS, DefaultMessageStore
from store.state_page import OFF_FLUSHED_PHY
from tests.unit.store.store_helpers import GatedCall, msg, open_store, small_config


def _open_without_flush_thread(cfg: StoreConfig) -> DefaultMessageStore:
    s = DefaultMessageStore(cfg)
    s.flush_thread_enabled = False
    s.load(1_000)
    s.start(1_000)
    return s


def _wait_flushed(s: DefaultMessageStore, offset: int) -> None:
    for _ in range(10_000):  # bounded: a round of a few pages takes milliseconds
        if s.commitlog.flushed_offset >= offset:
            return
        threading.Event().wait(0.001)


def test_async_flush_goes_on_in_slices_until_the_round_is_done(tmp_path: object) -> None:
    size = 8 * FLUSH_BYTES_PER_TICK
    s = _open_without_flush_thread(small_config(str(tmp_path), mappedFileSizeCommitLog=size))
    try:
        body = bytes(64 * 1024)
        n = (3 * FLUSH_BYTES_PER_TICK) // len(body)  # ~3 slices of dirty data
        for i in range(n):
            assert s.put_message(msg("T", body), 1 + i).ok
        cl = s.commitlog
        end = cl.max_offset
        assert cl.flushed_offset < end
        t = 1_000 + s.cfg.flushIntervalCommitLog + n  # open_store starts the store at 1_000
        wait = s.tick(t)  # the round starts: one slice only
        first = cl.flushed_offset
        assert 0 < first <= FLUSH_BYTES_PER_TICK + 4096 and first < end
        assert wait <= WARM_STEP_INTERVAL_MS  # comes back soon for the rest
        for k in range(1, 20):  # bounded: a few more slices finish the round
            if cl.flushed_offset >= end:
                break
            s.tick(t + k)
        assert cl.flushed_offset == end
    finally:
        s.shutdown(10**9)


@pytest.mark.parametrize("thread", [True, False])
def test_few_dirty_pages_wait_for_the_next_round(tmp_path: object, thread: bool) -> None:
    cfg = small_config(str(tmp_path), mappedFileSizeCommitLog=1 << 20)
    s = open_store(cfg) if thread else _open_without_flush_thread(cfg)
    try:
        assert (s.commitlog.flush_service.thread is not None) is thread
        assert s.put_message(msg("T", b"tiny"), 1).ok  # < flushCommitLogLeastPages pages dirty
        before = s.commitlog.flushed_offset
        s.tick(1_000 + s.cfg.flushIntervalCommitLog)
        threading.Event().wait(0.05)
        assert s.commitlog.flushed_offset == before  # nothing flushed, no round pending
        assert s.commitlog.flush_service.flush_target <= s.commitlog.flushed_offset
        th = s.commitlog.flush_service.thread
        assert th is None or th.rounds == 0
        end = s.commitlog.max_offset
    finally:
        s.shutdown(10**9)
    assert s.commitlog.flushed_offset == end  # shutdown flushes the rest


def test_flush_thread_never_passes_the_written_offset(tmp_path: object) -> None:
    s = open_store(small_config(str(tmp_path), mappedFileSizeCommitLog=1 << 20))
    fl = s.commitlog.flush_service.thread
    assert fl is not None
    fl._msync = gated = GatedCall(fl._msync)
    gate, inside = gated.gate, gated.inside
    try:
        cl = s.commitlog
        body = bytes(4096)
        for i in range(8):
            assert s.put_message(msg("T", body), 1 + i).ok
        first = cl.max_offset
        s.tick(1_000 + s.cfg.flushIntervalCommitLog)  # a round starts on the flush thread
        assert inside.wait(10)
        for i in range(8):  # appends while the round is inside fdatasync
            assert s.put_message(msg("T", body), 10 + i).ok
            assert cl.flushed_offset <= cl.max_offset
            assert s.state is not None and s.state.get(OFF_FLUSHED_PHY) <= s.state.max_phy
        gate.set()
        _wait_flushed(s, first)
        assert cl.flushed_offset == first < cl.max_offset  # only what was there at the start
        assert s.state.get(OFF_FLUSHED_PHY) == first
        s.tick(1_000 + 2 * s.cfg.flushIntervalCommitLog)  # the next round covers the rest
        _wait_flushed(s, cl.max_offset)
        assert cl.flushed_offset == cl.max_offset
        th = s.commitlog.flush_service.thread
        assert th is not None and th.rounds == 2
    finally:
        gate.set()
        s.shutdown(10**9)


def _wait_rounds(fl: object, n: int) -> None:
    for _ in range(10_000):  # bounded: a round of a few pages takes milliseconds
        if getattr(fl, "rounds", 0) >= n:
            return
        threading.Event().wait(0.001)


def test_consume_queue_msync_runs_off_the_writers_thread(tmp_path: object) -> None:
    """A consume-queue msync stuck in the kernel (writeback) holds up neither put nor tick."""
    cfg = small_config(str(tmp_path), mappedFileSizeCommitLog=1 << 20,
                       mappedFileSizeConsumeQueue=20 * 4096)  # fmt: skip
    s = open_store(cfg)
    cqf = s.cq_flush.thread
    assert cqf is not None
    cqf._msync = gated = GatedCall(cqf._msync)
    gate, inside = gated.gate, gated.inside
    try:
        for i in range(500):  # > flushConsumeQueueLeastPages pages of units
            assert s.put_message(msg("T", b"x"), 1 + i).ok
        s.tick(1_000 + s.cfg.flushIntervalConsumeQueue)
        assert inside.wait(10)  # the round is inside msync, on its thread
        for i in range(50):  # the writer goes on meanwhile
            assert s.put_message(msg("T", b"y"), 600 + i).ok
        s.tick(1_000 + s.cfg.flushIntervalConsumeQueue + 1)
        cq = s.consume_queues[("T", 0)]
        assert cq.get_max_offset_in_queue() == 550
        assert cqf.rounds == 0
        gate.set()
        _wait_rounds(cqf, 1)
        assert cqf.rounds == 1
        flushed = cq.mfq.files[0].flushed_position
        assert 500 * 20 <= flushed <= 550 * 20
    finally:
        gate.set()
        s.shutdown(10**9)


@pytest.mark.parametrize("thread", [True, False])
def test_logics_timestamp_waits_for_a_round_that_left_nothing_dirty(
    tmp_path: object, thread: bool
) -> None:
    cfg = small_config(str(tmp_path), mappedFileSizeCommitLog=1 << 20,
                       mappedFileSizeConsumeQueue=20 * 4096)  # fmt: skip
    s = open_store(cfg) if thread else _open_without_flush_thread(cfg)
    try:
        assert (s.cq_flush.thread is not None) is thread
        assert s.put_message(msg("T", b"one"), 5_000).ok  # one unit: < least pages dirty
        cp = s.checkpoint
        assert cp is not None
        before = cp.logics_msg_timestamp
        s.tick(1_000 + s.cfg.flushIntervalConsumeQueue)  # a round that skips the queue
        if thread:
            _wait_rounds(s.cq_flush.thread, 1)
        cq = s.consume_queues[("T", 0)]
        assert cq.mfq.files[0].flushed_position == 0
        assert cp.logics_msg_timestamp == before  # its unit is not on disk yet
        s.tick(1_000 + s.cfg.flushConsumeQueueThoroughInterval)  # thorough: every dirty page
        if thread:
            _wait_rounds(s.cq_flush.thread, 2)
        assert cq.mfq.files[0].flushed_position == 20
        assert cp.logics_msg_timestamp == 5_000
    finally:
        s.shutdown(10**9)
