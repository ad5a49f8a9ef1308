"""Message trace records (protocol/trace.py) as RocketMQ 4.9's TraceDataEncoder writes them, the
consume hook around a handler, and the dispatcher's batching (actors/client/trace_dispatcher.py)
with a recording sender in place of its inner producer."""

from __future__ import annotations

from typing import Any

import pytest

from actors.client.consumer.consume_message_service import ConsumeResult, traced_handler
from actors.client.records import Message, MessageExt, SendResult, SendStatus
from actors.client.trace_dispatcher import (
    AsyncTraceDispatcher,
    pub_context,
    pub_record,
    sub_before,
)
from protocol.bodies import MessageQueue
from protocol.message import create_offset_msg_id
from protocol.record import pack_host
from protocol.trace import (
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
    batch_body,
    decode,
    encode,
    views_of,
)

C, E = "\x01", "\x02"


def test_a_pub_record_field_by_field() -> None:
    bean = TraceBean(topic="T", msg_id="ID1", offset_msg_id="OFF1", tags="TagA", keys="k1 k2",
                     store_host="127.0.0.1:10911", body_length=5)  # fmt: skip
    ctx = TraceContext(TraceType.Pub, 1700000000000, "DefaultRegion", "pg", cost_time=3,
                       beans=[bean])  # fmt: skip
    text, keys = encode(ctx)
    assert text == C.join(["Pub", "1700000000000", "DefaultRegion", "pg", "T", "ID1", "TagA",
                           "k1 k2", "127.0.0.1:10911", "5", "3", "0", "OFF1", "true"]) + E
    assert keys == ["ID1", "k1", "k2"]


def test_missing_tags_and_keys_are_written_null_as_java_writes_them() -> None:
    ctx = TraceContext(TraceType.SubBefore, 1, None, "cg", request_id="R",
                       beans=[TraceBean(msg_id="ID2", tags=None, keys=None)])  # fmt: skip
    text, keys = encode(ctx)
    # Java's String.split drops trailing empty fields: an empty last field breaks its decoder
    assert text == C.join(["SubBefore", "1", "null", "cg", "R", "ID2", "0", "null"]) + E
    assert keys == ["ID2"]


@pytest.mark.parametrize("ctx", [
    TraceContext(TraceType.Pub, 5, "R", "pg", 7, False, beans=[TraceBean(
        topic="T", msg_id="M", offset_msg_id="O", tags="t", keys="k", store_host="h:1",
        body_length=9, msg_type=MessageType.Delay_Msg)]),
    TraceContext(TraceType.SubBefore, 6, "R", "cg", request_id="Q", beans=[
        TraceBean(msg_id="M1", keys="a", retry_times=2), TraceBean(msg_id="M2", keys="b")]),
    TraceContext(TraceType.SubAfter, 8, "R", "cg", 4, False, "Q", 4, beans=[
        TraceBean(msg_id="M1", keys="a")]),
    TraceContext(TraceType.EndTransaction, 9, "R", "pg", beans=[TraceBean(
        topic="T", msg_id="M", tags="t", keys="k", store_host="h:1",
        msg_type=MessageType.Trans_msg_Commit, transaction_id="X",
        transaction_state="COMMIT_MESSAGE", from_transaction_check=True)]),
])  # fmt: skip
def test_records_decode_to_what_was_encoded(ctx: TraceContext) -> None:
    text, _keys = encode(ctx)
    back = decode(text)
    assert len(back) == len(ctx.beans)
    for i, got in enumerate(back):
        assert got.trace_type is ctx.trace_type
        assert got.beans[0].msg_id == ctx.beans[i].msg_id
        assert got.beans[0].keys == ctx.beans[i].keys
        if ctx.trace_type is not TraceType.SubAfter:
            assert (got.time_stamp, got.region_id, got.group_name) == \
                (ctx.time_stamp, ctx.region_id, ctx.group_name)  # fmt: skip
        else:
            assert (got.request_id, got.cost_time, got.success, got.context_code,
                    got.time_stamp, got.group_name) == (ctx.request_id, ctx.cost_time,
                                                        ctx.success, ctx.context_code,
                                                        ctx.time_stamp, ctx.group_name)
    if ctx.trace_type is TraceType.EndTransaction:
        b = back[0].beans[0]
        assert (b.transaction_id, b.transaction_state, b.from_transaction_check, b.msg_type) == \
            ("X", "COMMIT_MESSAGE", True, MessageType.Trans_msg_Commit)  # fmt: skip


def test_a_batch_body_and_its_views() -> None:
    pub = encode(TraceContext(TraceType.Pub, 1, "R", "pg", beans=[TraceBean(msg_id="A",
                                                                            keys="k")]))
    other = encode(TraceContext(TraceType.Pub, 2, "R", "pg", beans=[TraceBean(msg_id="B")]))
    body, keys = batch_body([pub, other])
    assert keys == "A k B"
    views = views_of("A", body, "10.0.0.1")
    assert [(v.msg_id, v.trace_type, v.client_host) for v in views] == [("A", "Pub", "10.0.0.1")]
    assert decode("Garbage" + C + "x" + E + "Pub" + C + "short" + E) == []


