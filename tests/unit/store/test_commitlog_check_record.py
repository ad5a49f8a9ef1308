"""RecordChecker.check, checkMessageAndReturnSize (what recovery, a slave's reput and walk()
read each record with), gives for every byte string what a reference built here on
decode_record_fields and Java's rules gives. Differential fuzz over valid records
(IPv4 and IPv6 hosts, delayed, tagged) and single-byte and truncation corruptions of them."""

from __future__ import annotations

import random
import zlib
from typing import Any

import pytest

from protocol.message_properties import property_value as prop_value
from protocol.record import RecordError, decode_record_fields, encode_record, pack_host
from store.commitlog import SCHEDULE_TOPIC, CommitLog
from store.config import StoreConfig
from store.dispatch_request import DispatchRequest
from store.index import java_hash_bytes

V4 = pack_host("10.0.0.1", 4000)
V6 = pack_host("fe80::1", 4000)


def reference(cl: CommitLog, mv: memoryview, pos: int, check_crc: bool) -> tuple[int, Any]:
    """Java's CommitLog.checkMessageAndReturnSize over protocol.record's decoder: the tags code
    is the TAGS hash, replaced for SCHEDULE_TOPIC_XXXX by the delivery time when DELAY
    (Integer.parseInt, capped at the highest level) is above 0; a DELAY that is not a number
    makes parseInt throw, which makes the record bad."""
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
    tags = prop_value(props, b"TAGS\x01")
    tc = java_hash_bytes(tags) if tags else 0
    lvl = prop_value(props, b"DELAY\x01")
    if topic == SCHEDULE_TOPIC and lvl is not None:
        text = lvl.decode("latin-1")
        digits = text[1:] if text[:1] in ("+", "-") else text
        if not digits.isdigit() or not digits.isascii() or len(digits) > 10:
            return -1, None
        delays = cl.cfg.delay_levels_ms
        level = min(int(text), len(delays))
        if level > 0:
            tc = f.store_timestamp + delays[level - 1]
    return total, DispatchRequest(topic, f.queue_id, f.phy_offset, total, tc, f.store_timestamp,
                                  f.queue_offset, f.sys_flag, props)  # fmt: skip


def _record(rng: random.Random, i: int) -> bytes:
    topic, props = rng.choice([
        (b"T", b"TAGS\x01a\x02KEYS\x01k"),
        (b"TopicB", b"UNIQ_KEY\x01U\x02TAGS\x01TagB"),
        (b"NoTags", b""),
        (SCHEDULE_TOPIC.encode(), b"DELAY\x013\x02REAL_TOPIC\x01T"),
        (SCHEDULE_TOPIC.encode(), b"DELAY\x01x"),  # not a number: a bad record, as in Java
        (SCHEDULE_TOPIC.encode(), b"TAGS\x01t\x02DELAY\x010"),  # level 0: the TAGS hash
        (SCHEDULE_TOPIC.encode(), b"DELAY\x0199"),  # above the highest level: capped
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
            got = cl.checker.check(buf, 5, crc)
            assert got == reference(cl, buf, 5, crc)
            assert got[0] == (-1 if b"DELAY\x01x" in rec else len(rec))


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
            assert cl.checker.check(buf, 0, crc) == reference(cl, buf, 0, crc), (i, bytes(rec))


@pytest.mark.parametrize(
    ("props", "want"),
    [
        (b"DELAY\x013", 1_700_000_000_000 + 10_000),  # level 3 of the default table: 10s
        (b"DELAY\x0199", 1_700_000_000_000 + 7_200_000),  # capped at level 18: 2h
        (b"TAGS\x01t\x02DELAY\x010", 116),  # level 0: "t".hashCode()
        (b"TAGS\x01t", 116),  # no DELAY: the TAGS hash
    ],
)
def test_schedule_records_tags_code_from_the_spec(cl: CommitLog, props: bytes, want: int) -> None:
    """The tags code of a SCHEDULE_TOPIC_XXXX unit, worked out by hand from Java's rules."""
    rec = encode_record(
        body=b"b", topic=SCHEDULE_TOPIC.encode(), properties=props, queue_id=2, flag=0,
        queue_offset=0, phy_offset=0, sys_flag=0, born_timestamp=1, born_host=V4,
        store_timestamp=1_700_000_000_000, store_host=V4,
    )  # fmt: skip
    size, req = cl.checker.check(memoryview(rec), 0, True)
    assert size == len(rec) and req is not None and req.tags_code == want
