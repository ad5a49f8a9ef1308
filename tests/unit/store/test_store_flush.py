"""ASYNC_FLUSH in slices: a tick msyncs at most FLUSH_BYTES_PER_TICK (store/message_store.py)."""

from __future__ import annotations

from store.message_store import FLUSH_BYTES_PER_TICK, WARM_STEP_INTERVAL_MS
from tests.unit.store.store_helpers import msg, open_store, small_config


def test_async_flush_goes_on_in_slices_until_the_round_is_done(tmp_path: object) -> None:
    size = 8 * FLUSH_BYTES_PER_TICK
    s = open_store(small_config(str(tmp_path), mappedFileSizeCommitLog=size))
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


def test_few_dirty_pages_wait_for_the_next_round(tmp_path: object) -> None:
    s = open_store(small_config(str(tmp_path), mappedFileSizeCommitLog=1 << 20))
    try:
        assert s.put_message(msg("T", b"tiny"), 1).ok  # < flushCommitLogLeastPages pages dirty
        before = s.commitlog.flushed_offset
        s.tick(1_000 + s.cfg.flushIntervalCommitLog)
        assert s.commitlog.flushed_offset == before  # nothing flushed, no round pending
        assert s._flush_target <= s.commitlog.flushed_offset
    finally:
        s.shutdown(10**9)
