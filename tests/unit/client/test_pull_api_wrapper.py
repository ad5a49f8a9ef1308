"""PullAPIWrapper: the one-pass pull-body decoder gives what the full decoder + from_wire give,
filters tags on the client, and stops at a broken record; broker choice and sys flags."""

from __future__ import annotations

import dataclasses
import pickle
import threading
import zlib

import pytest

from actors.client.consumer.message_decoder import PulledMessageExt, decode_pull_messages
from actors.client.consumer.pull_api_wrapper import PullAPIWrapper, build_sys_flag
from actors.client.records import MessageExt
from protocol.bodies import MessageQueue, SubscriptionData
from protocol.codes import PullSysFlag
from protocol.message import MessageExt as WireExt
from protocol.message import decode_messages, encode_message_ext
from protocol.record import pack_host

MQ = MessageQueue("Orders", "broker-a", 3)


def record(i: int, *, tags: str | None = "A", v6: bool = False, compressed: bool = False,
           prepared: bool = False) -> bytes:
    props = {"KEYS": f"k{i}", "UNIQ_KEY": f"AC110001000{i:021d}", "WAIT": "true"}
    if tags:
        props["TAGS"] = tags
    if prepared:
        props["TRAN_MSG"] = "true"
    body = b"body-%d" % i
    sys_flag = 0
    if compressed:
        body, sys_flag = zlib.compress(body * 100), 0x1
    host = pack_host("::1", 9000 + i) if v6 else pack_host(f"10.0.0.{i + 1}", 9000 + i)
    store = pack_host("::1", 10911) if v6 else pack_host("127.0.0.1", 10911)
    if v6:
        sys_flag |= 0x10 | 0x20
    m = WireExt(topic="Orders", body=body, flag=7, properties=props, queue_id=3, queue_offset=i,
                commit_log_offset=1000 * i, sys_flag=sys_flag, born_timestamp=111 + i,
                born_host=host, store_timestamp=222 + i, store_host=store, reconsume_times=i % 2)
    return encode_message_ext(m)


def reference(body: bytes) -> list[MessageExt]:
    out = []
    for w in decode_messages(body):
        w.properties["MIN_OFFSET"] = "5"
        w.properties["MAX_OFFSET"] = "99"
        out.append(MessageExt.from_wire(w, MQ.broker_name))
    return out


def test_fast_decoder_equals_the_full_decoder() -> None:
    body = b"".join([record(0), record(1, v6=True), record(2, compressed=True),
                     record(3, tags=None), record(4, prepared=True)])
    fast = decode_pull_messages(body, MQ, None, 5, 99)
    assert fast == reference(body)
    assert fast[2].body == b"body-2" * 100 and fast[4].transaction_id == fast[4].msg_id
    assert fast[0].born_host == "10.0.0.1:9000" and fast[0].queue == MQ
    assert fast[0].properties["MAX_OFFSET"] == "99"


def test_a_reused_view_leaves_every_record_whole() -> None:
    """Over a view (a read buffer reused once the decode returns), plain runs broken by IPv6
    and compressed records: every message, fields and body, outlives the buffer."""
    body = b"".join([record(0), record(1), record(2, v6=True), record(3),
                     record(4, compressed=True), record(5), record(6), record(7, tags=None)])
    buf = bytearray(body)
    got = decode_pull_messages(memoryview(buf), MQ, None, 5, 99)
    buf[:] = bytes(len(buf))  # the buffer's next read
    assert got == reference(body)
    assert [m.queue_offset for m in got] == list(range(8))


