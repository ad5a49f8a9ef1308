"""Message classes, record decode/encode, ids and batch bodies (protocol/message.py)."""

from __future__ import annotations

import dataclasses
import datetime
import pickle
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import message as M
from protocol.message import (
    Message,
    MessageDecodeError,
    MessageExt,
    create_offset_msg_id,
    decode_message_ext,
    decode_messages,
    decode_offset_msg_id,
    encode_message_ext,
)
from protocol.message_batch import (
    BatchItem,
    decode_batch,
    encode_batch,
    expand_batch,
    merge_batch_properties,
)
from protocol.message_client_id_setter import UniqIdGenerator, create_uniq_id, uniq_id_time_ms
from protocol.message_properties import string_to_properties
from protocol.record import body_crc, pack_host, unpack_host

UNIQ = "7F0000016FD229C216E16C02C8BC0000"
STORE = pack_host("192.168.1.10", 10911)
BORN = pack_host("10.0.0.5", 50000)


def _example(**kw: object) -> MessageExt:
    fields: dict[str, object] = dict(
        topic="TopicTest", body=b"Hello RocketMQ",
        properties={"UNIQ_KEY": UNIQ, "CLUSTER": "DefaultCluster", "TAGS": "TagA"},
        queue_id=1, queue_offset=7, commit_log_offset=4096, born_timestamp=1700000000000,
        born_host=BORN, store_timestamp=1700000000001, store_host=STORE,
    )  # fmt: skip
    fields.update(kw)
    return MessageExt(**fields)  # type: ignore[arg-type]


def _stored(m: MessageExt) -> MessageExt:
    """m with the fields the encoder derives (crc, size) filled in."""
    size = len(encode_message_ext(m))
    return dataclasses.replace(m, body_crc=body_crc(m.body), store_size=size)


# --- fixed vectors ------------------------------------------------------------------------------
def test_spec_188_byte_record_decodes() -> None:
    rec = encode_message_ext(_example())
    assert len(rec) == 188
    m = decode_message_ext(rec)
    assert m.store_size == 188 and m.body_crc == 1774740973
    assert m.topic == "TopicTest" and m.body == b"Hello RocketMQ" and m.tags == "TagA"
    assert m.msg_id == UNIQ
    assert m.offset_msg_id == "C0A8010A00002A9F0000000000001000"
    assert m.born_address == "10.0.0.5:50000" and m.store_address == "192.168.1.10:10911"
    assert m.tags_code == 2598919


def test_msg_id_falls_back_to_offset_id() -> None:
    m = decode_message_ext(encode_message_ext(_example(properties={"TAGS": "x"})))
    assert m.msg_id == m.offset_msg_id == create_offset_msg_id(STORE, 4096)


def test_decode_at_position_and_buffer_types() -> None:
    rec = encode_message_ext(_example())
    buf = b"\x00" * 5 + rec
    for b in (buf, bytearray(buf), memoryview(buf)):
        assert decode_message_ext(b, 5).body == b"Hello RocketMQ"


# --- lazy fields --------------------------------------------------------------------------------
def test_lazy_properties_equality_pickle_replace() -> None:
    want = _stored(_example())
    rec = encode_message_ext(want)
    assert decode_message_ext(rec) == want
    assert pickle.loads(pickle.dumps(decode_message_ext(rec))) == want
    r = dataclasses.replace(decode_message_ext(rec), queue_id=9)
    assert r.queue_id == 9 and r.properties == want.properties and r.msg_id == UNIQ
    assert "TagA" in repr(decode_message_ext(rec))


def test_reencode_without_parsing_is_byte_identical() -> None:
    rec = encode_message_ext(_example())
    assert encode_message_ext(decode_message_ext(rec)) == rec


def test_replaced_properties_are_encoded_not_the_stale_raw_form() -> None:
    rec = encode_message_ext(_example())
    m = decode_message_ext(rec)
    m.properties = {"TAGS": "TagB"}
    again = decode_message_ext(encode_message_ext(m))
    assert again.properties == {"TAGS": "TagB"}
    m2 = decode_message_ext(rec)
    m2.properties["KEYS"] = "k1 k2"
    assert decode_message_ext(encode_message_ext(m2)).key_list == ["k1", "k2"]


def test_unknown_attribute_still_raises() -> None:
    m = decode_message_ext(encode_message_ext(_example()))
    with pytest.raises(AttributeError):
        _ = m.no_such_field  # type: ignore[attr-defined]


def test_message_helpers() -> None:
    msg = Message("T", b"b")
    msg.tags = "TagA"
    msg.keys = ["a", "b"]
    msg.delay_time_level = 3
    msg.wait_store_msg_ok = False
    assert msg.properties == {"TAGS": "TagA", "KEYS": "a b", "DELAY": "3", "WAIT": "false"}
    assert msg.key_list == ["a", "b"] and msg.delay_time_level == 3
    assert not msg.wait_store_msg_ok
    msg.tags = None
    msg.delay_time_level = 0
    assert "TAGS" not in msg.properties and "DELAY" not in msg.properties
    assert Message("T").wait_store_msg_ok


