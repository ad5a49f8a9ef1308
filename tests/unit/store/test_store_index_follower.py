"""The index owner outside the writer (IndexFollower) and queries over the unindexed tail."""

from __future__ import annotations

from store import message_store_read
from store.config import StoreConfig
from store.index_dispatch import IndexFollower
from store.message_store_reader import MessageStoreReader
from tests.unit.store.store_helpers import fill_keyed as _fill
from tests.unit.store.store_helpers import open_store, small_config

FOREVER = 10**13


def _cfg(root: str) -> StoreConfig:
    return small_config(
        root, messageIndexDispatch="process", messageIndexProcessSpawn=False, maxIndexNum=400
    )


def test_default_mode_is_sync_for_a_bare_store(tmp_path):
    cfg = small_config(str(tmp_path))
    assert cfg.messageIndexDispatch == ""
    assert cfg.index_mode == "sync"
    assert StoreConfig(storePathRootDir=str(tmp_path), messageIndexEnable=False).index_mode == "off"


def test_query_finds_unindexed_tail_then_follower_indexes_it(tmp_path):
    cfg = _cfg(str(tmp_path))
    s = open_store(cfg)
    reader = MessageStoreReader(cfg)
    try:
        phys = _fill(s, 30, 1_000, "a")
        assert reader.indexed_offset < reader.max_phy_offset  # nobody indexes yet
        # found by scanning the commit-log tail, by the writer and by a reader
        for view in (s, reader):
            assert view.query_message("T", "ak7", 10, 0, FOREVER).phy_offsets == [phys[7]]
            assert sorted(view.query_message("T", "common", 100, 0, FOREVER).phy_offsets) == phys
            assert view.query_message("T", "ak7", 10, 0, 500).phy_offsets == []  # time range
            assert len(view.query_message("T", "common", 5, 0, FOREVER).phy_offsets) == 5
        f = IndexFollower(cfg)
        assert f.open()
        assert not IndexFollower(cfg).open()  # one index owner at a time
        assert f.step() == 30
        assert reader.indexed_offset == reader.max_phy_offset == f.next_phy
        more = _fill(s, 10, 2_000, "b")  # half indexed, half in the tail: no duplicates
        f.step(max_records=5)
        assert reader.indexed_offset < reader.max_phy_offset
        got = reader.query_message("T", "common", 100, 0, FOREVER).phy_offsets
        assert sorted(got) == phys + more
        s.shutdown(3_000)
        f.close(drain=True)  # after the writer's shutdown: drains to its final offset
    finally:
        reader.close()
    s = open_store(cfg, 4_000)
    assert s.indexed_offset == s.max_phy_offset
    f = IndexFollower(cfg)
    assert f.open(wait_s=1.0)
    try:
        assert f.step() == 0  # nothing indexed twice
        assert len(s.index.query(b"T#common", 100, 0, FOREVER)) == 40
        assert s.check() == []
    finally:
        s.shutdown(5_000)
        f.close()


def test_tail_scan_is_bounded(tmp_path, monkeypatch):
    cfg = _cfg(str(tmp_path))
    s = open_store(cfg)
    try:
        phys = _fill(s, 20, 1_000, "c")
        monkeypatch.setattr(message_store_read, "QUERY_TAIL_SCAN_BYTES", phys[10] - phys[0])
        got = s.query_message("T", "common", 100, 0, FOREVER).phy_offsets
        assert sorted(got) == phys[:10]
    finally:
        s.shutdown(2_000)