def test_lazy_records_decode_on_first_read_and_behave_as_records() -> None:
    body = b"".join(record(i) for i in range(3))
    ref = reference(body)
    lazy = decode_pull_messages(body, MQ, None, 5, 99)
    m = lazy[1]
    assert isinstance(m, MessageExt) and m.queue_offset == 1 and m.body == b"body-1"
    assert m.msg_id == ref[1].msg_id  # the first header read decodes them all
    assert (m.keys, m.tags, m.born_host, m.store_size) == \
        (ref[1].keys, ref[1].tags, ref[1].born_host, ref[1].store_size)  # fmt: skip
    assert hash(lazy[0]) == hash(ref[0]) and ref[2] == lazy[2] and lazy[2] != ref[1]
    assert pickle.loads(pickle.dumps(lazy[0])) == ref[0]
    again = dataclasses.replace(lazy[2], reconsume_times=9)
    assert again.reconsume_times == 9 and again.properties == ref[2].properties
    assert "msg_id='" in repr(decode_pull_messages(body, MQ, None, 5, 99)[0])
    try:
        m.no_such_field  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError:
        pass
    else:
        raise AssertionError("an unknown attribute must raise AttributeError")


@pytest.mark.parametrize("owner", [bytes, bytearray, memoryview])
def test_a_lazy_record_is_a_plain_message_once_a_header_field_is_read(owner: type) -> None:
    """Reading the eager fields decodes nothing; the first read of another decodes the
    record and the object becomes a MessageExt equal to the full decoder's. Eight threads
    reading different fields of the same fresh records at once all read the full decoder's
    values (the record is decoded once or more, never seen half done)."""
    body = b"".join(record(i) for i in range(40))
    ref = reference(body)
    lazy = decode_pull_messages(owner(body), MQ, None, 5, 99)
    m = lazy[0]
    assert (m.topic, m.body, m.queue, m.queue_offset) == ("Orders", b"body-0", MQ, 0)
    assert type(m) is PulledMessageExt
    assert m.born_timestamp == ref[0].born_timestamp
    assert type(m) is MessageExt and m == ref[0] and m.properties == ref[0].properties
    names = ["properties", "msg_id", "tags", "keys", "born_host", "store_host",
             "transaction_id", "commitlog_offset"]  # fmt: skip
    start = threading.Barrier(len(names))
    seen: dict[str, list[object]] = {}

    def read(name: str) -> None:
        start.wait(5)
        seen[name] = [getattr(x, name) for x in lazy[1:]]

    threads = [threading.Thread(target=read, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for n in names:
        assert seen[n] == [getattr(r, n) for r in ref[1:]], n
    assert all(type(x) is MessageExt for x in lazy) and lazy == ref


def test_client_side_tag_filter_and_broken_tail() -> None:
    body = b"".join([record(0, tags="A"), record(1, tags="B"), record(2, tags=None),
                     record(3, tags="C", v6=True)])
    sub = SubscriptionData.build("Orders", "A || C", 1)
    assert [m.queue_offset for m in decode_pull_messages(body, MQ, sub, 0, 9)] == [0, 3]
    every = decode_pull_messages(body, MQ, SubscriptionData.build("Orders", "*"), 0, 9)
    assert len(every) == 4
    sql = SubscriptionData("Orders", "a > 1", [], [], 1, "SQL92")
    assert len(decode_pull_messages(body, MQ, sql, 0, 9)) == 4  # the broker filtered SQL92
    cut = body[: len(record(0)) + 10]
    assert [m.queue_offset for m in decode_pull_messages(cut, MQ, None, 0, 9)] == [0]


def test_broker_choice_and_sys_flags() -> None:
    api = PullAPIWrapper("g")
    assert api.recalculate_pull_from_which_node(MQ) == 0
    api.update_pull_from_which_node(MQ, 1)
    assert api.recalculate_pull_from_which_node(MQ) == 1
    assert build_sys_flag(True, True, False, False) == (
        PullSysFlag.FLAG_COMMIT_OFFSET | PullSysFlag.FLAG_SUSPEND)
    assert build_sys_flag(True, True, True, True) == (
        PullSysFlag.FLAG_SUSPEND | PullSysFlag.FLAG_SUBSCRIPTION)  # no commit at a slave
