"""CommitLog.check_record (what recovery, a slave's reput and walk() read each record with)
gives, for every byte string, what the general decode_record_fields path gives: the one-unpack
IPv4 path is an optimisation, not a second opinion. Differential fuzz over valid records
(IPv4 and IPv6 hosts, delayed, tagged) and single-byte and truncation corruptions of them."""

from __future__ import annotations

import random
import zlib
from typing import Any

import pytest

from protocol.record import RecordError, decode_record_fields, encode_record, pack_host
from store.commitlog import SCHEDULE_TOPIC, CommitLog, DispatchRequest, prop_value
from store.config import StoreConfig
from store.index import java_hash_bytes

V4 = pack_host("10.0.0.1", 4000)
V6 = pack_host("fe80::1", 4000)


def reference(cl: CommitLog, mv: memoryview, pos: int, check_crc: bool) -> tuple[int, Any]:
    """The general path, written out from decode_record_fields."""
    if pos + 8 > len(mv):
        return 0, None
    total = int.from_bytes(mv[pos : pos + 4], "big", signed=True)
    magic = int.from_bytes(mv[pos + 4 : pos + 8], "big", signed=True)
    if magic == -875286124:  # BLANK_MAGIC_CODE
        return 0, None
    if magic != -626843481:  # MESSAGE_MAGIC_CODE
        return (0 if total == 0 and magic == 0 else -1), None
    try:
        f = decode_record_fields(mv, pos)
    except (RecordError, IndexError, ValueError):
        return -1, None
    if check_crc and (zlib.crc32(f.body) & 0x7FFFFFFF) != f.body_crc:
        return -1, None
    try:
        topic = f.topic.decode()
    except UnicodeDecodeError:
        return -1, None
    props = f.properties
    if topic == SCHEDULE_TOPIC:
        lvl = prop_value(props, b"DELAY\x01")
        delays = cl.cfg.delay_levels_ms
        tc = f.store_timestamp
        if lvl is not None and lvl.isdigit():
            tc += delays[min(max(int(lvl), 1), len(delays)) - 1]
    else:
        tags = prop_value(props, b"TAGS\x01")
        tc = java_hash_bytes(tags) if tags else 0
    return total, DispatchRequest(topic, f.queue_id, f.phy_offset, total, tc, f.store_timestamp,
                                  f.queue_offset, f.sys_flag, props)  # fmt: skip


def _record(rng: random.Random, i: int) -> bytes:
    topic, props = rng.choice([
        (b"T", b"TAGS\x01a\x02KEYS\x01k"),
        (b"TopicB", b"UNIQ_KEY\x01U\x02TAGS\x01TagB"),
        (b"NoTags", b""),
        (SCHEDULE_TOPIC.encode(), b"DELAY\x013\x02REAL_TOPIC\x01T"),
        (SCHEDULE_TOPIC.encode(), b"DELAY\x01x"),
        ("t\u00e9".encode(), b"TAGS\x01\xff"),
    ])  # fmt: skip
    born, store = rng.choice([(V4, V4), (V6, V4), (V4, V6), (V6, V6)])
    body = rng.randbytes(rng.choice([0, 1, 40, 300]))
    return encode_record(
        body=body, topic=topic, properties=props, queue_id=rng.randrange(8), flag=0,
        queue_offset=i, phy_offset=rng.randrange(1 << 40), sys_flag=rng.choice([0, 4, 8, 12]),
        born_timestamp=1, born_host=born, store_timestamp=1_700_000_000_000 + i, store_host=store,
    )  # fmt: skip


@pytest.fixture
def cl(tmp_path: Any) -> CommitLog:
    return CommitLog(StoreConfig(storePathRootDir=str(tmp_path)), writable=False)


def test_valid_records_read_the_same(cl: CommitLog) -> None:
    rng = random.Random(1)
    for i in range(300):
        rec = _record(rng, i)
        buf = memoryview(b"\x00" * 5 + rec + rng.randbytes(rng.randrange(3)))
        for crc in (False, True):
            got = cl.check_record(buf, 5, crc)
            assert got == reference(cl, buf, 5, crc)
            assert got[0] == len(rec)


def test_corrupted_and_truncated_records_read_the_same(cl: CommitLog) -> None:
    rng = random.Random(2)
    for i in range(3000):
        rec = bytearray(_record(rng, i))
        if rng.random() < 0.2:
            rec = rec[: rng.randrange(len(rec))]  # a torn tail
        else:
            for _ in range(rng.choice([1, 1, 2])):  # bytes flipped anywhere, often the head
                at = rng.randrange(min(len(rec), 100) if rng.random() < 0.7 else len(rec))
                rec[at] = rng.randrange(256)
        buf = memoryview(bytes(rec))
        for crc in (False, True):
            assert cl.check_record(buf, 0, crc) == reference(cl, buf, 0, crc), (i, bytes(rec))
