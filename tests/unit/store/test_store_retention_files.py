"""Retention, config files with .bak, group commit."""

from __future__ import annotations

import os
import threading
import time

from store.config_files import read_json_with_bak, write_text_atomic
from store.flush_service import GroupCommit
from store.get_message_result import GetMessageStatus
from tests.unit.store.store_helpers import msg, open_store, small_config, split_records

HOUR = 3_600_000
# a fixed local-time instant at 04:xx and one at 10:xx
BASE = int(time.mktime((2024, 1, 2, 4, 30, 0, 0, 0, -1))) * 1000
NOON = int(time.mktime((2024, 1, 2, 10, 30, 0, 0, 0, -1))) * 1000


def _fill(s, n, ts):
    for i in range(n):
        s.put_message(msg(body=b"r" * 400, qid=i % 2, keys=f"k{i}"), ts)


def test_retention_deletes_only_expired_at_delete_hour(tmp_path):
    cfg = small_config(str(tmp_path), fileReservedTime=1)
    s = open_store(cfg, BASE - 10 * HOUR)
    s.disk_usage = lambda _p: 0.1
    _fill(s, 100, BASE - 10 * HOUR)  # old data: several files
    _fill(s, 100, BASE)  # fresh data
    n_files = len(s.commitlog.mfq.files)
    assert s.clean_expired(NOON) == 0  # not the delete hour, disk fine
    deleted = s.clean_expired(BASE + 1)
    assert deleted > 0 and len(s.commitlog.mfq.files) == n_files - deleted
    min_phy = s.min_phy_offset
    for qid in (0, 1):
        lo = s.get_min_offset_in_queue("T", qid)
        u = s.consume_queue("T", qid).get_unit(lo)
        assert u[0] >= min_phy
        res = s.get_message("g", "T", qid, 0, 32)
        assert res.status is GetMessageStatus.OFFSET_TOO_SMALL and res.next_begin_offset == lo
    # every fresh message survives
    assert s.get_max_offset_in_queue("T", 0) == 100
    assert s.check() == []
    s.shutdown(BASE + 2)
    s = open_store(cfg, BASE + 3)  # recovery after retention
    assert s.min_phy_offset == min_phy and s.check() == []
    res = s.get_message("g", "T", 0, s.get_min_offset_in_queue("T", 0), 32)
    assert res.status is GetMessageStatus.FOUND
    s.close_abruptly()
    s = open_store(cfg, BASE + 4)  # abnormal recovery after retention
    assert s.min_phy_offset == min_phy and s.check() == []
    s.shutdown(BASE + 5)


def test_retention_disk_full_and_forced(tmp_path):
    cfg = small_config(str(tmp_path), fileReservedTime=1000)
    s = open_store(cfg, NOON)
    _fill(s, 150, NOON)
    n = len(s.commitlog.mfq.files)
    s.disk_usage = lambda _p: 0.80  # above diskMaxUsedSpaceRatio, below the forced level
    assert s.clean_expired(NOON + 1) == 0  # nothing old enough
    s.disk_usage = lambda _p: 0.95  # forced clean: delete regardless of age (not the last file)
    deleted = s.clean_expired(NOON + 2)
    assert 0 < deleted <= 10 and len(s.commitlog.mfq.files) == n - deleted
    assert s.check() == []
    s.shutdown(NOON + 3)


def test_config_files_atomic_with_bak(tmp_path):
    p = str(tmp_path / "config" / "topics.json")
    assert read_json_with_bak(p) is None
    write_text_atomic(p, '{"a": 1}')
    write_text_atomic(p, '{"a": 2}')
    assert read_json_with_bak(p) == '{"a": 2}'
    with open(p + ".bak") as f:
        assert f.read() == '{"a": 1}'
    with open(p, "w") as f:
        f.write('{"a": ')  # corrupt main file
    assert read_json_with_bak(p) == '{"a": 1}'
    os.unlink(p)
    assert read_json_with_bak(p) == '{"a": 1}'
    fastjson = '{\n\t"offsetTable":{"T@g":{0:12,1:3}}\n}'
    write_text_atomic(p, fastjson)
    assert read_json_with_bak(p) == fastjson
    assert not os.path.exists(p + ".tmp")


def test_group_commit_many_threads(tmp_path):
    cfg = small_config(str(tmp_path), flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20)
    s = open_store(cfg)
    gc = GroupCommit(s, timeout_s=10)
    results = []
    lock = threading.Lock()

    def writer(t):
        for i in range(20):
            r = gc.put_and_wait(msg(body=f"{t}-{i}".encode(), qid=t % 4), 1_000)
            with lock:
                results.append((r.ok, r.end_offset <= s.flushed_offset))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    gc.close()
    assert not any(t.is_alive() for t in threads)
    assert len(results) == 320 and all(ok and covered for ok, covered in results)
    assert gc.fsyncs < 320  # many records per fsync
    assert sum(s.get_max_offset_in_queue("T", q) for q in range(4)) == 320
    assert len(split_records(s.get_message("g", "T", 0, 0, 32).buffer)) == 32
    s.shutdown(2_000)


def test_tick_flushes_and_schedules(tmp_path):
    cfg = small_config(str(tmp_path))
    s = open_store(cfg, 0)
    s.put_message(msg(), 10)
    assert s.flushed_offset == 0
    wait = s.tick(600)
    assert s.flushed_offset == 0 or s.flushed_offset == s.max_phy_offset
    s.tick(20_000)  # thorough flush interval passed: a round on the flush thread
    for _ in range(10_000):  # bounded: one page takes milliseconds
        if s.flushed_offset == s.max_phy_offset:
            break
        threading.Event().wait(0.001)
    assert s.flushed_offset == s.max_phy_offset
    assert 1 <= wait <= cfg.cleanResourceInterval
    assert s.checkpoint.physic_msg_timestamp == 10
    s.shutdown(30_000)


def test_retention_unlinks_on_a_thread(tmp_path, monkeypatch):
    """An unlink that takes long (a big file's cached pages being dropped) holds up neither
    clean_expired nor the puts after it; the files are gone once the deleter is joined."""
    from store import allocate_service

    gate = threading.Event()
    started = threading.Event()
    real_unlink = os.unlink

    def slow_unlink(path):
        if os.sep + "commitlog" + os.sep in path:
            started.set()
            gate.wait(10)
        real_unlink(path)

    monkeypatch.setattr(allocate_service.os, "unlink", slow_unlink)
    cfg = small_config(str(tmp_path), fileReservedTime=1000)
    s = open_store(cfg, NOON)
    try:
        _fill(s, 150, NOON)
        before = sorted(f.path for f in s.commitlog.mfq.files)
        s.disk_usage = lambda _p: 0.95  # forced clean
        deleted = s.clean_expired(NOON + 2)
        assert deleted > 0 and started.wait(10)
        gone = before[:deleted]
        assert all(os.path.exists(p) for p in gone)  # the unlinks are still waiting
        _fill(s, 5, NOON + 3)  # the writer goes on meanwhile
        gate.set()
        s.clean_commitlog.deleter.join()
        assert not any(os.path.exists(p) for p in gone)
        assert s.clean_commitlog.deleter.deleted == deleted and s.check() == []
    finally:
        gate.set()
        s.shutdown(NOON + 4)
