"""A dense FOUND answer sends its queue's next pull before it is decoded, through gates that
count the answer already (ProcessQueue.expect); a single message and a sparse answer keep
Java's order (the messages to the consume service first, then the next pull)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from actors.client.consumer.consumer_channel import PullAnswer, PullCommand
from actors.client.consumer.consumer_config import ServiceState
from actors.client.consumer.default_mq_push_consumer_impl import (
    DefaultMQPushConsumerImpl,
    PushConsumerConfig,
)
from actors.client.consumer.offset_store import OffsetStore
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.consumer.pull_request import PullRequest
from actors.client.mq_client_instance import FindBrokerResult
from actors.client.records import MessageExt, PullStatus
from protocol.bodies import MessageQueue, SubscriptionData
from tests.support.consumer_sim import TOPIC, record

MQ = MessageQueue(TOPIC, "broker-a", 1)


class _Routes:
    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int,
                                         only_this: bool) -> FindBrokerResult:  # fmt: skip
        return FindBrokerResult("127.0.0.1:10911", False)


class _Services:
    """Logs the pulls the core sends and when it asks for them to leave."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.routes = _Routes()
        self.rids = 0
        self.sent: list[PullCommand] = []

    def new_pull(self, owner: Any) -> int:
        self.rids += 1
        return self.rids

    def send_pull(self, cmd: PullCommand) -> None:
        self.sent.append(cmd)
        self.events.append(f"pull {cmd.offset}")

    def after_wake(self, fn: Callable[[], None]) -> None:
        fn()

    def after_pulls_sent(self, fn: Callable[[], None]) -> None:
        self.events.append("sent now")
        fn()


class _Core(DefaultMQPushConsumerImpl):
    """The core with a logging consume service in place of its workers."""

    events: list[str]

    def dispatch_pulled(self, msgs: list[MessageExt], pq: ProcessQueue[MessageExt],
                        mq: MessageQueue, dispatch_to_consume: bool) -> None:  # fmt: skip
        self.events.append(f"consume {len(msgs)} (cached {pq.msg_count})")


def _core(threshold: int = 1000) -> tuple[_Core, _Services, ProcessQueue[Any], PullRequest]:
    cfg = PushConsumerConfig("early_cg", "127.0.0.1:9876", pull_threshold_for_queue=threshold)
    core = _Core(cfg, lambda msgs: None)
    core.events = []
    services = _Services(core.events)
    core.services = services  # type: ignore[assignment]
    core.offset_store = OffsetStore("early_cg")
    core.subscriptions[TOPIC] = SubscriptionData.build(TOPIC, "*")
    core.state = ServiceState.RUNNING
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[MQ] = pq
    req = PullRequest(MQ, pq, 100, False)
    core.pulling.pull(req)  # the pull of 100 is out
    core.events.clear()
    return core, services, pq, req


def _answer(core: _Core, services: _Services, offsets: list[int], next_begin: int) -> None:
    body = memoryview(b"".join(record(MQ.queue_id, o) for o in offsets))
    rid = services.sent[-1].rid
    core.pulling.on_pull_result(PullAnswer(rid, PullStatus.FOUND.value, next_begin, 0, 999, 0),
                                body)  # fmt: skip


def test_a_dense_answer_sends_the_next_pull_before_it_is_decoded() -> None:
    core, services, pq, _ = _core()
    _answer(core, services, list(range(100, 132)), 132)
    assert core.events == ["pull 132", "sent now", "consume 32 (cached 32)"]
    assert pq.expected is None and pq.msg_count == 32 and pq.msg_size == 32 * len(b"1:100")


def test_its_gates_count_the_answer_as_java_counts_it_after_the_put() -> None:
    """20 cached + 32 in the answer > a threshold of 40: Java's next pullMessage, after the
    put, is flow-controlled; so is ours, before the decode."""
    core, services, pq, _ = _core(threshold=40)
    pq.put_messages([_Cached(o) for o in range(80, 100)])
    _answer(core, services, list(range(100, 132)), 132)
    assert core.events == ["sent now", "consume 32 (cached 52)"]  # no pull: 50 ms later
    assert core.stats.flow_controlled == 1 and pq.msg_count == 52 and pq.expected is None
    # under the threshold: the pull leaves first
    core2, services2, pq2, _ = _core(threshold=60)
    pq2.put_messages([_Cached(o) for o in range(80, 100)])
    _answer(core2, services2, list(range(100, 132)), 132)
    assert core2.events == ["pull 132", "sent now", "consume 32 (cached 52)"]