# --- hypothesis round trips ---------------------------------------------------------------------
_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=10,
)
_v4 = st.builds(
    lambda a, p: pack_host(".".join(map(str, a)), p),
    st.lists(st.integers(0, 255), min_size=4, max_size=4),
    st.integers(0, 65535),
)
_v6 = st.builds(
    lambda raw, p: raw + p.to_bytes(4, "big"),
    st.binary(min_size=16, max_size=16).filter(lambda b: b[:12] != b"\x00" * 10 + b"\xff\xff"),
    st.integers(0, 65535),
)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)

message_exts = st.builds(
    MessageExt,
    topic=st.text(alphabet="abcXYZ09_-%|", min_size=1, max_size=40),
    body=st.binary(max_size=200),
    flag=_i32,
    properties=st.dictionaries(_text, _text, max_size=6),
    queue_id=_i32,
    queue_offset=_i64,
    commit_log_offset=_i64,
    sys_flag=st.integers(0, 0x7FF).map(lambda f: f & ~0x31),  # not compressed, hosts set below
    born_timestamp=_i64,
    born_host=st.one_of(_v4, _v6),
    store_timestamp=_i64,
    store_host=st.one_of(_v4, _v6),
    reconsume_times=_i32,
    prepared_transaction_offset=_i64,
)


def _with_host_flags(m: MessageExt) -> MessageExt:
    f = m.sys_flag & ~0x30
    f |= 0x10 if len(m.born_host) == 20 else 0
    f |= 0x20 if len(m.store_host) == 20 else 0
    return _stored(dataclasses.replace(m, sys_flag=f))


@settings(max_examples=150, deadline=None)
@given(message_exts)
def test_message_ext_round_trip(m: MessageExt) -> None:
    want = _with_host_flags(m)
    rec = encode_message_ext(want)
    got = decode_message_ext(rec, check_crc=True)
    assert got == want
    assert got.offset_msg_id == create_offset_msg_id(want.store_host, want.commit_log_offset)
    assert len(got.offset_msg_id) == (32 if len(want.store_host) == 8 else 56)
    assert encode_message_ext(got) == rec


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(message_exts, min_size=1, max_size=6), st.integers(0, 400))
def test_decode_messages_batch_and_torn_tail(msgs: list[MessageExt], cut: int) -> None:
    wants = [_with_host_flags(m) for m in msgs]
    recs = [encode_message_ext(w) for w in wants]
    body = b"".join(recs)
    assert decode_messages(body) == wants
    torn = body[: max(0, len(body) - cut)]
    got = decode_messages(torn)
    # Whole records before the tear decode; the torn one ends the batch silently.
    whole, total = 0, 0
    for r in recs:
        if total + len(r) <= len(torn):
            whole += 1
            total += len(r)
        else:
            break
    assert got == wants[:whole]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 3))
def test_arbitrary_bytes_decode_or_raise_value_error(data: bytes, pos: int) -> None:
    try:
        m = decode_message_ext(data, pos, check_crc=bool(pos & 1))
    except ValueError:
        pass
    else:
        assert m.store_size <= len(data) - pos
        _ = (m.properties, m.msg_id)
    assert isinstance(decode_messages(data), list)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=1, max_size=400), st.data())
def test_corrupted_record_decodes_or_raises_value_error(junk: bytes, data: st.DataObject) -> None:
    rec = bytearray(encode_message_ext(_example()))
    at = data.draw(st.integers(0, len(rec) - 1))
    rec[at : at + len(junk)] = junk[: len(rec) - at]
    try:
        m = decode_message_ext(bytes(rec), check_crc=True)
    except ValueError:
        pass
    else:  # whatever survived the CRC check is a whole record inside the buffer
        assert 0 < m.store_size <= len(rec)
        assert isinstance(m.body, bytes)


# --- compression --------------------------------------------------------------------------------
@pytest.mark.parametrize("ctype_flag", [0x001, 0x301])
def test_zlib_body_is_inflated_and_flag_cleared(ctype_flag: int) -> None:
    plain = b"abc" * 3000
    m = _example(body=zlib.compress(plain, 5), sys_flag=ctype_flag)
    rec = encode_message_ext(m)
    got = decode_message_ext(rec, check_crc=True)
    assert got.body == plain and not got.is_compressed
    raw = decode_message_ext(rec, decompress=False)
    assert raw.body == m.body and raw.is_compressed


def test_lz4_zstd_bodies_left_as_stored() -> None:
    for ctype in (0x101, 0x201):
        got = decode_message_ext(
            encode_message_ext(_example(body=b"\x04\x22opaque", sys_flag=ctype))
        )
        assert got.body == b"\x04\x22opaque" and got.is_compressed
        assert M.compression_type(got.sys_flag) == ctype >> 8


def test_bad_zlib_body_is_a_decode_error_and_ends_batch() -> None:
    good = encode_message_ext(_example())
    bad = encode_message_ext(_example(body=b"not zlib", sys_flag=0x301))
    with pytest.raises(MessageDecodeError):
        decode_message_ext(bad)
    assert len(decode_messages(good + bad + good)) == 1


