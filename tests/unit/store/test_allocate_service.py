"""store.allocate_service.AllocateMappedFileService on a kernel without MADV_POPULATE_WRITE."""

from __future__ import annotations

import os
from typing import Any

from store.allocate_service import AllocateMappedFileService
from store.mapped_file import OS_PAGE_SIZE, MappedFile, offset2file_name
from store.mapped_file_queue import MappedFileQueue


def test_fallback_touch_never_writes_into_a_segment_the_writer_took(tmp_path: Any) -> None:
    """The fallback writes a zero byte per page above the wrote position; done on the thread
    while the writer appends to the same segment, an append landing between the two would be
    overwritten. It must touch only a segment not taken yet, holding next_lock meanwhile."""
    size = 16 * OS_PAGE_SIZE
    d = str(tmp_path)
    mfq = MappedFileQueue(d, size, warm=True)
    first = mfq.get_last_mapped_file(0)
    assert first is not None
    touched: list[tuple[int, bool, bool]] = []

    class Spy(MappedFile):
        def warm_range(self, start: int, limit: int, flush_pages: int = 0) -> None:
            touched.append((start, mfq._next is self, mfq.next_lock.locked()))
            super().warm_range(start, limit, flush_pages)

    nxt = Spy(os.path.join(d, offset2file_name(size)), size, create=True)
    mfq._next, mfq._next_warmed = nxt, 0
    calls = {"n": 0}
    record = b"\x55" * (3 * OS_PAGE_SIZE)

    def no_populate(addr: int, n: int, flags: int) -> int:
        calls["n"] += 1
        if calls["n"] == 2:  # the writer rolls into the segment after the first chunk
            first.wrote_position = size
            taken = mfq.get_last_mapped_file(size)
            assert taken is nxt and mfq._next is None
            nxt.mm[0 : len(record)] = record
            nxt.wrote_position = len(record)
        return -1  # EINVAL: advice unknown to this kernel

    alloc = AllocateMappedFileService(mfq, no_populate, chunk=4 * OS_PAGE_SIZE)
    try:
        alloc.run_once()
    finally:
        alloc.close()
    assert touched == [(0, True, True)]  # the first chunk only, under the lock, before the roll
    assert nxt.mm[0 : len(record)] == record
    mfq.close()


def test_warming_stops_once_the_writer_took_the_segment(tmp_path: Any) -> None:
    """With MADV_POPULATE_WRITE working, the thread warms chunk by chunk; once the writer rolls
    into the segment it stops (further warming would only compete with the appends)."""
    size = 16 * OS_PAGE_SIZE
    mfq = MappedFileQueue(str(tmp_path), size, warm=True)
    first = mfq.get_last_mapped_file(0)
    assert first is not None
    nxt = MappedFile(os.path.join(str(tmp_path), offset2file_name(size)), size, create=True)
    mfq._next, mfq._next_warmed = nxt, 0
    chunks: list[int] = []

    def populate(addr: int, n: int, flags: int) -> int:
        chunks.append(n)
        if len(chunks) == 1:  # the writer takes the segment during the first chunk
            first.wrote_position = size
            assert mfq.get_last_mapped_file(size) is nxt
        return 0

    alloc = AllocateMappedFileService(mfq, populate, chunk=4 * OS_PAGE_SIZE)
    try:
        alloc.run_once()
    finally:
        alloc.close()
    assert len(chunks) == 1  # not the other three
    mfq.close()
