"""The store's three ways to the same consume queues and index (issue #21 part 5): a master's
put, a slave's reput of the master's commit-log bytes (the HA append path) and recovery's
rebuild from a copy of the master's files without consume queues and index (abnormal: the
abort marker left; and normal, after a clean shutdown) give identical consume-queue units
(phy, size, tagsCode) per queue and identical index entries (keyHash, phy), in order.

A model built here from the stored records themselves, with Java's rules (the properties as
MessageDecoder.string2messageProperties parses them, Integer.parseInt for DELAY, String.hashCode
for TAGS and index keys; checkMessageAndReturnSize, IndexService.buildIndex), must agree too.

Random sequences of single puts (put_message, and put_message_fields as the broker's send does;
odd DELAY values, duplicated and empty properties, IPv6 hosts,
every transaction type, SCHEDULE_TOPIC_XXXX itself), batches (protocol.message_batch) and small
files that roll. Derandomized with a moderate example count so it stays a few seconds in CI; a
failure prints the falsifying example."""

from __future__ import annotations

import os
import shutil
import tempfile
import unicodedata
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.java_number import NumberFormatError
from protocol.message_batch import encode_batch_raw
from protocol.message_properties import string_to_properties
from protocol.record import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    decode_record_fields,
    java_string_hash,
)
from store.index import INDEX_ENTRY, INDEX_ENTRY_SIZE
from store.message_ext_broker_inner import MessageExtBatch, MessageExtBrokerInner
from store.message_store import DefaultMessageStore
from tests.unit.store.store_helpers import open_store, small_config

SCHEDULE = "SCHEDULE_TOPIC_XXXX"
TOPICS = ["T0", "T\u00e91", SCHEDULE]
V4 = b"\x0a\x00\x00\x02\x00\x00\x30\x39"
V6 = b"\xfe\x80" + b"\x00" * 13 + b"\x01" + b"\x00\x00\x30\x39"
# DELAY texts Integer.parseInt takes or refuses: a sign, spaces, Unicode digits, int overflow
DELAYS = ["+3", " 2", "-1", "0", "99", "abc", "3 ", "3", "1", "18", "\u0663", "2147483648",
          "-2147483648", "+", "1_0", "\uff12"]  # fmt: skip
VALUES = ["A", "TagA", "k1 k2", " k3  k4 ", "\u00e9t\u00e9", "U1", "x" * 40]
BATCH_PROPS = ["", "CLUSTER\x01c1", "TAGS\x01BT", "KEYS\x01bk\x02", "DELAY\x010", "DELAY\x01-1"]
NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "WAIT", "XTAGS", "REAL_TOPIC"]
MAX_EXAMPLES = 40
STORE_TS0 = 1_700_000_000_000


def java_parse_int(s: str) -> int | None:
    """Integer.parseInt(s) (radix 10), None where it throws: an optional sign, then one or more
    chars Character.digit takes (Unicode decimal digits of the BMP: Java reads UTF-16 chars),
    within int range."""
    digits = s[1:] if s[:1] in ("+", "-") else s
    if not digits or any(ord(c) > 0xFFFF or not c.isdecimal() for c in digits):
        return None
    v = 0
    for c in digits:
        v = v * 10 + unicodedata.decimal(c)
    v = -v if s[:1] == "-" else v
    return v if -(2**31) <= v < 2**31 else None


# ---- what is put -------------------------------------------------------------------------------
@dataclass
class Put:
    topic: str
    qid: int
    body: bytes
    props: bytes
    tran: int  # MessageSysFlag transaction type bits
    v6: bool
    fields: bool  # put_message_fields (the broker's send path), not put_message


@dataclass
class Batch:
    topic: str
    qid: int
    items: list[tuple[int, bytes, str]]
    batch_props: str


def _props_text(pairs: list[tuple[str, str]], odd: list[str], trailing: bool) -> str:
    segs = [f"{k}\x01{v}" for k, v in pairs] + odd
    text = "\x02".join(segs)
    return text + ("\x02" if trailing and text else "")


_pair = st.one_of(
    st.tuples(st.just("DELAY"), st.sampled_from(DELAYS)),
    st.tuples(st.sampled_from(NAMES), st.sampled_from(VALUES)),
)
# segments Java's parser drops: no value, no name, no separator
_odd = st.lists(st.sampled_from(["TAGS\x01", "\x01v", "KEYS", "", "UNIQ_KEY\x01"]), max_size=2)
props_st = st.builds(_props_text, st.lists(_pair, max_size=5), _odd, st.booleans())

