"""Room made before a put writes (issue #20): a consume queue's next file made ahead for a batch
whose units cross into it. Until the units get there, the file is empty behind one that is not
full: readers and recovery must not count the missing units as written."""

from __future__ import annotations

import os

from store.message_ext_broker_inner import MessageExtBatch
from store.message_store import DefaultMessageStore
from store.message_store_reader import MessageStoreReader
from tests.unit.store.store_helpers import msg, open_store, pull_all, small_config

UNITS = 64  # per consume-queue file


def _cfg(root: str):  # type: ignore[no-untyped-def]
    return small_config(root, mappedFileSizeCommitLog=64 * 1024,
                        mappedFileSizeConsumeQueue=20 * UNITS)  # fmt: skip


def test_file_made_ahead_is_not_counted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = _cfg(str(tmp_path / "s"))
    s = open_store(cfg)
    bodies = [b"m%03d" % i for i in range(UNITS - 4)]
    for b in bodies:
        assert s.put_message(msg(body=b), 2_000).ok
    cq = s.consume_queues[("T", 0)]
    assert not cq.has_room(UNITS - 4, 10) and cq.has_room(UNITS - 4, 4)
    cq.reserve(UNITS - 4, 10)  # a batch of 10 would cross: the next file is made now
    assert len(cq.mfq.files) == 2 and cq.has_room(UNITS - 4, 10)
    rd = MessageStoreReader(cfg)
    try:
        assert rd.get_max_offset_in_queue("T", 0) == UNITS - 4  # not the empty file's start
        assert [b for _, b in pull_all(rd, "T", 0, 10)] == bodies
    finally:
        rd.close()
    s.close_abruptly()  # a crash right after the reservation

    s = DefaultMessageStore(cfg)
    s.load(3_000)
    s.start(3_000)
    try:
        cq = s.consume_queues[("T", 0)]
        assert len(cq.mfq.files) == 1  # the empty file behind a file not full is dropped
        assert s.get_max_offset_in_queue("T", 0) == UNITS - 4
        assert s.check() == []
        from protocol.message_batch import BatchItem, encode_batch

        items = [BatchItem(body=b"b%03d" % k) for k in range(10)]
        r = s.put_messages(MessageExtBatch(topic="T", body=encode_batch(items)), 4_000)
        assert r.ok and r.logics_offset == UNITS - 4 and r.msg_num == 10
        assert [b for _, b in pull_all(s, "T", 0, 10)] == bodies + [it.body for it in items]
        assert s.check() == []
    finally:
        s.shutdown(5_000)


def test_consume_queue_files_stay_sparse(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A consume-queue file (5.7 MiB by default) takes the blocks its units need, allocated a
    step ahead, not the whole file: Java's are sparse, and a broker has a file per queue."""
    from store.consume_queue import ALLOCATE_STEP, CQ_UNIT_SIZE

    size = 300_000 * CQ_UNIT_SIZE
    cfg = small_config(str(tmp_path / "s"), mappedFileSizeConsumeQueue=size)
    s = open_store(cfg)
    try:
        n = ALLOCATE_STEP // CQ_UNIT_SIZE + 10  # one step and a little
        for i in range(n):
            assert s.put_message(msg(body=b"x%d" % i), 2_000).ok
        mf = s.consume_queues[("T", 0)].mfq.files[0]
        assert mf.allocated == 2 * ALLOCATE_STEP
        st = os.stat(mf.path)
        assert st.st_size == size and st.st_blocks * 512 <= 2 * ALLOCATE_STEP
        assert [b for _, b in pull_all(s, "T", 0, n)] == [b"x%d" % i for i in range(n)]
    finally:
        s.shutdown(5_000)
