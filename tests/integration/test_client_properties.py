"""User properties against a real actormq cluster (issue #20 item 4): every producer path
refuses a system property name (MessageConst.STRING_HASH_SET), a null or blank name or value
and \\x01 / \\x02 in a name, a value, the tags or the keys, with MessageValidationError before
anything is sent, so nothing of it is stored; good properties arrive intact, and what the
client sets itself (a retry's RETRY_TOPIC, ORIGIN_MESSAGE_ID, ...) still goes out."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.client import (
    AsyncProducer,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    MessageValidationError,
    Producer,
    TransactionProducer,
)
from actors.client.consumer import ConsumeContext, ConsumeResult, PushConsumer
from actors.client.validators import check_user_property
from protocol.message import STRING_HASH_SET
from tests.integration.client_helpers import (
    Target,
    read_topic,
    route_of,
    start_actormq,
    stop_actormq,
)
from tests.integration.consumer_helpers import FAST, create_topic, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

QUEUES = 4
# RocketMQ 4.9.8's MessageConst.STRING_HASH_SET, name by name
JAVA_STRING_HASH_SET = {
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC",
    "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID",
    "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME",
    "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "INSTANCE_ID", "CORRELATION_ID",
    "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
    "INNER_MULTI_QUEUE_OFFSET",
}  # fmt: skip
SYSTEM = "is used by system, input another please"
BLANK = "can not be null or blank string"
SEPARATOR = "holds .x01 or .x02"
# (message parts, what the error says): one of each kind
BAD: list[tuple[dict[str, Any], str]] = [
    ({"properties": {"TRAN_MSG": "true"}}, r"Property<TRAN_MSG> " + SYSTEM),
    ({"properties": {"UNIQ_KEY": "7F0000010000000000000000000000AA"}}, "Property<UNIQ_KEY>"),
    ({"properties": {"TAGS": "Injected"}}, "Property<TAGS>"),
    ({"properties": {"MIN_OFFSET": "0"}}, "Property<MIN_OFFSET>"),
    ({"properties": {"": "v"}}, BLANK),
    ({"properties": {" \t": "v"}}, BLANK),
    ({"properties": {"k": ""}}, BLANK),
    ({"properties": {"k": "  "}}, BLANK),
    ({"properties": {"k": None}}, BLANK),
    ({"properties": {"k": 5}}, "must be str"),
    ({"properties": {"k\x01x": "v"}}, SEPARATOR),
    ({"properties": {"k": "v\x02TAGS\x01Injected"}}, SEPARATOR),
    ({"tags": "A\x02UNIQ_KEY\x01X"}, r"tags .* hold .x01 or .x02"),
    ({"keys": "k1\x01k2"}, r"keys .* hold .x01 or .x02"),
]
GOOD = {"ключ": "значение ✓", "CHECK_IMMUNITY_TIME_IN_SECONDS": "60", "tags": "lower-case",
        "padded": "  v  "}  # fmt: skip


def _bad(topic: str, i: int, parts: dict[str, Any]) -> Message:
    return Message(topic, b"bad-%d" % i, **parts)


def _good(topic: str, body: bytes) -> Message:
    return Message(topic, body, tags="G", keys="gk", properties=GOOD)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A name server and a broker as `actormq up` starts them, stopped by PID afterwards."""
    t = start_actormq(Path(tmp_path_factory.mktemp("props")))
    try:
        yield t
    finally:
        assert stop_actormq(t) == []


