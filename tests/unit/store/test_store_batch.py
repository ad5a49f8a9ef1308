"""put_messages against a reference built here: record bytes, tag codes and reject statuses."""

from __future__ import annotations

import struct
import tempfile
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.java_number import NumberFormatError
from protocol.message_properties import string_to_properties
from protocol.record import encode_record, java_string_hash
from store.message_ext_batch_encoder import MalformedBatchError
from store.message_ext_broker_inner import MessageExtBatch
from store.put_message_result import PutMessageStatus
from tests.unit.store.store_helpers import open_store, small_config

S = PutMessageStatus
BORN = b"\x0a\x00\x00\x02\x00\x00\x30\x39"
STORE = b"\x7f\x00\x00\x01\x00\x00\x27\x10"
TOPIC = "BT"
QID = 1

# property names and values likely to trip a parser: TAGS / DELAY as names, inside values and
# as suffixes of other names
_NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "XTAGS", "XDELAY", "WAIT"]
_VALUES = ["", "0", "3", "A", "TagA", "k1 k2", "TAGS", "DELAY"]
_BODY_BITS = [b"", b"x", b"TAGS\x01A\x02", b"DELAY\x013", b"\x02DELAY\x01", b"\x00" * 5]


@dataclass
class Item:
    flag: int
    body: bytes
    props: bytes
    total_delta: int = 0  # a wrong TOTALSIZE when != 0 (ignored, as MessageExtBatchEncoder does)


def _props(pairs: list[tuple[str, str]], trailing: bool) -> bytes:
    s = "\x02".join(f"{k}\x01{v}" for k, v in pairs)
    return (s + ("\x02" if trailing and s else "")).encode()


items_st = st.builds(
    Item,
    flag=st.integers(0, 2**31 - 1),
    body=st.lists(st.sampled_from(_BODY_BITS), max_size=4).map(b"".join),
    props=st.builds(
        _props,
        st.lists(st.tuples(st.sampled_from(_NAMES), st.sampled_from(_VALUES)), max_size=4),
        st.booleans(),
    ),
)
batch_props_st = st.sampled_from(["", "CLUSTER\x01c1", "TAGS\x01BT", "A\x01b\x02TAGS\x01Z\x02"])


def _encode(items: list[Item]) -> bytes:
    out = b""
    for it in items:
        total = 22 + len(it.body) + len(it.props) + it.total_delta
        out += struct.pack(">iiiii", total, 0, 0, it.flag, len(it.body)) + it.body
        out += struct.pack(">H", len(it.props)) + it.props
    return out


def _stored_props(it: Item, bp: bytes) -> bytes:
    if not bp:
        return it.props
    if it.props and not it.props.endswith(b"\x02"):
        return it.props + b"\x02" + bp
    return it.props + bp


def _expected_status(items: list[Item], bp: bytes, torn: bool = False
                     ) -> PutMessageStatus | None:  # fmt: skip
    """The put's status; None: MalformedBatchError (SYSTEM_ERROR on the wire, as the
    encoder's exception is on the reference)."""
    if not items or torn:
        return None
    for it in items:
        if len(_stored_props(it, bp)) > 32767:
            return S.PROPERTIES_SIZE_EXCEEDED
    return S.PUT_OK  # an item's DELAY is stored as it is (only the batch's own is refused)


def _tags_code(props: bytes) -> int:
    """Java's: the TAGS of string2messageProperties (the last non-empty one) hashed."""
    tags = string_to_properties(props.decode("utf-8", "replace")).get("TAGS")
    return java_string_hash(tags) if tags else 0