def test_sysflag_helpers() -> None:
    assert M.transaction_type(0x4 | 0x1) == M.TRANSACTION_PREPARED_TYPE
    assert M.reset_transaction_type(0x5, M.TRANSACTION_COMMIT_TYPE) == 0x9
    assert M.compression_type(0x1) == M.COMPRESSION_ZLIB
    assert M.needs_consume_queue(0x8) and M.needs_consume_queue(0x0)
    assert not M.needs_consume_queue(0x4) and not M.needs_consume_queue(0xC)
    assert M.tags_code(None) == 0 and M.tags_code("") == 0 and M.tags_code("TagA") == 2598919
    assert zlib.decompress(M.compress_body(b"x" * 5000)) == b"x" * 5000


# --- ids ----------------------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(st.one_of(_v4, _v6), _i64)
def test_offset_msg_id_round_trip(host: bytes, phy: int) -> None:
    mid = create_offset_msg_id(host, phy)
    assert mid == mid.upper() and len(mid) == (32 if len(host) == 8 else 56)
    ip, port = unpack_host(host)
    assert decode_offset_msg_id(mid) == (ip, port, phy)


def test_offset_msg_id_rejects_bad_input() -> None:
    for bad in ("", "ABC", "Z" * 32, "0" * 40):
        with pytest.raises(ValueError):
            decode_offset_msg_id(bad)


def test_uniq_id_matches_cpp_client_vector() -> None:
    # From FIRST_FRAMES.md: C++ client, 127.0.0.1, pid 28626, counter 0.
    gen = UniqIdGenerator(bytes([127, 0, 0, 1]), 28626, 0x29C216E1)
    start = datetime.datetime(2026, 11, 1).timestamp() * 1000
    uid = gen.next_id(int(start) + 0x6C02C8BC)
    assert uid == UNIQ
    assert uniq_id_time_ms(uid, int(start) + 5) == int(start) + 0x6C02C8BC


def test_uniq_id_counter_wraps_and_prefix_fixed() -> None:
    gen = UniqIdGenerator(bytes(16), 0x12345, -1, counter_start=0xFFFF)
    now = int(datetime.datetime(2026, 3, 15).timestamp() * 1000)
    a, b = gen.next_id(now), gen.next_id(now)
    assert len(a) == 56 and a[:44] == b[:44] == "0" * 32 + "2345" + "FFFFFFFF"
    assert a.endswith("FFFF") and b.endswith("0000")


def test_create_uniq_id_is_unique_and_well_formed() -> None:
    ids = [create_uniq_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and i == i.upper() for i in ids)
    int(ids[0], 16)


# --- batch --------------------------------------------------------------------------------------
batch_items = st.builds(
    BatchItem,
    flag=_i32,
    body=st.binary(max_size=100),
    properties=st.dictionaries(_text, _text, max_size=5),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(batch_items, max_size=6))
def test_batch_round_trip(items: list[BatchItem]) -> None:
    body = encode_batch(items)
    assert decode_batch(body) == items
    assert len(body) == sum(22 + len(i.body) + len(M.properties_to_string(i.properties).encode())
                            for i in items)  # fmt: skip


def test_batch_item_layout() -> None:
    body = encode_batch([BatchItem(7, b"hi", {"A": "1"})])
    assert body == (
        (27).to_bytes(4, "big") + bytes(8) + (7).to_bytes(4, "big") + (2).to_bytes(4, "big")
        + b"hi" + (3).to_bytes(2, "big") + b"A\x011"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("item", "batch", "merged"),
    [
        (b"A\x011", b"WAIT\x01true", b"A\x011\x02WAIT\x01true"),
        (b"A\x011\x02", b"WAIT\x01true", b"A\x011\x02WAIT\x01true"),
        (b"", b"WAIT\x01true", b"WAIT\x01true"),
        (b"A\x011\x02", b"", b"A\x011\x02"),
        (b"", b"", b""),
    ],
)
def test_batch_property_merge_rule(item: bytes, batch: bytes, merged: bytes) -> None:
    assert merge_batch_properties(item, batch) == merged


def test_expand_batch_items_get_batch_properties_and_crc() -> None:
    items = [BatchItem(1, b"one", {"UNIQ_KEY": "A"}), BatchItem(2, b"two", {})]
    out = expand_batch(encode_batch(items), "WAIT\x01true\x02CLUSTER\x01c")
    assert [(x.flag, bytes(x.body)) for x in out] == [(1, b"one"), (2, b"two")]
    assert out[0].properties == b"UNIQ_KEY\x01A\x02WAIT\x01true\x02CLUSTER\x01c"
    assert out[1].properties == b"WAIT\x01true\x02CLUSTER\x01c"
    assert out[0].body_crc == body_crc(b"one")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_batch_arbitrary_bytes_decode_or_raise_value_error(data: bytes) -> None:
    try:
        items = decode_batch(data)
    except ValueError:
        pass
    else:  # every decoded item took at least its 22 fixed bytes
        assert 22 * len(items) <= len(data)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab\x01\x02é", max_size=30))
def test_parse_properties_matches_reference_rules(s: str) -> None:
    assert M.parse_properties(s) == string_to_properties(s)