class _Listener:
    def execute_local(self, msg: MessageExt, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


def test_the_reserved_names_are_java_s() -> None:
    assert STRING_HASH_SET == JAVA_STRING_HASH_SET
    for name in sorted(JAVA_STRING_HASH_SET):
        with pytest.raises(MessageValidationError, match=f"Property<{name}> {SYSTEM}"):
            check_user_property(name, "v")
    for name in ("TRAN_PREPARED_QUEUE_OFFSET", "TRANSACTION_CHECK_TIMES",
                 "CHECK_IMMUNITY_TIME_IN_SECONDS", "INNER_MULTI_DISPATCH", "tags"):
        check_user_property(name, "v")  # not in Java's set: a user may set them


def _sync_paths(p: Producer, mq: MessageQueue) -> dict[str, Callable[[Message], Any]]:
    topic = mq.topic
    return {
        "send": p.send,
        "send(queue)": lambda m: p.send(m, queue=mq),
        "send_orderly": lambda m: p.send_orderly(m, "shard-1"),
        "send_async (auto-batched)": p.send_async,
        "send_async(queue)": lambda m: p.send_async(m, queue=mq),
        "send_async (delayed: alone)": lambda m: p.send_async(
            Message(m.topic, m.body, m.tags, m.keys, m.properties, delay_level=1)),
        "send_oneway": p.send_oneway,
        "send_batch": lambda m: p.send_batch([Message(topic, b"bad-ok"), m]),
        "send_batch_async": lambda m: p.send_batch_async([Message(topic, b"bad-ok"), m]),
        "request": lambda m: p.request(m, timeout=1.0),
    }


def _accepted(paths: dict[str, Callable[[Message], Any]], topic: str) -> list[str]:
    """Every (path, bad message) the path did not refuse with the expected error."""
    missed = []
    for name, path in paths.items():
        for i, (parts, text) in enumerate(BAD):
            try:
                path(_bad(topic, i, parts))
            except MessageValidationError as exc:
                if not re.search(text, str(exc)):
                    missed.append(f"{name} {parts}: {exc}")
            except Exception as exc:  # sent: e.g. a request nobody answers times out
                missed.append(f"{name} {parts}: sent, then {type(exc).__name__}")
            else:
                missed.append(f"{name} {parts}: accepted")
    return missed


def test_every_producer_path_refuses_bad_properties(target: Target) -> None:
    topic = "PropsSync"
    create_topic(target, topic, QUEUES)
    tx = TransactionProducer("props_tx_pg", namesrv=target.namesrv, listener=_Listener())
    with Producer("props_pg", namesrv=target.namesrv) as p, tx:
        paths = _sync_paths(p, p.publish_queues(topic)[0])
        paths["send_in_transaction"] = tx.send_in_transaction
        assert _accepted(paths, topic) == []
        # the same producers still send good messages
        p.send(_good(topic, b"good send"))
        p.send_orderly(_good(topic, b"good send_orderly"), "shard-1")
        p.send_batch([_good(topic, b"good send_batch")])
        p.send_async(_good(topic, b"good send_async")).result(10)
        assert tx.send_in_transaction(_good(topic, b"good tx")).local_state is \
            LocalTransactionState.COMMIT_MESSAGE
    _assert_stored_only_good(target, topic, [b"good send", b"good send_orderly",
                                             b"good send_batch", b"good send_async",
                                             b"good tx"])  # fmt: skip


def test_async_producer_refuses_bad_properties(target: Target) -> None:
    topic = "PropsAsync"
    create_topic(target, topic, QUEUES)

    async def run() -> list[str]:
        missed = []
        async with AsyncProducer("props_apg", namesrv=target.namesrv) as ap:
            paths: dict[str, Callable[[Message], Any]] = {
                "send": ap.send,
                "enqueue": ap.enqueue,
                "send_orderly": lambda m: ap.send_orderly(m, "shard-2"),
                "send_batch": lambda m: ap.send_batch([Message(topic, b"bad-ok"), m]),
                "send_oneway": ap.send_oneway,
                "request": lambda m: ap.request(m, timeout=1.0),
            }
            for name, path in paths.items():
                for i, (parts, text) in enumerate(BAD):
                    try:
                        await path(_bad(topic, i, parts))
                    except MessageValidationError as exc:
                        if not re.search(text, str(exc)):
                            missed.append(f"{name} {parts}: {exc}")
                    except Exception as exc:
                        missed.append(f"{name} {parts}: sent, then {type(exc).__name__}")
                    else:
                        missed.append(f"{name} {parts}: accepted")
            await ap.send(_good(topic, b"good async send"))
        return missed

    assert asyncio.run(run()) == []
    _assert_stored_only_good(target, topic, [b"good async send"])


def _assert_stored_only_good(target: Target, topic: str, expected: list[bytes]) -> None:
    """Nothing refused was stored; every good message arrived with its properties as sent."""

    def good_ones() -> list[MessageExt]:
        got = read_topic(target, topic)
        return got if {m.body for m in got} >= set(expected) else []

    stored = wait_for(good_ones, 20)
    assert stored, f"the good messages never all arrived: {read_topic(target, topic)}"
    assert sorted(m.body for m in stored) == sorted(expected)
    for m in stored:
        props = m.properties
        assert {k: props.get(k) for k in GOOD} == GOOD, props
        assert props["TAGS"] == "G" and props["KEYS"] == "gk"


def test_orderly_over_max_reconsume_goes_to_retry_with_system_properties(
        target: Target) -> None:  # fmt: skip
    """The client's own system properties still go out: an orderly consumer sends a message
    past max_reconsume_times to %RETRY% itself (RETRY_TOPIC, ORIGIN_MESSAGE_ID,
    RECONSUME_TIME, MAX_RECONSUME_TIMES, the stored UNIQ_KEY) and the broker puts it in
    the DLQ."""
    topic, group = "PropsOrderly", "props_orderly_cg"
    create_topic(target, topic, 1)
    seen: list[int] = []
    lock = threading.Lock()

    def handle(msgs: tuple[MessageExt, ...], ctx: ConsumeContext) -> ConsumeResult:
        ctx.suspend_millis = 100
        with lock:
            seen.extend(m.reconsume_times for m in msgs)
        return ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT

    with Producer("props_orderly_pg", namesrv=target.namesrv) as p:
        sent = p.send_orderly(Message(topic, b"poison", tags="P",
                                      properties={"mine": "kept"}), "k")  # fmt: skip
    c = PushConsumer(group, namesrv=target.namesrv, handler=handle, orderly=True,
                     consume_from="first", max_reconsume_times=1, **FAST)
    c.start()
    c.subscribe(topic)
    try:
        dlq = f"%DLQ%{group}"
        got = wait_for(lambda: read_topic(target, dlq) if route_of(target, dlq) else None, 60)
    finally:
        c.close()
    assert got, f"the message never reached {dlq} (deliveries: {seen})"
    m = got[0]
    assert m.body == b"poison" and m.properties["mine"] == "kept"
    assert m.properties["TAGS"] == "P"
    assert m.properties["ORIGIN_MESSAGE_ID"] == sent.msg_id
    assert m.properties["RETRY_TOPIC"] == topic
