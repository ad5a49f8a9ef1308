"""Warming of commit-log files: SYNC_FLUSH msyncs while warming; the preallocated file is reused."""

from __future__ import annotations

import mmap
import os

from store.mapped_file import OS_PAGE_SIZE, MappedFile
from store.mapped_file_queue import MappedFileQueue
from store.message_store import DefaultMessageStore
from tests.unit.store.store_helpers import GatedCall, msg, open_store, pull_all, small_config


class _SpyMap:
    """Stands in for a MappedFile's mmap: records madvise/flush ranges, forwards everything."""

    def __init__(self, mm: mmap.mmap) -> None:
        self.mm = mm
        self.flushes: list[tuple[int, int]] = []
        self.populated: list[tuple[int, int]] = []

    def madvise(self, option: int, start: int, length: int) -> None:
        self.populated.append((start, length))
        self.mm.madvise(option, start, length)

    def flush(self, start: int = 0, length: int = 0) -> None:
        self.flushes.append((start, length))
        self.mm.flush(start, length)

    def __setitem__(self, key: slice, value: bytes) -> None:
        self.mm[key] = value


def _mapped(tmp_path: object, pages: int) -> MappedFile:
    path = os.path.join(str(tmp_path), f"{0:020d}")
    return MappedFile(path, pages * OS_PAGE_SIZE, writable=True, create=True)


def test_warm_with_flush_pages_msyncs_every_chunk_and_keeps_written_bytes(tmp_path: object) -> None:
    mf = _mapped(tmp_path, 16)
    mf.mm[0:5000] = b"\x07" * 5000
    mf.wrote_position = 5000
    real = mf.mm
    spy = _SpyMap(real)
    mf.mm = spy  # type: ignore[assignment]
    mf.warm(flush_pages=4)
    mf.mm = real
    first = OS_PAGE_SIZE  # the page holding the wrote position onward
    step = 4 * OS_PAGE_SIZE
    want = [(s, min(step, 16 * OS_PAGE_SIZE - s)) for s in range(first, 16 * OS_PAGE_SIZE, step)]
    assert spy.flushes == want
    if spy.populated:  # MADV_POPULATE_WRITE available: the same chunks
        assert spy.populated == want
    assert bytes(real[0:5000]) == b"\x07" * 5000
    assert real[5000 : 16 * OS_PAGE_SIZE] == bytes(16 * OS_PAGE_SIZE - 5000)
    mf.close()


def test_warm_without_flush_pages_does_not_msync(tmp_path: object) -> None:
    mf = _mapped(tmp_path, 8)
    real = mf.mm
    spy = _SpyMap(real)
    mf.mm = spy  # type: ignore[assignment]
    mf.warm()
    mf.mm = real
    assert spy.flushes == []
    mf.close()


def test_preallocated_next_file_is_reused_without_a_second_warm(tmp_path: object) -> None:
    q = MappedFileQueue(str(tmp_path), 4 * OS_PAGE_SIZE, warm=True, warm_flush_pages=2)
    first = q.get_last_mapped_file(0)
    assert first is not None
    q.preallocate_next()
    nxt = q._next
    assert nxt is not None and nxt.file_from_offset == 4 * OS_PAGE_SIZE
    q.preallocate_next()  # already there: kept, not remapped
    assert q._next is nxt
    first.wrote_position = first.file_size
    rolled = q.get_last_mapped_file(first.file_end_offset)
    assert rolled is nxt and q._next is None
    assert [mf.file_from_offset for mf in q.files] == [0, 4 * OS_PAGE_SIZE]
    q.close()


def test_flush_disk_type_decides_warm_flush_pages(tmp_path: object) -> None:
    for kind, want in (("SYNC_FLUSH", 4096), ("ASYNC_FLUSH", 0)):
        s = open_store(small_config(os.path.join(str(tmp_path), kind), flushDiskType=kind))
        assert s.commitlog.mfq.warm_flush_pages == want
        s.shutdown(2_000)


def test_sync_flush_store_rolls_onto_preallocated_files_and_reads_back(tmp_path: object) -> None:
    cfg = small_config(
        str(tmp_path), flushDiskType="SYNC_FLUSH", flushLeastPagesWhenWarmMapedFile=1
    )
    s = open_store(cfg)
    bodies = [bytes([i % 251]) * (300 + i) for i in range(120)]  # ~50 KiB: several 16 KiB files
    for i, b in enumerate(bodies):
        r = s.put_message(msg(body=b), 1_000 + i)
        assert r.ok
        assert s.flush(1_000 + i) >= r.end_offset
        if i % 10 == 0:
            s.commitlog.mfq.preallocate_next()
    assert len(s.commitlog.mfq.files) >= 3
    s.shutdown(5_000)
    s = open_store(cfg, 6_000)
    got = [body for _off, body in pull_all(s, "T", 0, 20)]  # 32 per pull
    assert got == bodies
    s.shutdown(7_000)