def test_the_span_gate_sees_the_answers_offsets() -> None:
    """consumeConcurrentlyMaxSpan 2000: a message at 0 still cached and an answer up to
    2031 is a span of 2031 (Java: lastKey - firstKey after the put)."""
    core, services, pq, req = _core()
    pq.put_messages([_Cached(0)])
    req.next_offset = 2000
    core.pulling.pull(req)
    core.events.clear()
    _answer(core, services, list(range(2000, 2032)), 2032)
    assert core.events == ["sent now", "consume 32 (cached 33)"]  # no pull: 50 ms later
    assert core.stats.flow_controlled == 1 and pq.max_span() == 2031


def test_a_single_message_goes_to_the_consume_service_first() -> None:
    core, services, _, _ = _core()
    _answer(core, services, [100], 101)
    assert core.events == ["consume 1 (cached 1)", "pull 101"]


def test_a_sparse_answer_keeps_javas_order() -> None:
    """Offsets filtered out by the broker in the range: its bounds would be far off."""
    core, services, pq, _ = _core()
    _answer(core, services, [100, 150, 170], 171)
    assert core.events == ["consume 3 (cached 3)", "pull 171"]
    assert pq.expected is None and pq.msg_count == 3


class _Cached:
    __slots__ = ("body", "queue_offset")

    def __init__(self, offset: int) -> None:
        self.queue_offset = offset
        self.body = b"x"


def _scheduled(core: _Core) -> list[float]:
    """Delays (ms from now, rounded) of what the core's scheduler holds."""
    import time

    now = time.monotonic()
    return sorted(round((due - now) * 1000, -2) for due, _, _ in core.scheduler.heap)


def test_a_batch_that_fails_to_decode_is_pulled_again_by_the_answer_of_its_next_pull(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Its next pull already left: that answer is not cached, and the batch is pulled again
    pullTimeDelayMillsWhenException (1 s, ClientConfig's) later, as Java's onException does."""
    import actors.client.consumer.pull_callback as pc

    core, services, pq, req = _core()

    def broken(*args: Any) -> list[MessageExt]:
        raise RuntimeError("decoder bug")

    monkeypatch.setattr(pc, "decode_pull_messages", broken)
    _answer(core, services, list(range(100, 132)), 132)
    assert core.events == ["pull 132", "sent now"] and req.retry_from == 100
    assert pq.expected is None and pq.msg_count == 0
    monkeypatch.undo()
    core.events.clear()
    _answer(core, services, list(range(132, 164)), 164)  # the answer of the pull that left
    assert core.events == [] and pq.msg_count == 0 and req.next_offset == 100
    assert _scheduled(core) == [1000.0]
    _, _, fn = core.scheduler.heap[0]
    fn()
    assert core.events == ["pull 100"] and req.retry_from is None


def test_a_single_message_that_fails_to_decode_is_pulled_again_1_s_later(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import actors.client.consumer.pull_callback as pc

    core, services, _, req = _core()
    monkeypatch.setattr(pc, "decode_pull_messages", lambda *a: 1 / 0)
    _answer(core, services, [100], 101)
    assert core.events == [] and req.next_offset == 100 and _scheduled(core) == [1000.0]


def test_a_compressed_answer_keeps_javas_order() -> None:
    """Its inflated size is known only once it is decoded: no bound for the size gate."""
    from protocol.message import COMPRESSED_ZLIB_SYSFLAG, compress_body, encode_message_ext
    from protocol.message import MessageExt as WireExt
    from protocol.record import pack_host

    core, services, pq, _ = _core()
    body = memoryview(b"".join(encode_message_ext(WireExt(
        topic=TOPIC, body=compress_body(b"z" * 10_000), flag=0, properties={}, queue_id=1,
        queue_offset=o, commit_log_offset=o, sys_flag=COMPRESSED_ZLIB_SYSFLAG,
        born_timestamp=1, born_host=pack_host("10.0.0.1", 1), store_timestamp=2,
        store_host=pack_host("127.0.0.1", 10911), reconsume_times=0)) for o in (100, 101)))
    rid = services.sent[-1].rid
    core.pulling.on_pull_result(PullAnswer(rid, PullStatus.FOUND.value, 102, 0, 999, 0), body)
    assert core.events == ["consume 2 (cached 2)", "pull 102"]
    assert pq.msg_size == 20_000


def test_a_kind_whose_gates_read_more_than_its_queues_keeps_javas_order() -> None:
    """The lite pull consumer's pullThresholdForAll counts its consume cache."""
    from actors.client.consumer.default_lite_pull_consumer_impl import (
        DefaultLitePullConsumerImpl,
    )

    assert not DefaultLitePullConsumerImpl.gates_read_process_queue(None)  # type: ignore[arg-type]
    core, services, _, _ = _core()
    core.gates_read_process_queue = lambda: False  # type: ignore[method-assign]
    _answer(core, services, list(range(100, 132)), 132)
    assert core.events == ["consume 32 (cached 32)", "pull 132"]