def _ext(msg_id: str, **props: str) -> MessageExt:
    return MessageExt(topic="T", body=b"x", msg_id=msg_id, properties=props,
                      queue=MessageQueue("T", "b", 0))  # fmt: skip


class _Recorder:
    def __init__(self) -> None:
        self.records: list[TraceContext] = []

    def append(self, ctx: TraceContext) -> bool:
        self.records.append(ctx)
        return True


@pytest.mark.parametrize(("outcome", "ok", "code"), [
    (ConsumeResult.SUCCESS, True, ConsumeReturnType.SUCCESS),
    (ConsumeResult.RECONSUME_LATER, False, ConsumeReturnType.FAILED),
    (None, False, ConsumeReturnType.RETURNNULL),
    ("raise", False, ConsumeReturnType.EXCEPTION),
])  # fmt: skip
def test_the_consume_hook_around_a_handler(outcome: Any, ok: bool,
                                           code: ConsumeReturnType) -> None:  # fmt: skip
    rec = _Recorder()

    def handler(msgs: tuple[MessageExt, ...]) -> Any:
        if outcome == "raise":
            raise RuntimeError("boom")
        return outcome

    wrapped = traced_handler(handler, rec, "cg", 60_000)  # type: ignore[arg-type]
    msgs = (_ext("M1", MSG_REGION="R1"), _ext("M2"))
    if outcome == "raise":
        with pytest.raises(RuntimeError):
            wrapped(msgs)
    else:
        assert wrapped(msgs) is outcome
    before, after = rec.records
    assert before.trace_type is TraceType.SubBefore and after.trace_type is TraceType.SubAfter
    assert [b.msg_id for b in after.beans] == ["M1", "M2"]
    assert after.request_id == before.request_id and after.success is ok
    assert after.context_code == int(code) and after.group_name == "cg"
    assert sub_before("cg", [_ext("M3", TRACE_ON="false")], 1) is None  # trace off: none


def test_pub_record_of_a_send() -> None:
    off = create_offset_msg_id(pack_host("127.0.0.1", 10911), 1234)
    result = SendResult(SendStatus.SEND_OK, "UNIQ", off, MessageQueue("T", "b", 1), 3)
    ctx = pub_context("pg", Message("T", b"abc", tags="t", delay_level=2), result, 100, 107)
    assert ctx is not None
    b = ctx.beans[0]
    assert (b.msg_id, b.offset_msg_id, b.store_host, b.body_length, b.msg_type, b.keys) == \
        ("UNIQ", off, "127.0.0.1:10911", 3, MessageType.Delay_Msg, None)  # fmt: skip
    assert ctx.cost_time == 7 and ctx.success
    off_result = SendResult(SendStatus.SEND_OK, "U", off, MessageQueue("T", "b", 1), 3,
                            trace_on=False)  # fmt: skip
    assert pub_context("pg", Message("T", b"x"), off_result, 0, 1) is None
    # the worker's direct encoding is the record's
    for msg in (Message("T", b"abc", tags="t", delay_level=2), Message("T", b"x", keys="a b")):
        assert pub_record("pg", msg, result, 100, 107) == \
            encode(pub_context("pg", msg, result, 100, 107))  # type: ignore[arg-type]  # fmt: skip
    assert pub_record("pg", Message("T", b"x"), off_result, 0, 1) is None


class _Sender:
    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.closed = False

    def start(self) -> None:
        pass

    def send_async(self, msg: Message, *, callback: Any = None) -> None:
        self.sent.append(msg)

    def close(self, timeout: float = 10.0) -> None:
        self.closed = True


def test_the_dispatcher_batches_and_sends_what_is_left_on_close() -> None:
    sender = _Sender()
    d = AsyncTraceDispatcher(sender, "MyTrace")
    d.start()
    for i in range(3):
        assert d.append(TraceContext(TraceType.Pub, i, "R", "pg",
                                     beans=[TraceBean(msg_id=f"M{i}", keys=f"k{i}")]))
    d.close()
    assert sender.closed
    records = [r for m in sender.sent for r in decode(m.body.decode())]
    assert sorted(r.beans[0].msg_id for r in records) == ["M0", "M1", "M2"]
    assert {m.topic for m in sender.sent} == {"MyTrace"}
    assert set(" ".join(m.keys or "" for m in sender.sent).split()) == \
        {"M0", "M1", "M2", "k0", "k1", "k2"}  # fmt: skip


def test_a_full_queue_drops_and_counts() -> None:
    d = AsyncTraceDispatcher(_Sender())  # not started: nothing drains the queue
    ctx = TraceContext(TraceType.Pub, 1, beans=[TraceBean(msg_id="M")])
    results = [d.append(ctx) for _ in range(1100)]
    assert results.count(False) == 1100 - 1024 and d.discarded == 1100 - 1024