def _check_batch(items: list[Item], bp_s: str, file_size: int, cut: int = 0) -> None:
    """Put the batch (its last `cut` bytes torn off) and compare with the reference."""
    bp = bp_s.encode()
    with tempfile.TemporaryDirectory() as root:
        s = open_store(small_config(root, mappedFileSizeCommitLog=file_size))
        try:
            s.put_messages(MessageExtBatch(TOPIC, _encode([Item(0, b"first", b"")]), QID), 5)
            max0 = s.max_phy_offset
            cq_max0 = s.get_max_offset_in_queue(TOPIC, QID)
            body = _encode(items)
            batch = MessageExtBatch(
                TOPIC, body[: len(body) - cut], QID, sys_flag=0x30, born_timestamp=77,
                born_host=BORN, store_host=STORE, reconsume_times=2, batch_properties=bp_s,
            )  # fmt: skip
            want = _expected_status(items, bp, torn=cut > 0)
            if want is None:
                with pytest.raises(MalformedBatchError):
                    s.put_messages(batch, 1_234)
            else:
                r = s.put_messages(batch, 1_234)
                assert r.status is want
            if want is not S.PUT_OK:
                assert s.max_phy_offset == max0
                assert s.get_max_offset_in_queue(TOPIC, QID) == cq_max0
                mf = s.commitlog.current_file
                assert mf is not None
                p = mf.wrote_position
                assert bytes(mf.mm[p : p + 256]) == bytes(len(mf.mm[p : p + 256]))
                return
            assert r.msg_num == len(items)
            assert r.offsets[0] == max0
            cq = s.consume_queues[(TOPIC, QID)]
            for i, (it, phy) in enumerate(zip(items, r.offsets, strict=True)):
                props = _stored_props(it, bp)
                exp = encode_record(
                    body=it.body, topic=TOPIC.encode(), properties=props, queue_id=QID,
                    flag=it.flag, queue_offset=cq_max0 + i, phy_offset=phy, sys_flag=0,
                    born_timestamp=77, born_host=BORN, store_timestamp=1_234, store_host=STORE,
                    reconsume_times=2,
                )  # fmt: skip
                got = s.select_one_message_by_offset(phy)
                assert got is not None and bytes(got) == exp
                assert cq.get_unit(cq_max0 + i) == (phy, len(exp), _tags_code(props))
            assert s.max_phy_offset == r.offsets[-1] + len(exp)
        finally:
            s.shutdown(10_000)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(items_st, max_size=6), batch_props_st)
def test_batch_matches_reference(items: list[Item], bp: str) -> None:
    _check_batch(items, bp, 1 << 20)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(items_st, min_size=1, max_size=6),
    batch_props_st,
    st.integers(0, 5),
    st.sampled_from([-1, 1, 1000]),
)
def test_totalsize_is_ignored_and_a_torn_batch_is_refused(
    items: list[Item], bp: str, k: int, delta: int
) -> None:
    """An item's TOTALSIZE is skipped (the lengths inside it rule, as in Java); a batch whose
    last item is cut short is refused whole, nothing written."""
    items[k % len(items)].total_delta = delta
    _check_batch(items, bp, 1 << 20)
    last = 22 + len(items[-1].body) + len(items[-1].props)
    _check_batch(items, bp, 1 << 20, cut=1 + k % (last - 1))


def test_properties_too_long_and_item_delay() -> None:
    big = Item(0, b"b", b"K\x01" + b"v" * 32766)
    delayed = Item(0, b"d", b"DELAY\x012")
    ok = Item(0, b"o", b"TAGS\x01A")
    assert _expected_status([ok, big, delayed], b"") is S.PROPERTIES_SIZE_EXCEEDED
    _check_batch([ok, big, delayed], "", 1 << 20)
    _check_batch([ok, delayed, big], "", 1 << 20)
    _check_batch([ok, delayed], "", 1 << 20)  # stored at once, DELAY kept in its properties
    _check_batch([ok, Item(0, b"b", b"K\x01" + b"v" * 32760)], "CLUSTER\x01c1", 1 << 20)


@pytest.mark.parametrize("bp", ["DELAY\x012", "WAIT\x01true\x02DELAY\x011"])
def test_a_batch_with_its_own_delay_is_refused(bp: str) -> None:
    """CommitLog.asyncPutMessages: the batch's own DELAY (header properties) > 0 is illegal."""
    with tempfile.TemporaryDirectory() as root:
        s = open_store(small_config(root))
        try:
            r = s.put_messages(MessageExtBatch(TOPIC, _encode([Item(0, b"x", b"")]), QID,
                                               batch_properties=bp), 5)  # fmt: skip
            assert r.status is S.MESSAGE_ILLEGAL and s.max_phy_offset == 0
            # getDelayTimeLevel: 0 is no delay; a value Integer.parseInt refuses throws
            r = s.put_messages(MessageExtBatch(TOPIC, _encode([Item(0, b"x", b"")]), QID,
                                               batch_properties="DELAY\x010"), 5)  # fmt: skip
            assert r.status is S.PUT_OK
            end = s.max_phy_offset
            with pytest.raises(NumberFormatError, match='For input string: "x"'):
                s.put_messages(MessageExtBatch(TOPIC, _encode([Item(0, b"x", b"")]), QID,
                                               batch_properties="DELAY\x01x"), 5)  # fmt: skip
            assert s.max_phy_offset == end
        finally:
            s.shutdown(0)


def test_batch_near_file_end_takes_the_slow_path() -> None:
    items = [Item(i, b"x" * 200, b"TAGS\x01T\x02KEYS\x01k") for i in range(40)]
    _check_batch(items, "CLUSTER\x01c1", 16 * 1024)
