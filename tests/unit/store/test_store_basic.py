"""Unit tests for the message store (put/get, statuses, index, time search, recovery)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from protocol.java_number import NumberFormatError
from protocol.record import decode_record_fields, java_string_hash
from store.commitlog import SCHEDULE_TOPIC
from store.config import StoreConfig
from store.consume_queue import CQ_UNIT_SIZE
from store.get_message_result import GetMessageStatus
from store.index import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, java_hash_bytes
from store.message_ext_batch_encoder import MalformedBatchError
from store.message_ext_broker_inner import MessageExtBatch
from store.message_filter import TagFilter
from store.message_store import DefaultMessageStore
from store.message_store_reader import MessageStoreReader
from store.put_message_result import PutMessageStatus
from store.recovery import StoreRecovery
from tests.unit.store.store_helpers import msg, open_store, pull_all, small_config

G = GetMessageStatus


@pytest.fixture
def store(tmp_path):
    s = open_store(small_config(str(tmp_path)))
    yield s
    if s.state is not None:
        s.shutdown(10_000)


def test_struct_sizes():
    assert CQ_UNIT_SIZE == 20 and INDEX_HEADER_SIZE == 40 and INDEX_ENTRY_SIZE == 20


@pytest.mark.parametrize("s", ["", "a", "TopicTest#KEY-1", "é中文", "x" * 300, "~\x7f"])
def test_fast_java_hash_matches_reference(s):
    assert java_hash_bytes(s.encode()) == java_string_hash(s)


def test_put_get_roll_and_blank(store):
    bodies = [bytes([i % 251]) * (100 + i * 7 % 900) for i in range(120)]
    for i, b in enumerate(bodies):
        r = store.put_message(msg(body=b, qid=0), 1_000 + i)
        assert r.status is PutMessageStatus.PUT_OK and r.logics_offset == i
    assert len(store.commitlog.mfq.files) > 3
    got = pull_all(store, "T", 0, 100)
    assert [b for _, b in got] == bodies
    assert [q for q, _ in got] == list(range(120))
    # file names are 20-digit start offsets and the blank sits at each file end
    names = sorted(os.listdir(os.path.join(store.root, "commitlog")))
    assert all(len(n) == 20 and int(n) % store.cfg.mappedFileSizeCommitLog == 0 for n in names)
    assert store.check() == []


def test_get_message_statuses(store):
    assert store.get_message("g", "T", 0, 0, 32).status is G.NO_MATCHED_LOGIC_QUEUE
    for i in range(5):
        store.put_message(msg(qid=1, tags="A" if i % 2 else "B"), 1_000)
    r = store.get_message("g", "T", 1, 5, 32)
    assert (r.status, r.next_begin_offset) == (G.OFFSET_OVERFLOW_ONE, 5)
    r = store.get_message("g", "T", 1, 9, 32)
    assert (r.status, r.next_begin_offset) == (G.OFFSET_OVERFLOW_BADLY, 5)  # 4.9.4+: the max
    r = store.get_message("g", "T", 1, 0, 32, filter=TagFilter({java_string_hash("A")}))
    assert r.status is G.FOUND and r.message_queue_offsets == [1, 3] and r.next_begin_offset == 5
    r = store.get_message("g", "T", 1, 0, 32, filter=TagFilter({java_string_hash("C")}))
    assert (r.status, r.next_begin_offset) == (G.NO_MATCHED_MESSAGE, 5)
    r = store.get_message("g", "T", 1, 0, 2)
    assert r.message_count == 2 and r.next_begin_offset == 2
    size = len(store.select_one_message_by_offset(store.get_commit_log_offset_in_queue("T", 1, 0)))
    r = store.get_message("g", "T", 1, 0, 32, max_bytes=size * 3 - 1)
    assert r.message_count == 2
    assert TagFilter(None).is_matched_by_consume_queue(123)


def test_no_message_in_queue_and_too_small_and_found_null(tmp_path):
    s = open_store(small_config(str(tmp_path)))
    cq = s.cq_table.find_or_create("E", 0)
    assert s.get_message("g", "E", 0, 3, 32).status is G.NO_MESSAGE_IN_QUEUE
    assert cq.get_max_offset_in_queue() == 0
    for _ in range(200):
        s.put_message(msg(topic="E", body=b"z" * 200), 5_000)
    # force retention of everything but the last commit-log file
    s.execute_delete_files_manually()
    s.cfg.fileReservedTime = 0
    assert s.clean_expired(10_000) > 0
    lo = s.get_min_offset_in_queue("E", 0)
    assert lo > 0
    r = s.get_message("g", "E", 0, 0, 32)
    assert (r.status, r.next_begin_offset) == (G.OFFSET_TOO_SMALL, lo)
    # a missing CQ file inside [min, max) gives OFFSET_FOUND_NULL
    cq.min_logic_offset = 0
    r = s.get_message("g", "E", 0, 0, 32)
    assert r.status is G.OFFSET_FOUND_NULL and r.next_begin_offset == 64
    cq.correct_min_offset(s.min_phy_offset)
    assert s.check() == []
    s.shutdown(20_000)


def test_message_was_removing(tmp_path):
    s = open_store(small_config(str(tmp_path)))
    for _ in range(120):
        s.put_message(msg(body=b"q" * 300), 1_000)
    cq = s.consume_queue("T", 0)
    first_phy_file = s.commitlog.mfq.files[0]
    s.commitlog.mfq.delete_first(1)  # commit log gone, CQ not yet cleaned
    assert s.min_phy_offset == first_phy_file.file_end_offset
    r = s.get_message("g", "T", 0, 0, 32)
    assert r.status in (G.MESSAGE_WAS_REMOVING, G.FOUND)
    assert r.status is G.MESSAGE_WAS_REMOVING or r.message_queue_offsets[0] > 0
    assert cq is not None
    s.shutdown(2_000)


def test_suggest_slave_and_in_disk(tmp_path):
    s = open_store(
        small_config(str(tmp_path), totalPhysicalMemory=10_000, accessMessageInMemoryMaxRatio=40)
    )
    for _ in range(40):
        s.put_message(msg(body=b"m" * 500), 1_000)
    r = s.get_message("g", "T", 0, 0, 32)
    assert r.suggest_pull_from_slave
    assert r.message_count == s.cfg.maxTransferCountOnMessageInDisk
    assert s.check_in_disk_by_commit_offset(0)
    assert not s.check_in_disk_by_commit_offset(s.max_phy_offset - 10)
    s.shutdown(2_000)


def test_batch_put(store):
    from protocol.message_properties import properties_to_string

    items = []
    for i in range(10):
        b = f"body{i}".encode()
        p = properties_to_string(
            {"UNIQ_KEY": f"U{i:031d}", "KEYS": f"bk{i}", "TAGS": "T1"}
        ).encode()
        items.append(
            (22 + len(b) + len(p)).to_bytes(4, "big")
            + bytes(8)
            + (7).to_bytes(4, "big")
            + len(b).to_bytes(4, "big")
            + b
            + len(p).to_bytes(2, "big")
            + p
        )
    batch = MessageExtBatch(
        topic="B", body=b"".join(items), queue_id=2, batch_properties="CLUSTER\x01c1"
    )
    r = store.put_messages(batch, 2_000)
    assert r.ok and r.msg_num == 10 and r.logics_offset == 0 and len(r.msg_ids) == 10
    assert all(len(i) == 32 for i in r.msg_ids)
    g = store.get_message("g", "B", 2, 0, 32)
    assert g.message_count == 10
    f = decode_record_fields(g.buffer)
    assert f.flag == 7 and f.properties.endswith(b"\x02CLUSTER\x01c1")
    q = store.query_message("B", "bk3", 10, 0, 10**13)
    assert q.phy_offsets == [r.offsets[3]]
    bad = MessageExtBatch(topic="B", body=b"\x00\x00\x00\x05xx", queue_id=2)
    end = store.max_phy_offset
    with pytest.raises(MalformedBatchError, match="truncated batch item"):
        store.put_messages(bad, 2_000)  # SYSTEM_ERROR on the wire, as on the reference
    assert store.max_phy_offset == end


def test_delay_rewrite_and_transactions(store):
    m = msg(topic="D", qid=3, DELAY="3")
    r = store.put_message(m, 10_000)
    assert r.ok
    cq = store.consume_queue(SCHEDULE_TOPIC, 2)
    assert cq is not None and cq.get_unit(0)[2] == 10_000 + 10_000
    f = decode_record_fields(store.select_one_message_by_offset(r.wrote_offset))
    assert b"REAL_TOPIC\x01D" in f.properties and b"REAL_QID\x013" in f.properties
    # PREPARED and ROLLBACK: queue offset 0, no CQ unit
    for flag in (0x4, 0xC):
        m = msg(topic="TX")
        m.sys_flag = flag
        r = store.put_message(m, 10_000)
        assert r.ok and r.logics_offset == 0
    assert store.consume_queue("TX", 0) is None
    m = msg(topic="TX")
    m.sys_flag = 0x8
    assert store.put_message(m, 10_000).logics_offset == 0
    assert store.get_max_offset_in_queue("TX", 0) == 1
    assert store.check() == []


@pytest.mark.parametrize("tran", [0x0, 0x4, 0x8, 0xC])
def test_a_delay_that_is_not_a_number_is_refused_where_it_is_read(store, tran):
    """getDelayTimeLevel (Integer.parseInt) throws on DELAY " 2": a message whose DELAY the put
    reads (not prepared / rolled back), and any for SCHEDULE_TOPIC_XXXX (whose records
    checkMessageAndReturnSize would call bad, stopping recovery and a slave there), is refused
    with nothing written; "+3" is level 3 wherever it is read."""
    before = store.max_phy_offset
    wrote = 0
    for topic in ("D", SCHEDULE_TOPIC):
        m = msg(topic=topic, qid=0, DELAY=" 2")
        m.sys_flag = tran
        if topic == SCHEDULE_TOPIC or tran in (0x0, 0x8):  # read: NumberFormatException
            with pytest.raises(NumberFormatError, match='For input string: " 2"'):
                store.put_message(m, 10_000)
            continue
        r = store.put_message(m, 10_000)
        assert r.status is PutMessageStatus.PUT_OK
        wrote += r.wrote_bytes
    assert store.max_phy_offset == before + wrote
    m = msg(topic=SCHEDULE_TOPIC, qid=5, DELAY="+3")
    m.sys_flag = tran
    r = store.put_message(m, 20_000)
    assert r.ok
    if tran in (0x0, 0x8):  # parked in level 3's queue, delivered 10 s after its store time
        assert store.consume_queue(SCHEDULE_TOPIC, 2).get_unit(0)[2] == 20_000 + 10_000
    assert store.check() == []


def test_query_by_key_time_range_and_index_roll(tmp_path):
    s = open_store(small_config(str(tmp_path), maxIndexNum=20, maxHashSlotNum=4))
    offs = []
    for i in range(50):
        r = s.put_message(msg(keys=f"k{i % 5} other", uniq=f"U{i:031d}"), 100_000 + i * 1000)
        offs.append(r.wrote_offset)
    assert len(s.index.files) >= 5  # 3 keys per message, 19 entries per file
    q = s.query_message("T", "k2", 100, 0, 10**13)
    assert sorted(q.phy_offsets) == [offs[i] for i in range(2, 50, 5)]
    q = s.query_message("T", "k2", 3, 0, 10**13)
    assert len(q.phy_offsets) == 3 and q.phy_offsets[0] == offs[47]
    q = s.query_message("T", "k2", 100, 100_000 + 10_000, 100_000 + 20_000)
    assert sorted(q.phy_offsets) == [offs[12], offs[17]]
    q = s.query_message("T", f"U{7:031d}", 10, 0, 10**13)
    assert q.phy_offsets == [offs[7]]
    assert decode_record_fields(q.buffer).phy_offset == offs[7]
    s.shutdown(200_000)


def test_search_by_time(store):
    for i in range(10):
        store.put_message(msg(), 1_000 + i * 100)
    assert store.get_offset_in_queue_by_time("T", 0, 1_300) == 3
    assert store.get_offset_in_queue_by_time("T", 0, 1_340) == 3
    assert store.get_offset_in_queue_by_time("T", 0, 1_360) == 4
    assert store.get_offset_in_queue_by_time("T", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("T", 0, 99_999) == 9
    assert store.get_offset_in_queue_by_time("X", 0, 1) == 0
    assert store.get_earliest_message_time("T", 0) == 1_000
    assert store.get_message_store_timestamp("T", 0, 2) == 1_200


def test_look_message_and_offsets(store):
    r = store.put_message(msg(body=b"look"), 1_000)
    m = store.look_message_by_offset(r.wrote_offset)
    assert m is not None and bytes(m.body) == b"look"
    assert store.look_message_by_offset(r.wrote_offset + 1) is None
    assert store.get_min_offset_in_queue("nope", 0) == -1
    assert store.get_commit_log_offset_in_queue("T", 0, 0) == r.wrote_offset


def test_illegal_messages(store):
    assert store.put_message(msg(topic="x" * 128), 1).status is PutMessageStatus.MESSAGE_ILLEGAL
    big = msg(body=b"x" * (store.cfg.maxMessageSize + 1))
    assert store.put_message(big, 1).status is PutMessageStatus.MESSAGE_ILLEGAL
    m = msg(P="v" * 40000)
    assert store.put_message(m, 1).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    too_big_for_file = msg(body=b"x" * 20_000)
    assert store.put_message(too_big_for_file, 1).status is PutMessageStatus.MESSAGE_ILLEGAL


def test_arrival_listener(store):
    seen = []
    store.arrival_listener = lambda *a: seen.append(a)
    store.put_message(msg(qid=2, tags="A"), 7)
    store.put_message(msg(qid=2, tags=None), 8)
    assert seen == [("T", 2, 1, java_string_hash("A"), 7), ("T", 2, 2, 0, 8)]


def test_lock_file(tmp_path):
    cfg = small_config(str(tmp_path))
    s = open_store(cfg)
    with pytest.raises(RuntimeError, match="Lock failed,MQ already started"):
        DefaultMessageStore(cfg).load(1)
    s.shutdown(2)
    s2 = open_store(cfg)
    s2.shutdown(3)


# What a Java broker's DefaultMessageStore does with <root>/lock: FileChannel.tryLock(0, 1,
# false), i.e. fcntl(F_SETLK) on byte 0 (a POSIX record lock, which flock never sees on Linux).
_JAVA_STYLE_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
except OSError:
    print("BUSY", flush=True)
    sys.exit(0)
print("LOCKED", flush=True)
sys.stdin.readline()  # hold it until the test closes our stdin
"""