put_st = st.builds(
    Put,
    topic=st.sampled_from(TOPICS),
    qid=st.integers(0, 2),
    body=st.binary(max_size=120),
    props=props_st.map(str.encode),
    tran=st.sampled_from([0, 0, 0, 4, 8, 12]),
    v6=st.booleans(),
    fields=st.booleans(),
)
batch_st = st.builds(
    Batch,
    topic=st.sampled_from(TOPICS[:2]),
    qid=st.integers(0, 2),
    items=st.lists(
        st.tuples(st.integers(0, 7), st.binary(max_size=60), props_st), min_size=1, max_size=6
    ),
    batch_props=st.sampled_from(BATCH_PROPS),
)
ops_st = st.lists(st.one_of(put_st, put_st, batch_st), min_size=1, max_size=40)


def _config(root: str, index: str = "sync", **kw: Any) -> Any:
    return small_config(root, mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=20 * 16,
                        maxHashSlotNum=8, maxIndexNum=16, messageIndexDispatch=index,
                        **kw)  # fmt: skip


def _run(store: DefaultMessageStore, ops: list[Put | Batch]) -> int:
    """Put every op; the number of records the store took."""
    n = 0
    for i, op in enumerate(ops):
        try:
            n += _put(store, op, STORE_TS0 + i * 1000)
        except NumberFormatError:  # getDelayTimeLevel threw: nothing stored (SYSTEM_ERROR)
            continue
    return n


def _put(store: DefaultMessageStore, op: Put | Batch, now: int) -> int:
    """Put one op; the number of records the store took."""
    if isinstance(op, Put) and op.fields:
        host = V6 if op.v6 else V4
        got = store.put_message_fields(op.topic, op.qid, op.body, op.props, op.tran, 0,
                                       now - 5, host, host, 0, None, now)  # fmt: skip
        return int(isinstance(got, tuple))
    if isinstance(op, Put):
        host = V6 if op.v6 else V4
        m = MessageExtBrokerInner(topic=op.topic, body=op.body, queue_id=op.qid,
                                  sys_flag=op.tran, born_timestamp=now - 5, born_host=host,
                                  store_host=host, properties_string=op.props)  # fmt: skip
        r = store.put_message(m, now)
    else:
        b = MessageExtBatch(topic=op.topic, body=encode_batch_raw(op.items), queue_id=op.qid,
                            born_timestamp=now - 5, born_host=V4, store_host=V4,
                            batch_properties=op.batch_props)  # fmt: skip
        r = store.put_messages(b, now)
    return r.msg_num if r.ok else 0


# ---- what the stores hold ----------------------------------------------------------------------
def units_of(store: Any) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    """Every non-empty consume queue's units (phy, size, tagsCode) from its min offset."""
    out = {}
    for key, cq in sorted(store.consume_queues.items()):
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        units = [cq.get_unit(off) for off in range(lo, hi)]
        if units:
            out[key] = units
    return out


def index_entries_of(store: Any) -> list[tuple[int, int]]:
    """Every index entry (keyHash, phy) in the order written."""
    out = []
    for f in store.index.files:
        for i in range(1, f.index_count):
            at = f.entries_base + i * INDEX_ENTRY_SIZE
            kh, phy, _diff, _prev = INDEX_ENTRY.unpack_from(f.mv, at)
            out.append((kh, phy))
    return out


def stored_records(root: str) -> list[Any]:
    """Every record of a store's commit log, read from its files (protocol.record's decoder)."""
    cl_dir = os.path.join(root, "commitlog")
    out = []
    for name in sorted(os.listdir(cl_dir)):
        with open(os.path.join(cl_dir, name), "rb") as fh:
            data = fh.read()
        pos = 0
        while pos + 8 <= len(data):
            total = int.from_bytes(data[pos : pos + 4], "big", signed=True)
            magic = int.from_bytes(data[pos + 4 : pos + 8], "big", signed=True)
            if magic == BLANK_MAGIC_CODE or (total == 0 and magic == 0):
                break
            assert magic == MESSAGE_MAGIC_CODE, (name, pos)
            out.append(decode_record_fields(data, pos))
            pos += total
    return out


def _abs_hash(s: str) -> int:
    h = java_string_hash(s)
    return 0 if h == -(2**31) else abs(h)


