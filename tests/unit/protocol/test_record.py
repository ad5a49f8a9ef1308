"""Stored-record layout, properties string and Java hash (protocol/record.py)."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.message_properties import properties_to_string, string_to_properties
from protocol.record import (
    MESSAGE_MAGIC_CODE,
    RecordError,
    body_crc,
    decode_record_fields,
    encode_record,
    java_string_hash,
    pack_host,
    record_size,
    unpack_host,
)

UNIQ = "7F0000016FD229C216E16C02C8BC0000"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("TagA", 2598919), ("TagB", 2598920), ("*", 42), ("TopicTest#KEY1", -1656969516), ("", 0)],
)
def test_java_string_hash_examples(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_java_string_hash_non_ascii_uses_utf16_units() -> None:
    # "é" is one UTF-16 unit (0xE9); "😀" is the surrogate pair D83D DE00.
    assert java_string_hash("é") == 0xE9
    assert java_string_hash("😀") == 0xD83D * 31 + 0xDE00


def test_body_crc_example() -> None:
    assert body_crc(b"Hello RocketMQ") == 1774740973
    assert body_crc(b"Hello RocketMQ") == zlib.crc32(b"Hello RocketMQ") & 0x7FFFFFFF


def test_properties_string_has_no_trailing_separator() -> None:
    s = properties_to_string({"A": "1", "B": "2"})
    assert s == "A\x011\x02B\x012"
    assert properties_to_string({}) == ""


def test_properties_decode_drops_empty_names_and_values() -> None:
    s = "A\x01\x02\x01v\x02B\x012\x02\x02C\x01x\x01y"
    assert string_to_properties(s) == {"B": "2", "C": "x\x01y"}
    assert string_to_properties("") == {}


_prop_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_prop_text, _prop_text, max_size=8))
def test_properties_round_trip(props: dict[str, str]) -> None:
    assert string_to_properties(properties_to_string(props)) == props


def _example_record() -> bytes:
    props = f"UNIQ_KEY\x01{UNIQ}\x02CLUSTER\x01DefaultCluster\x02TAGS\x01TagA".encode()
    assert len(props) == 74
    return encode_record(
        body=b"Hello RocketMQ", topic=b"TopicTest", properties=props, queue_id=1, flag=0,
        queue_offset=7, phy_offset=4096, sys_flag=0, born_timestamp=1700000000000,
        born_host=pack_host("10.0.0.5", 50000), store_timestamp=1700000000001,
        store_host=pack_host("192.168.1.10", 10911),
    )  # fmt: skip


def test_spec_188_byte_example() -> None:
    rec = _example_record()
    assert len(rec) == 188 == record_size(14, 9, 74)
    assert int.from_bytes(rec[0:4], "big") == 188
    assert int.from_bytes(rec[4:8], "big", signed=True) == MESSAGE_MAGIC_CODE
    assert rec[4:8] == bytes.fromhex("DAA320A7")
    assert int.from_bytes(rec[8:12], "big") == 1774740973
    assert int.from_bytes(rec[20:28], "big") == 7
    assert int.from_bytes(rec[28:36], "big") == 4096
    assert rec[48:52] == bytes([10, 0, 0, 5])
    assert rec[64:68] == bytes([192, 168, 1, 10])
    assert int.from_bytes(rec[84:88], "big") == 14
    assert rec[88:102] == b"Hello RocketMQ"
    assert rec[102] == 9 and rec[103:112] == b"TopicTest"
    assert int.from_bytes(rec[112:114], "big") == 74
    f = decode_record_fields(rec)
    assert f.total_size == 188 and bytes(f.body) == b"Hello RocketMQ" and f.topic == b"TopicTest"


_v4 = st.builds(
    lambda a, p: pack_host(".".join(map(str, a)), p),
    st.lists(st.integers(0, 255), min_size=4, max_size=4),
    st.integers(0, 65535),
)
_v6 = st.builds(
    lambda raw, p: pack_host(unpack_host(raw + b"\x00\x00\x00\x00")[0], p),
    st.binary(min_size=16, max_size=16).filter(
        lambda b: not b.startswith(b"\x00" * 10 + b"\xff\xff")
    ),
    st.integers(0, 65535),
)
_host = st.one_of(_v4, _v6)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=150, deadline=None)
@given(
    body=st.binary(max_size=300),
    topic=st.binary(min_size=1, max_size=127),
    props=st.binary(max_size=200),
    born=_host,
    store=_host,
    qid=_i32,
    flag=_i32,
    qoff=_i64,
    phy=_i64,
    ts=_i64,
    sys_flag=st.integers(0, 0x7FF),
)
def test_record_round_trip_v4_v6(
    body: bytes, topic: bytes, props: bytes, born: bytes, store: bytes, qid: int, flag: int,
    qoff: int, phy: int, ts: int, sys_flag: int,
) -> None:  # fmt: skip
    rec = encode_record(
        body=body, topic=topic, properties=props, queue_id=qid, flag=flag, queue_offset=qoff,
        phy_offset=phy, sys_flag=sys_flag, born_timestamp=ts, born_host=born,
        store_timestamp=ts ^ 1, store_host=store, reconsume_times=3,
        prepared_transaction_offset=phy ^ 5,
    )  # fmt: skip
    f = decode_record_fields(rec)
    assert len(rec) == f.total_size == record_size(len(body), len(topic), len(props), f.sys_flag)
    assert (bytes(f.body), f.topic, f.properties) == (body, topic, props)
    assert (f.born_host, f.store_host) == (born, store)
    assert (f.queue_id, f.flag, f.queue_offset, f.phy_offset) == (qid, flag, qoff, phy)
    assert f.body_crc == body_crc(body)
    assert f.sys_flag & 0x10 == (0x10 if len(born) == 20 else 0)
    assert f.sys_flag & 0x20 == (0x20 if len(store) == 20 else 0)
    assert f.sys_flag & ~0x30 == sys_flag & ~0x30


def test_decode_record_rejects_truncation_and_bad_magic() -> None:
    rec = _example_record()
    for cut in (0, 10, 47, 48, 100, 187):
        with pytest.raises(RecordError):
            decode_record_fields(rec[:cut])
    bad = bytearray(rec)
    bad[4:8] = b"\x00\x00\x00\x00"
    with pytest.raises(RecordError):
        decode_record_fields(bytes(bad))


def test_pack_host_folds_ipv4_mapped() -> None:
    assert pack_host("::ffff:1.2.3.4", 9) == bytes([1, 2, 3, 4, 0, 0, 0, 9])
    assert unpack_host(pack_host("fe80::1", 10911)) == ("fe80::1", 10911)


@settings(max_examples=150, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(["plain", "v6", "compressed", "blank"]), max_size=8),
    cut=st.integers(0, 40),
    bodies=st.lists(st.binary(max_size=40), min_size=8, max_size=8),
)
def test_plain_records_is_record_at_for_the_plain_run(kinds: list[str], cut: int,
                                                      bodies: list[bytes]) -> None:
    """plain_records takes exactly the leading records record_at reads as IPv4 and not
    compressed, with record_at's fields, and stops where record_at says something else is
    (another kind of record, a blank, a cut record, the end)."""
    from protocol.record import BLANK_MAGIC_CODE, plain_records, record_at

    parts = []
    for i, kind in enumerate(kinds):
        if kind == "blank":
            parts.append(struct.pack(">ii", 8, BLANK_MAGIC_CODE))
            continue
        v6 = kind == "v6"
        parts.append(encode_record(
            body=bodies[i], topic=b"T%d" % i, properties=b"A\x01%d" % i, queue_id=0, flag=0,
            queue_offset=100 + i, phy_offset=i, sys_flag=1 if kind == "compressed" else 0,
            born_timestamp=1, store_timestamp=2,
            born_host=pack_host("::1", 1) if v6 else pack_host("10.0.0.1", 1),
            store_host=pack_host("127.0.0.1", 2)))  # fmt: skip
    buf = b"".join(parts)
    end = max(0, len(buf) - cut)
    spans, stop = plain_records(buf, 0, end)
    pos = 0
    for span in spans:
        r = record_at(buf, pos, end)
        assert r is not None and not r[6] & 0x31
        assert span == (pos, pos + r[0], r[4], r[14] - 1, r[15])
        pos += r[0]
    assert stop == pos
    try:
        r = record_at(buf, stop, end)
    except RecordError:
        return  # a cut or bad record stopped the run
    assert r is None or r[6] & 0x31  # the end, a blank, or a record of another kind
