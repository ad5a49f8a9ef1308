"""Index dispatch modes, encoded-properties puts, group commit and reader file discovery."""

from __future__ import annotations

import threading

import pytest

from store.message_ext_batch_encoder import MalformedBatchError
from store.message_ext_broker_inner import MessageExtBatch, MessageExtBrokerInner
from store.message_store import DefaultMessageStore
from store.message_store_reader import MessageStoreReader
from tests.unit.store.store_helpers import fill_keyed, open_store, small_config

_fill = fill_keyed


@pytest.mark.parametrize("mode", ["sync", "tick", "process"])
def test_query_by_key_in_every_index_mode(tmp_path, mode):
    cfg = small_config(str(tmp_path), messageIndexDispatch=mode, maxIndexNum=400)
    s = open_store(cfg)
    phys = _fill(s, 60)
    if mode == "tick":
        assert s.indexed_offset < s.max_phy_offset  # lagging until tick / query
        s.tick(5_000)
    if mode == "process":
        for _ in range(20_000):  # bounded: the index process catches up in milliseconds
            if s.indexed_offset >= s.max_phy_offset:
                break
            threading.Event().wait(0.001)
    assert s.indexed_offset == s.max_phy_offset
    assert s.query_message("T", "k7", 10, 0, 10**13).phy_offsets == [phys[7]]
    assert s.query_message("T", "U000042", 10, 0, 10**13).phy_offsets == [phys[42]]
    assert sorted(s.query_message("T", "common", 100, 0, 10**13).phy_offsets) == phys
    assert s.check() == []
    s.shutdown(9_000)
    s = open_store(cfg, 9_000)  # restart: nothing indexed twice, nothing lost
    if mode == "tick":
        s.tick(20_000)
    if mode == "process":
        for _ in range(20_000):
            if s.indexed_offset >= s.max_phy_offset:
                break
            threading.Event().wait(0.001)
    _fill(s, 5, 10_000)
    s.shutdown(30_000)
    s = open_store(cfg, 30_000)
    s.tick(40_000)
    assert s.indexed_offset == s.max_phy_offset  # the index process finished before shutdown
    assert len(s.query_message("T", "common", 100, 0, 10**13).phy_offsets) == 65
    assert s.check() == []
    s.shutdown(40_000)


def test_abnormal_recovery_tick_mode_rebuilds_lagging_index(tmp_path):
    cfg = small_config(str(tmp_path), messageIndexDispatch="tick", maxIndexNum=400)
    s = open_store(cfg)
    phys = _fill(s, 40)
    s.tick(2_000)
    late = _fill(s, 10, 3_000)  # not indexed yet when the "crash" happens
    s.close_abruptly()
    s = open_store(cfg, 4_000)
    assert s.recovered_abnormally
    s.tick(50_000)
    assert sorted(s.query_message("T", "k3", 10, 0, 10**13).phy_offsets) == [phys[3], late[3]]
    assert len(s.query_message("T", "common", 100, 0, 10**13).phy_offsets) == 50
    assert s.check() == []
    s.shutdown(60_000)


def test_encoded_properties_bytes_and_delay(tmp_path):
    s = open_store(small_config(str(tmp_path)))
    m = MessageExtBrokerInner(
        "T", b"x", queue_id=0, properties_string=b"TAGS\x01A\x02KEYS\x01kk\x02DELAY\x013"
    )
    r = s.put_message(m, 1_000)
    assert r.ok and m.topic == "SCHEDULE_TOPIC_XXXX" and m.queue_id == 2
    cq = s.consume_queues[("SCHEDULE_TOPIC_XXXX", 2)]
    assert cq.get_unit(0)[2] == 1_000 + 10_000  # tagsCode = deliver time of level 3
    look = s.look_message_by_offset(r.wrote_offset)
    assert look.properties["REAL_TOPIC"] == "T" and look.properties["KEYS"] == "kk"
    plain = MessageExtBrokerInner("T", b"y", properties_string=b"TAGS\x01B\x02KEYS\x01z")
    r2 = s.put_message(plain, 1_001)
    assert r2.ok and s.look_message_by_offset(r2.wrote_offset).properties["TAGS"] == "B"
    assert s.query_message("T", "z", 5, 0, 10**13).phy_offsets == [r2.wrote_offset]
    assert s.check() == []
    s.shutdown(2_000)


def test_batch_rejects_bad_item_without_writing_any(tmp_path):
    s = open_store(small_config(str(tmp_path)))
    good = (22 + 1 + 0).to_bytes(4, "big") + bytes(12) + (1).to_bytes(4, "big") + b"a" + bytes(2)
    # its properties length runs past the batch's end (TOTALSIZE is skipped, as in Java)
    bad = (99).to_bytes(4, "big") + bytes(12) + (1).to_bytes(4, "big") + b"b" + b"\x00\x09"
    with pytest.raises(MalformedBatchError):
        s.put_messages(MessageExtBatch("T", good + bad), 1_000)
    assert s.max_phy_offset == 0 and s.get_max_offset_in_queue("T", 0) == 0
    r = s.put_messages(MessageExtBatch("T", good * 40), 1_000)  # rolls 16 KiB files
    assert r.ok and r.msg_num == 40 and len(r.msg_ids) == 40
    assert s.get_max_offset_in_queue("T", 0) == 40
    assert s.check() == []
    s.shutdown(2_000)


def test_rejected_batch_leaves_no_record_for_recovery(tmp_path):
    cfg = small_config(str(tmp_path))
    s = open_store(cfg)
    good = (22 + 1 + 6).to_bytes(4, "big") + bytes(12) + (1).to_bytes(4, "big") + b"a"
    good += (6).to_bytes(2, "big") + b"K\x01v\x02X\x01"
    # its properties length runs past the batch's end (TOTALSIZE is skipped, as in Java)
    bad = (99).to_bytes(4, "big") + bytes(12) + (1).to_bytes(4, "big") + b"b" + b"\x00\x09"
    for body, batch_props in ((good * 3 + bad, ""), (good * 3, "DELAY\x012")):
        batch = MessageExtBatch("T", body, batch_properties=batch_props)
        if batch_props:  # the batch's own DELAY: refused
            assert s.put_messages(batch, 1_000).status.name == "MESSAGE_ILLEGAL"
        else:  # a torn item: the encoder's exception
            with pytest.raises(MalformedBatchError):
                s.put_messages(batch, 1_000)
        # the good items were written past the published end, then zeroed
        assert bytes(s.commitlog.mfq.files[0].mv[:256]) == bytes(256)
    s.close_abruptly()
    s = DefaultMessageStore(cfg)
    s.load(2_000)
    s.start(2_000)
    assert s.recovered_abnormally and s.max_phy_offset == 0
    r = s.put_messages(MessageExtBatch("T", good * 2), 2_000)
    assert r.ok and r.msg_num == 2 and s.get_max_offset_in_queue("T", 0) == 2
    assert s.check() == []
    s.shutdown(3_000)


def test_reader_sees_commitlog_files_created_after_it_opened(tmp_path):
    cfg = small_config(str(tmp_path))
    s = open_store(cfg)
    rd = MessageStoreReader(cfg)
    phys = _fill(s, 30)  # several 16 KiB files
    for p in (phys[0], phys[-1]):
        assert rd.select_one_message_by_offset(p) is not None
    assert rd.query_message("T", "k29", 5, 0, 10**13).phy_offsets == [phys[-1]]
    rd.close()
    s.shutdown(9_000)