def model(records: list[Any], delays: list[int]) -> tuple[dict[Any, list[Any]], list[Any]]:
    """Java's dispatch of these records: checkMessageAndReturnSize's tagsCode (String.hashCode
    of TAGS; for SCHEDULE_TOPIC_XXXX with DELAY > 0 after capping, the delivery time) into
    CommitLogDispatcherBuildConsumeQueue (not prepared / rolled back), and
    IndexService.buildIndex (UNIQ_KEY then each KEYS entry, not rolled back)."""
    units: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    entries = []
    for f in records:
        topic = f.topic.decode("utf-8")
        props = string_to_properties(f.properties.decode("utf-8", "replace"))
        tags = props.get("TAGS")
        tc = java_string_hash(tags) if tags else 0
        delay = props.get("DELAY")
        if topic == SCHEDULE and delay is not None:
            level = java_parse_int(delay)
            assert level is not None, f"a record recovery cannot read was stored: DELAY {delay!r}"
            level = min(level, len(delays))
            if level > 0:
                tc = f.store_timestamp + delays[level - 1]
        tran = f.sys_flag & 0xC
        if tran not in (4, 12):
            units.setdefault((topic, f.queue_id), []).append((f.phy_offset, f.total_size, tc))
        if tran != 12:
            keys = []
            if props.get("UNIQ_KEY"):
                keys.append(props["UNIQ_KEY"])
            keys += [k for k in props.get("KEYS", "").split(" ") if k]
            entries += [(_abs_hash(f"{topic}#{k}"), f.phy_offset) for k in keys]
    return dict(sorted(units.items())), entries


def _replicate(master: DefaultMessageStore, slave: DefaultMessageStore, chunks: list[int]) -> None:
    """Ship the master's commit log to the slave in pieces (the HA transfer's read and append)."""
    pos = master.min_phy_offset
    for i in range(100_000):
        data = master.get_commit_log_data(pos, chunks[i % len(chunks)])
        if data is None:
            return
        assert slave.append_to_commit_log(pos, bytes(data), STORE_TS0), pos
        pos += len(data)
    raise AssertionError("replication did not end")


def _recovered(src: str, dst: str, *drop: str, index: str = "sync") -> DefaultMessageStore:
    """A copy of src's files without consume queues, index and the files named, opened."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("lock"))
    for name in ("consumequeue", "index"):
        shutil.rmtree(os.path.join(dst, name), ignore_errors=True)
    for name in drop:
        os.unlink(os.path.join(dst, name))
    return open_store(_config(dst, index), STORE_TS0)


@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(ops=ops_st, chunks=st.lists(st.sampled_from([7, 91, 500, 4096, 8192]), min_size=1,
                                   max_size=4))  # fmt: skip
def test_put_reput_and_recovery_build_the_same_queues_and_index(
    ops: list[Put | Batch], chunks: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mroot = os.path.join(tmp, "m")
        master = open_store(_config(mroot), STORE_TS0)
        slave = open_store(_config(os.path.join(tmp, "s"), brokerRole="SLAVE"), STORE_TS0)
        stores: list[DefaultMessageStore] = [master, slave]
        try:
            taken = _run(master, ops)
            records = stored_records(mroot)
            assert len(records) == taken
            want_units, want_entries = model(records, master.cfg.delay_levels_ms)
            assert units_of(master) == want_units, "master put"
            assert index_entries_of(master) == want_entries, "master put (index)"
            _replicate(master, slave, chunks)
            assert slave.max_phy_offset == master.max_phy_offset
            assert units_of(slave) == want_units, "slave reput"
            assert index_entries_of(slave) == want_entries, "slave reput (index)"
            # abnormal recovery: the abort marker is in the copy of a running store (without
            # the checkpoint, whose time would let it re-dispatch only the newest records); the
            # index built after it by the dispatch that follows the commit log ("tick":
            # IndexDispatcher, what the IndexService actor runs)
            abnormal = _recovered(mroot, os.path.join(tmp, "a"), "checkpoint", index="tick")
            stores.append(abnormal)
            assert abnormal.recovered_abnormally
            assert abnormal.max_phy_offset == master.max_phy_offset
            assert units_of(abnormal) == want_units, "abnormal recovery"
            abnormal.dispatch_index(STORE_TS0)
            assert abnormal.indexed_offset == abnormal.max_phy_offset
            assert index_entries_of(abnormal) == want_entries, "index dispatch"
            master.shutdown(STORE_TS0)
            stores.remove(master)
            normal = _recovered(mroot, os.path.join(tmp, "n"))
            stores.append(normal)
            assert not normal.recovered_abnormally
            assert units_of(normal) == want_units, "normal recovery"
            assert index_entries_of(normal) == want_entries, "normal recovery (index)"
            for s in stores:
                assert s.check() == []
        finally:
            for s in stores:
                s.shutdown(STORE_TS0)


def test_java_parse_int_is_integer_parse_int() -> None:
    """The model's parseInt on the DELAY texts above, as Java 17 answers them."""
    got = {s: java_parse_int(s) for s in DELAYS}
    assert got == {"+3": 3, " 2": None, "-1": -1, "0": 0, "99": 99, "abc": None, "3 ": None,
                   "3": 3, "1": 1, "18": 18, "\u0663": 3, "2147483648": None,
                   "-2147483648": -(2**31), "+": None, "1_0": None, "\uff12": 2}  # fmt: skip