def _check_lock_exclusion(cfg: StoreConfig, locker: list[str], timeout_s: float) -> None:
    """`locker + [lock path]` (prints BUSY or LOCKED, then holds a lock until its stdin closes)
    is refused while our store is open, and refuses our store while it holds the lock."""
    lock_path = os.path.join(cfg.storePathRootDir, "lock")

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen([*locker, lock_path], text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip

    s = open_store(cfg)
    with pytest.raises(RuntimeError, match="Lock failed,MQ already started"):
        DefaultMessageStore(cfg).load(1)  # refused in this process: s keeps its lock
    p = start()
    try:
        assert p.communicate(timeout=timeout_s)[0].strip() == "BUSY"
    finally:
        p.kill()
        p.wait(timeout=30)
    s.shutdown(2)
    p = start()
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "LOCKED"
        with pytest.raises(RuntimeError, match="Lock failed,MQ already started"):
            DefaultMessageStore(cfg).load(3)
    finally:
        p.kill()
        p.wait(timeout=30)
    s2 = open_store(cfg)  # the other process is gone: its lock with it
    s2.shutdown(4)


def test_lock_file_excludes_a_java_broker_both_ways(tmp_path):
    locker = [sys.executable, "-c", _JAVA_STYLE_LOCK]
    _check_lock_exclusion(small_config(str(tmp_path)), locker, 30.0)


def test_clean_restart_and_abnormal_recovery_redispatch(tmp_path):
    cfg = small_config(str(tmp_path))
    s = open_store(cfg)
    for i in range(100):
        s.put_message(msg(body=bytes(50 + i), qid=i % 2, keys=f"K{i}"), 1_000 + i)
    s.shutdown(5_000)
    assert not os.path.exists(os.path.join(str(tmp_path), "abort"))
    s = open_store(cfg, 6_000)
    assert not s.recovered_abnormally and s.get_max_offset_in_queue("T", 1) == 50
    assert s.check() == []
    # lose the consume queue of queue 1 and the index, then crash: rebuilt from the commit log
    s.close_abruptly()
    shutil.rmtree(os.path.join(str(tmp_path), "consumequeue", "T", "1"))
    shutil.rmtree(os.path.join(str(tmp_path), "index"))
    s = open_store(cfg, 7_000)
    assert s.recovered_abnormally
    assert s.get_max_offset_in_queue("T", 1) == 50
    assert s.query_message("T", "K77", 5, 0, 10**13).phy_offsets
    assert s.check() == []
    s.shutdown(8_000)


def test_normal_recovery_without_state_page_walks(tmp_path):
    cfg = small_config(str(tmp_path))
    s = open_store(cfg)
    for i in range(60):
        s.put_message(msg(body=bytes(200)), 1_000 + i)
    end = s.max_phy_offset
    s.shutdown(2_000)
    os.unlink(os.path.join(str(tmp_path), "state"))
    s = open_store(cfg, 3_000)
    assert s.max_phy_offset == end and s.check() == []
    s.shutdown(4_000)


def test_check_reports_corruption(tmp_path):
    cfg = small_config(str(tmp_path))
    s = open_store(cfg)
    for _ in range(10):
        s.put_message(msg(body=b"abc" * 10), 1_000)
    assert s.check() == []
    mf = s.commitlog.mfq.files[0]
    f = decode_record_fields(mf.mv, 0)
    body_pos = f.total_size - 2 - len(f.properties) - 1 - len(f.topic) - len(f.body)
    mf.mm[body_pos] ^= 0xFF
    problems = s.check()
    assert problems and "commitlog" in problems[0]
    s.shutdown(2_000)


def test_reader_view_sees_published_data_and_new_queues(tmp_path):
    cfg = small_config(str(tmp_path))
    s = open_store(cfg)
    rd = MessageStoreReader(cfg)
    assert rd.get_message("g", "T", 0, 0, 32).status is G.NO_MATCHED_LOGIC_QUEUE
    for i in range(100):
        s.put_message(msg(body=bytes([i]) * 300, keys=f"r{i}"), 1_000 + i)
    res = rd.get_message("g", "T", 0, 0, 32)
    assert res.status is G.FOUND and res.max_offset == 100
    seen = pull_all(rd, "T", 0, 50)
    assert [q for q, _ in seen] == list(range(100))
    assert rd.query_message("T", "r42", 5, 0, 10**13).phy_offsets
    # a unit written but not yet published stays invisible
    from store.state_page import OFF_MAX_PHY

    published = s.state.max_phy
    s.put_message(msg(body=b"late"), 2_000)
    s.state.set(OFF_MAX_PHY, published)
    assert rd.get_max_offset_in_queue("T", 0) == 100
    s.state.set(OFF_MAX_PHY, s.max_phy_offset)
    assert rd.get_max_offset_in_queue("T", 0) == 101
    assert rd.check() == []
    rd.close()
    s.shutdown(3_000)


def test_store_config_from_properties():
    cfg = StoreConfig.from_properties(
        {
            "storePathRootDir": "/x",
            "mappedFileSizeCommitLog": "65536",
            "flushDiskType": "SYNC_FLUSH",
            "checkCRCOnRecover": "false",
            "unknownKey": "whatever",
            "deleteWhen": "04;05",
        }
    )
    assert cfg.storePathRootDir == "/x" and cfg.mappedFileSizeCommitLog == 65536
    assert cfg.is_sync_flush and cfg.checkCRCOnRecover is False
    with pytest.raises(ValueError, match="mappedFileSizeCommitLog"):
        StoreConfig.from_properties({"mappedFileSizeCommitLog": "big"})
    with pytest.raises(ValueError, match="flushDiskType"):
        StoreConfig.from_properties({"flushDiskType": "SOMETIMES"})
    with pytest.raises(ValueError, match="checkCRCOnRecover"):
        StoreConfig.from_properties({"checkCRCOnRecover": "maybe"})
    with pytest.raises(ValueError, match="deleteWhen"):
        StoreConfig.from_properties({"deleteWhen": "25"})
    assert StoreConfig().delay_levels_ms[:3] == [1000, 5000, 10000]


def test_commit_log_in_its_own_directory(tmp_path) -> None:
    """storePathCommitLog: the commit log lives where it says; readers, recovery and check()
    find it there."""
    from store.message_store_reader import MessageStoreReader

    cfg = small_config(str(tmp_path / "root"), storePathCommitLog=str(tmp_path / "cl"))
    s = open_store(cfg)
    for i in range(50):
        assert s.put_message(msg(body=b"c%d" % i), 2_000 + i).ok
    assert sorted(os.listdir(tmp_path / "cl")) and not (tmp_path / "root" / "commitlog").exists()
    r = MessageStoreReader(cfg)
    try:
        assert r.get_message("g", "T", 0, 18, 32).message_count == 32
    finally:
        r.close()
    s.shutdown(3_000)
    again = open_store(cfg, 4_000)
    try:
        assert again.get_max_offset_in_queue("T", 0) == 50 and again.check() == []
    finally:
        again.shutdown(5_000)


_JAVA_PROBE = """
import java.io.RandomAccessFile;
import java.nio.channels.FileLock;

public class LockProbe {
    public static void main(String[] args) throws Exception {
        RandomAccessFile file = new RandomAccessFile(args[0], "rw");
        FileLock lock = file.getChannel().tryLock(0, 1, false);  // as DefaultMessageStore.start
        System.out.println(lock != null ? "LOCKED" : "BUSY");
        System.out.flush();
        if (lock != null) {
            System.in.read();  // hold it until the test closes our stdin
        }
    }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH (README: Java 17)")
def test_lock_file_against_a_real_jvm(tmp_path):
    """The same exclusion with the JVM's own FileChannel.tryLock (source-file launch)."""
    probe = tmp_path / "LockProbe.java"
    probe.write_text(_JAVA_PROBE)
    _check_lock_exclusion(small_config(str(tmp_path / "store")), ["java", str(probe)], 120.0)


def test_failed_load_lets_go_of_the_lock(tmp_path, monkeypatch):
    """A load that fails half-way (here: recovery raising) unmaps and unlocks before raising,
    so the same process can open the store again once the cause is gone."""
    cfg = small_config(str(tmp_path))
    s = open_store(cfg)
    s.put_message(msg(qid=0, body=b"kept"), 1)
    s.shutdown(2)

    def broken(*_a, **_k):
        raise OSError("disk gone")

    monkeypatch.setattr(StoreRecovery, "recover", broken)
    with pytest.raises(OSError, match="disk gone"):
        DefaultMessageStore(cfg).load(3)
    monkeypatch.undo()
    s2 = open_store(cfg)
    try:
        assert pull_all(s2, "T", 0, 4) == [(0, b"kept")]
    finally:
        s2.shutdown(4)


def test_a_slave_store_leaves_out_of_range_offsets_as_asked(store):
    """nextOffsetCorrection: on a slave (without offsetCheckInSlave) every out-of-range status
    gives back the offset asked for; the broker then has the consumer retry at the master."""
    for _ in range(3):
        store.put_message(msg(qid=0), 1_000)
    store.cfg.brokerRole = "SLAVE"  # as the slave's reader of replicated files sees them
    assert store.get_message("g", "T", 0, 9, 32).next_begin_offset == 9
    assert store.get_message("g", "T", 7, 4, 32).next_begin_offset == 4  # no such queue
    assert store.get_message("g", "T", 0, 3, 32).next_begin_offset == 3  # OVERFLOW_ONE
    store.cfg.offsetCheckInSlave = True
    assert store.get_message("g", "T", 0, 9, 32).next_begin_offset == 3
    assert store.get_message("g", "T", 7, 4, 32).next_begin_offset == 0
