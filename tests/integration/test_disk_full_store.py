"""The store on a disk that fills up (issue #20), on a small tmpfs the test mounts: a file that
cannot be made refuses the put with nothing written (CREATE_MAPEDFILE_FAILED), at most one
try per CREATE_RETRY_MS; the disk check refuses puts above the warning level
(SERVICE_NOT_AVAILABLE); a lagging index waits for space; every acknowledged message stays
readable, the store checks clean and recovers, and puts are accepted again once space is freed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.message_batch import BatchItem, encode_batch
from store.message_ext_broker_inner import MessageExtBatch
from store.message_store import CREATE_RETRY_MS, DefaultMessageStore
from store.put_message_result import PutMessageStatus
from tests.unit.store.store_helpers import msg, pull_all, small_config

pytestmark = pytest.mark.integration

KiB = 1024
MiB = 1024 * KiB
BODY = 1000
MAX_PUTS = 10_000


def _fill(path: Path) -> None:
    """Take every free byte of the file system holding path (write until ENOSPC)."""
    chunk = bytes(64 * KiB)
    with open(path, "wb", buffering=0) as f:
        for _ in range(100_000):
            try:
                f.write(chunk)
            except OSError:
                break
        for _ in range(100):  # the last pages, a byte at a time would be 4096 tries: 512 B
            try:
                f.write(bytes(512))
            except OSError:
                break


def _open(root: Path, now_ms: int, **kw: object) -> DefaultMessageStore:
    cfg = small_config(str(root), **kw)
    s = DefaultMessageStore(cfg)
    s.flush_thread_enabled = False  # the writer's thread does it all: every step is this test's
    s.load(now_ms)
    s.start(now_ms)
    return s


def _body(i: int) -> bytes:
    return f"{i:08d}".encode() * (BODY // 8)


def _files(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if len(n) == 20 and n.isdigit())


def _assert_bodies(s: DefaultMessageStore, acked: dict[int, list[bytes]]) -> None:
    for qid, bodies in acked.items():
        got = pull_all(s, "T", qid, MAX_PUTS)
        assert [b for _, b in got] == bodies, qid
        assert [o for o, _ in got] == list(range(len(bodies)))


def test_commitlog_file_that_cannot_be_made(tmpfs_mount: Callable[[int], Path]) -> None:
    disk = tmpfs_mount(4 * MiB)
    now = 1_000_000
    s = _open(disk / "store", now, mappedFileSizeCommitLog=256 * KiB,
              mappedFileSizeConsumeQueue=20 * 1024, maxHashSlotNum=64, maxIndexNum=4096)
    acked: dict[int, list[bytes]] = {0: [], 1: []}
    try:
        for i in range(2):  # each queue's (and the index's) file made before the disk fills
            assert s.put_message(msg(body=_body(i), qid=i, uniq=f"U{i}"), now).ok
            acked[i].append(_body(i))
        _fill(disk / "filler")
        cl_dir = disk / "store" / "commitlog"
        status = PutMessageStatus.PUT_OK
        i = 2
        while i < MAX_PUTS:
            before = (s.commitlog.max_offset, dict(s.topic_queue_table), _files(cl_dir))
            r = s.put_message(msg(body=_body(i), qid=i % 2, uniq=f"U{i}"), now)
            status = r.status
            if not r.ok:
                break
            acked[i % 2].append(_body(i))
            i += 1
        assert status is PutMessageStatus.CREATE_MAPEDFILE_FAILED
        assert i > 200  # the file being written and the one made ahead were filled first
        # nothing of the refused put: same end, same queue offsets, no file half made
        assert (s.commitlog.max_offset, dict(s.topic_queue_table), _files(cl_dir)) == before
        assert s.put_message(msg(body=_body(i), qid=0), now + CREATE_RETRY_MS - 1).status is (
            PutMessageStatus.CREATE_MAPEDFILE_FAILED)  # no new try inside the window
        _assert_bodies(s, acked)
        assert s.check() == []

        (disk / "filler").unlink()
        assert s.put_message(msg(body=_body(i), qid=0), now + 1).status is (
            PutMessageStatus.CREATE_MAPEDFILE_FAILED)  # space, but the window is not over
        r = s.put_message(msg(body=_body(i), qid=i % 2, uniq=f"U{i}"), now + CREATE_RETRY_MS)
        assert r.ok, r
        acked[i % 2].append(_body(i))
        _assert_bodies(s, acked)
        assert s.check() == []
    finally:
        s.shutdown(now)
    s = _open(disk / "store", now + 10, mappedFileSizeCommitLog=256 * KiB,
              mappedFileSizeConsumeQueue=20 * 1024, maxHashSlotNum=64, maxIndexNum=4096)
    try:
        _assert_bodies(s, acked)
        assert s.check() == []
    finally:
        s.shutdown(now + 20)


def test_consume_queue_file_that_cannot_be_made(tmpfs_mount: Callable[[int], Path]) -> None:
    """A unit at a consume-queue file's start, and a batch whose units cross into the next
    file: both refused with nothing written when the file cannot be made."""
    disk = tmpfs_mount(4 * MiB)
    now = 2_000_000
    units = 64
    kw = dict(mappedFileSizeCommitLog=1 * MiB, mappedFileSizeConsumeQueue=20 * units,
              maxHashSlotNum=64, maxIndexNum=4096, messageIndexEnable=False)  # fmt: skip
    s = _open(disk / "store", now, **kw)
    acked: dict[int, list[bytes]] = {0: []}
    try:
        for i in range(units - 3):  # the queue's first file: 3 units left
            assert s.put_message(msg(body=_body(i), qid=0), now).ok
            acked[0].append(_body(i))
        _fill(disk / "filler")
        items = [BatchItem(body=_body(100 + k), properties={}) for k in range(5)]
        batch = MessageExtBatch(topic="T", body=encode_batch(items), queue_id=0,
                                born_timestamp=1)  # fmt: skip
        end = s.commitlog.max_offset
        assert s.put_messages(batch, now).status is PutMessageStatus.CREATE_MAPEDFILE_FAILED
        assert s.commitlog.max_offset == end and s.get_max_offset_in_queue("T", 0) == units - 3
        for i in range(units - 3, units):  # what fits the first file still goes in
            r = s.put_message(msg(body=_body(i), qid=0), now + CREATE_RETRY_MS * 2)
            assert r.ok, r
            acked[0].append(_body(i))
        r = s.put_message(msg(body=b"x", qid=0), now + CREATE_RETRY_MS * 4)
        assert r.status is PutMessageStatus.CREATE_MAPEDFILE_FAILED  # the next file's first unit
        assert s.commitlog.max_offset > end and s.get_max_offset_in_queue("T", 0) == units
        _assert_bodies(s, acked)
        assert s.check() == []
        (disk / "filler").unlink()
        assert s.put_messages(batch, now + CREATE_RETRY_MS * 6).ok
        acked[0] += [it.body for it in items]
        _assert_bodies(s, acked)
        assert s.check() == []
    finally:
        s.shutdown(now)


def test_disk_check_marks_full_and_ok_once(tmpfs_mount: Callable[[int], Path],
                                           caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    disk = tmpfs_mount(4 * MiB)
    now = 3_000_000
    s = _open(disk / "store", now, mappedFileSizeCommitLog=256 * KiB,
              mappedFileSizeConsumeQueue=20 * 1024, maxHashSlotNum=64, maxIndexNum=4096,
              cleanResourceInterval=100, cleanFileForciblyEnable=False)  # fmt: skip
    try:
        assert s.put_message(msg(body=_body(0), qid=0), now).ok
        with open(disk / "filler", "wb") as f:  # 95 % used: above the warning level (90 %)
            st = os.statvfs(disk)
            f.write(bytes(int(st.f_blocks * st.f_frsize * 0.95) -
                          (st.f_blocks - st.f_bfree) * st.f_frsize))  # fmt: skip
        with caplog.at_level(logging.INFO, logger="store.clean_service"):
            assert s.put_message(msg(body=_body(1), qid=0), now).ok  # not checked yet
            for t in range(now + 100, now + 1100, 100):
                s.tick(t)
                r = s.put_message(msg(body=b"x", qid=0), t)
                assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
            (disk / "filler").unlink()
            s.tick(now + 1200)
            assert s.put_message(msg(body=_body(2), qid=0), now + 1200).ok
            s.tick(now + 1300)
        lines = [r.getMessage() for r in caplog.records]
        assert len([m for m in lines if "so mark disk full" in m]) == 1, lines
        assert len([m for m in lines if "so mark disk ok" in m]) == 1, lines
        _assert_bodies(s, {0: [_body(0), _body(1), _body(2)]})
    finally:
        s.shutdown(now)


def test_index_waits_for_space(tmpfs_mount: Callable[[int], Path]) -> None:
    """"tick" index: its first file cannot be made on a full disk: puts go on, queries by key
    scan the unindexed tail, and the index catches up once space is freed."""
    disk = tmpfs_mount(8 * MiB)
    now = 4_000_000
    root = disk / "store"
    kw = dict(mappedFileSizeCommitLog=512 * KiB, mappedFileSizeConsumeQueue=20 * 1024,
              maxHashSlotNum=1_000_000, maxIndexNum=4096, messageIndexDispatch="tick")
    filler = disk / "filler"
    with open(filler, "wb") as f:  # the slot table (4 MB) cannot be allocated after this
        f.write(bytes(5 * MiB))
    s = _open(root, now, **kw)  # starts: only the index waits
    try:
        assert not s.index.files and s.index.error
        for i in range(20):
            assert s.put_message(msg(body=_body(i), qid=0, keys=f"key{i}"), now + i).ok
        s.tick(now + 100)
        assert s.indexed_offset == 0
        res = s.query_message("T", "key7", 32, 0, now + 1000)
        assert len(res.phy_offsets) == 1  # found in the commit-log tail
        filler.unlink()
        s.tick(now + 100 + 500)  # inside the retry interval: not tried again yet
        assert not s.index.files
        s.tick(now + 100 + 1000)
        assert s.index.files and not s.index.error
        assert s.indexed_offset == s.commitlog.max_offset
        assert s.index.query(b"T#key7", 32, 0, now + 1000) == res.phy_offsets
    finally:
        s.shutdown(now)


def test_index_follower_waits_for_space(tmpfs_mount: Callable[[int], Path]) -> None:
    """The broker's index owner (IndexFollower, "process" mode): entries it cannot write are
    kept, tried again at most every INDEX_RETRY_S, and published as indexed only once written."""
    from store.index_dispatch import INDEX_RETRY_S, IndexFollower
    from tests.integration.e2e_helpers import wait_until

    disk = tmpfs_mount(8 * MiB)
    now = 5_000_000
    kw = dict(mappedFileSizeCommitLog=512 * KiB, mappedFileSizeConsumeQueue=20 * 1024,
              maxHashSlotNum=1_000_000, maxIndexNum=4096, messageIndexDispatch="process",
              messageIndexProcessSpawn=False)  # fmt: skip
    s = _open(disk / "store", now, **kw)
    follower = IndexFollower(s.cfg)
    try:
        assert follower.open()
        with open(disk / "filler", "wb") as f:  # the slot table (4 MB) cannot be allocated
            f.write(bytes(5 * MiB))
        for i in range(20):
            assert s.put_message(msg(body=_body(i), qid=0, keys=f"key{i}"), now + i).ok
        assert follower.step() == 20  # walked, but nothing written
        assert follower.next_phy == 0 and s.indexed_offset == 0 and follower.index.error
        assert follower.step() == 0  # inside the retry interval: not tried
        (disk / "filler").unlink()
        assert wait_until(lambda: follower.step() >= 0 and follower.next_phy > 0,
                          INDEX_RETRY_S * 3, 0.05)  # fmt: skip
        assert follower.next_phy == s.commitlog.max_offset == s.indexed_offset
        assert not follower.index.error
        phys = follower.index.query(b"T#key7", 32, 0, now + 1000)
        assert phys == s.query_message("T", "key7", 32, 0, now + 1000).phy_offsets
        assert len(phys) == 1
    finally:
        s.shutdown(now + 100)
        follower.close()
