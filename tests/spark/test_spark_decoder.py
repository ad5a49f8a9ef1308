"""The executors' column-wise decoder (no broker, no Spark): pull bodies of stored records to
Arrow batches, checked against protocol.message's MessageExt decode of the same bytes."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from deploy.spark.decoder import BatchBuilder, Gathered
from protocol.message import COMPRESSED_ZLIB_SYSFLAG, decode_messages
from protocol.record import encode_record_into, pack_host

pytestmark = [pytest.mark.spark]

pa = pytest.importorskip("pyarrow")

TOPIC = "SparkDecode"
V4 = pack_host("10.1.2.3", 50001)
V6 = pack_host("fe80::1", 50002)
STORE = pack_host("127.0.0.1", 10911)


def _record(qoff: int, body: bytes, props: bytes, *, born: bytes = V4, sys_flag: int = 0,
            reconsume: int = 0) -> bytes:  # fmt: skip
    out = bytearray(200 + len(body) + len(props))
    size = encode_record_into(
        out, 0, body=body, topic=TOPIC.encode(), properties=props, queue_id=3, flag=0,
        queue_offset=qoff, phy_offset=1000 + qoff * 7, sys_flag=sys_flag,
        born_timestamp=1_700_000_000_000 + qoff, born_host=born,
        store_timestamp=1_700_000_000_500 + qoff, store_host=STORE, reconsume_times=reconsume)
    return bytes(out[:size])


def _records() -> list[bytes]:
    big = ("grüße " * 700).encode()
    return [
        _record(10, b"plain", b"UNIQ_KEY\x01AB12\x02TAGS\x01TagA\x02KEYS\x01k1 k2"),
        _record(11, b"no uniq key", b"TAGS\x01TagB"),  # msgId: the offset message id
        _record(12, b"v6 born", b"UNIQ_KEY\x01CD34\x02TAGS\x01TagA", born=V6, reconsume=2),
        _record(13, zlib.compress(big), b"UNIQ_KEY\x01EF56\x02TAGS\x01TagZ",
                sys_flag=COMPRESSED_ZLIB_SYSFLAG),
        _record(14, b"", b""),  # empty body, no properties
        _record(15, b"u", "UNIQ_KEY\x01X\x02ünï\x01cödé ✓ 日本\x02TAGS\x01TagA".encode()),
        _record(16, b"odd pairs", b"UNIQ_KEY\x01Y\x02novalue\x02\x01noname\x02e\x01\x02TAGS"
                b"\x01TagA\x02"),  # pairs without a name or value are dropped
        _record(17, b"bad utf8", b"UNIQ_KEY\x01Z\x02x\x01\xff\xfe"),
    ]


def _expected(buf: bytes, lo: int, hi: int, tags: frozenset[str] | None) -> list[dict[str, Any]]:
    rows = []
    for m in decode_messages(buf):
        if not lo <= m.queue_offset < hi or (tags is not None and m.tags not in tags):
            continue
        rows.append({"topic": TOPIC, "brokerName": "broker-x", "queueId": 3,
                     "queueOffset": m.queue_offset, "msgId": m.msg_id, "tags": m.tags,
                     "keys": m.keys, "body": m.body, "properties": m.properties,
                     "bornTimestamp": m.born_timestamp, "storeTimestamp": m.store_timestamp,
                     "bornHost": m.born_address, "storeHost": m.store_address,
                     "reconsumeTimes": m.reconsume_times})  # fmt: skip
    return rows


def _decoded(bodies: list[bytes], lo: int, hi: int, tags: frozenset[str] | None = None,
             *, order: list[int] | None = None) -> tuple[list[dict[str, Any]], int]:  # fmt: skip
    """The bodies side by side in one buffer (as the connection reads answers), gathered in
    `order` (default: as placed); the rows of the batch built, timestamps in ms."""
    data = bytearray(b"".join(bodies))
    view, at = memoryview(data), [0]
    for b in bodies:
        at.append(at[-1] + len(b))
    g = Gathered()
    done = lo
    for i in order if order is not None else range(len(bodies)):
        done = g.gather(view, at[i], at[i + 1], done, hi)
    batch = BatchBuilder(TOPIC, "broker-x", 3, tags).build(g, data)
    rows = batch.to_pylist()
    data[:] = b"\xee" * len(data)  # the batch keeps nothing of the buffer
    assert batch.to_pylist() == rows
    for r in rows:
        r["properties"] = dict(r["properties"])
        for ts in ("bornTimestamp", "storeTimestamp"):
            r[ts] = round(r[ts].timestamp() * 1000)
    return rows, done


def test_every_column_as_the_message_decoder_has_it() -> None:
    buf = b"".join(_records())
    rows, done = _decoded([buf[:len(buf) // 2 + 7], buf], 10, 100)  # fmt: skip
    assert done == 18
    assert rows == _expected(buf, 10, 100, None)
    assert [r["queueOffset"] for r in rows] == list(range(10, 18))  # the overlap taken once
    assert rows[1]["msgId"] == rows[1]["msgId"].upper() and len(rows[1]["msgId"]) == 32
    assert rows[2]["bornHost"] == "[fe80::1]:50002"
    assert rows[3]["body"] == ("grüße " * 700).encode()
    assert rows[5]["properties"]["ünï"] == "cödé ✓ 日本"
    assert rows[6]["properties"] == {"UNIQ_KEY": "Y", "TAGS": "TagA"}
    assert rows[7]["properties"]["x"] == "\ufffd\ufffd"


def test_range_bounds_tag_filter_and_a_torn_tail() -> None:
    recs = _records()
    buf = b"".join(recs)
    rows, done = _decoded([buf], 12, 16)
    assert [r["queueOffset"] for r in rows] == [12, 13, 14, 15] and done == 16
    wanted = frozenset({"TagA"})
    rows, _ = _decoded([buf], 0, 100, wanted)
    assert rows == _expected(buf, 0, 100, wanted)
    assert [r["queueOffset"] for r in rows] == [10, 12, 15, 16]
    plain = recs[0] + recs[1] + recs[4]  # only records of the common kind, one born host
    assert _decoded([plain], 0, 100)[0] == _expected(plain, 0, 100, None)
    torn = b"".join(recs[:3]) + recs[3][:-5]  # a record cut short ends the body
    rows, done = _decoded([torn], 0, 100)
    assert [r["queueOffset"] for r in rows] == [10, 11, 12] and done == 13


def test_answers_gathered_out_of_buffer_order() -> None:
    recs = _records()
    first, second = b"".join(recs[:3]), b"".join(recs[3:])
    buf = first + second
    # the later answer was read first (a broker answering pulls out of order): it lies earlier
    rows, done = _decoded([second, first], 10, 100, order=[1, 0])
    assert done == 18
    assert rows == _expected(buf, 10, 100, None)
    plain = [recs[0], recs[1] + recs[4], recs[5]]
    rows, _ = _decoded(plain[::-1], 0, 100, order=[2, 1, 0])
    assert rows == _expected(b"".join(plain), 0, 100, None)