def test_preallocated_next_file_is_warmed_in_slices(tmp_path: object) -> None:
    # Warming a whole segment at once stalled the single writer for hundreds of ms: the next
    # segment is mapped by preallocate_next() and warmed a slice per warm_next_step() call.
    pages = 8
    q = MappedFileQueue(str(tmp_path), pages * OS_PAGE_SIZE, warm=True, warm_flush_pages=0)
    assert q.get_last_mapped_file(0) is not None
    q.preallocate_next()
    nxt = q._next
    assert nxt is not None
    spy = _SpyMap(nxt.mm)
    nxt.mm = spy  # type: ignore[assignment]
    steps = 0
    while q.warm_next_step(3 * OS_PAGE_SIZE):
        steps += 1
        assert steps < pages  # bounded
    assert steps == 2  # 3 + 3 + 2 pages: three calls, the last one returns False
    assert q.warm_next_step(3 * OS_PAGE_SIZE) is False  # nothing left
    nxt.mm = spy.mm
    q.close()


def test_store_tick_comes_back_soon_while_the_next_segment_warms(tmp_path: object) -> None:
    from store.message_store import WARM_BYTES_PER_TICK, WARM_STEP_INTERVAL_MS

    size = 4 * WARM_BYTES_PER_TICK  # the next segment needs four warm steps
    s = DefaultMessageStore(small_config(str(tmp_path), mappedFileSizeCommitLog=size))
    s.flush_thread_enabled = False  # no allocate thread: the tick warms in slices
    s.load(1_000)
    s.start(1_000)
    try:
        s.put_message(msg("T", b"x"), 1)
        mfq = s.commitlog.mfq
        assert mfq._next is not None and mfq._next_warmed == size  # start() warms it whole
        mfq._next_warmed = 0  # as a later preallocation (from tick) leaves it: not warmed yet
        waits = [s.tick(t) for t in range(2, 6)]
        assert all(w <= WARM_STEP_INTERVAL_MS for w in waits[:3]), waits
        assert mfq._next_warmed == size
        assert s.tick(7) > WARM_STEP_INTERVAL_MS  # warm-up done: back to the periodic waits
    finally:
        s.shutdown(10_000)


def test_allocate_thread_makes_and_warms_the_next_segment_off_the_writers_thread(
    tmp_path: object,
) -> None:
    """After a roll the segment after it is created and warmed by AllocateMappedFileService; a
    warm-up stuck in the kernel holds up neither puts nor ticks."""
    import threading

    from store.message_store import WARM_STEP_INTERVAL_MS

    size = 64 * OS_PAGE_SIZE
    s = open_store(small_config(str(tmp_path), mappedFileSizeCommitLog=size))
    gate = threading.Event()
    inside = threading.Event()
    try:
        alloc = s.commitlog.allocator
        assert alloc is not None
        alloc.chunk = 16 * OS_PAGE_SIZE  # four chunks per segment
        alloc._madvise = gated = GatedCall(alloc._madvise)
        gate, inside = gated.gate, gated.inside
        mfq = s.commitlog.mfq
        second = mfq._next  # made and warmed whole by start()
        assert second is not None
        body = bytes(8 * OS_PAGE_SIZE)
        i = 0
        while len(mfq.files) < 2 and i < 100:  # bounded: ~8 records fill a segment
            assert s.put_message(msg("T", body), 10 + i).ok
            i += 1
        assert mfq.files[1] is second  # the writer rolled into the preallocated segment
        assert inside.wait(10)  # the thread made the third one and is warming it
        third = mfq._next
        assert third is not None and third.file_from_offset == 2 * size
        for k in range(3):  # the writer goes on meanwhile, and no tick waits for warming
            assert s.put_message(msg("T", b"y"), 200 + k).ok
            assert s.tick(1_001 + k) > WARM_STEP_INTERVAL_MS
        assert mfq._next_warmed < size
        gate.set()
        for _ in range(10_000):  # bounded
            if mfq._next_warmed >= size:
                break
            threading.Event().wait(0.001)
        assert mfq._next_warmed == size and alloc.warmed_bytes >= size
    finally:
        gate.set()
        s.shutdown(10_000)
