"""The concurrent and orderly consume services over real ProcessQueues and a recording host."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence

import pytest

from actors.client.consumer.consume_concurrently import (
    ConsumeMessageConcurrentlyService,
    ConsumeRequest,
)
from actors.client.consumer.consume_message_service import (
    ConsumeContext,
    ConsumeExecutor,
    ConsumeResult,
    HeldWakes,
)
from actors.client.consumer.consume_orderly import ConsumeMessageOrderlyService, OrderlyRequest
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.records import MessageExt
from protocol.bodies import MessageModel, MessageQueue

MQ = MessageQueue("Orders", "broker-a", 0)


def ext(off: int, topic: str = "Orders", **props: str) -> MessageExt:
    return MessageExt(topic=topic, body=b"b%d" % off, properties=props, queue=MQ,
                      queue_offset=off, msg_id=f"id{off}")


class Host:
    """Records what the services ask of their consumer; runs scheduled work on demand."""

    def __init__(self, model: MessageModel = MessageModel.CLUSTERING) -> None:
        self.group = "cg"
        self.model = model
        self.clock = 1000
        self.offsets: list[tuple[int, bool]] = []
        self.sent_back: list[tuple[int, int, int]] = []  # (offset, delay level, reconsume)
        self.retried: list[tuple[int, int]] = []
        self.back_ok = True
        self.lock_ok = True
        self.scheduled: list[tuple[int, Callable[[], None]]] = []
        self.stats: list[tuple[int, int]] = []
        self.drained: list[ProcessQueue[MessageExt]] = []

    def now_ms(self) -> int:
        return self.clock

    def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str) -> bool:
        self.sent_back.append((msg.queue_offset, delay_level, msg.reconsume_times))
        return self.back_ok

    def send_to_retry(self, msg: MessageExt, max_reconsume_times: int) -> bool:
        self.retried.append((msg.queue_offset, msg.reconsume_times))
        return self.back_ok

    def lock_one(self, mq: MessageQueue) -> bool:
        return self.lock_ok

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        self.offsets.append((offset, increase_only))

    def schedule(self, delay_ms: int, fn: Callable[[], None]) -> None:
        self.scheduled.append((delay_ms, fn))

    def run_scheduled(self) -> list[int]:
        todo, self.scheduled = self.scheduled, []
        for _, fn in todo:
            fn()
        return [d for d, _ in todo]

    def on_consumed(self, mq: MessageQueue, ok: int, failed: int, rt_ms: int, calls: int = 1
                    ) -> None:  # fmt: skip
        self.stats.append((ok, failed))

    def on_drained(self, pq: ProcessQueue[MessageExt]) -> None:
        self.drained.append(pq)


class Inline(ConsumeExecutor):
    """An executor that runs requests in the caller's thread, in order (deterministic tests)."""

    def __init__(self) -> None:
        super().__init__(1, "inline")
        self.log: list[object] = []

    def submit(self, requests: object) -> None:  # type: ignore[override]
        for r in list(requests):  # type: ignore[call-overload]
            self.log.append(r)
            r.run()


def queue_of(*offsets: int) -> tuple[ProcessQueue[MessageExt], list[MessageExt]]:
    pq: ProcessQueue[MessageExt] = ProcessQueue(0)
    msgs = [ext(o) for o in offsets]
    pq.put_messages(msgs)
    return pq, msgs


def test_concurrently_success_moves_offset_in_batches() -> None:
    host = Host()
    seen: list[tuple[int, ...]] = []

    def handle(msgs: Sequence[MessageExt]) -> ConsumeResult:
        seen.append(tuple(m.queue_offset for m in msgs))
        assert isinstance(msgs, tuple)  # the handler cannot change the batch
        return ConsumeResult.SUCCESS

    svc = ConsumeMessageConcurrentlyService(host, handle, consume_batch=2, executor=Inline())
    pq, msgs = queue_of(0, 1, 2, 3, 4)
    svc.submit_consume_request(msgs, pq, MQ)
    assert seen == [(0, 1), (2, 3), (4,)]
    assert host.offsets == [(2, True), (4, True), (5, True)]
    assert host.stats == [(2, 0), (2, 0), (1, 0)] and host.sent_back == []


def test_cheap_calls_ride_one_request_and_each_message_keeps_its_own_call() -> None:
    """Unmeasured, a pull's messages are one request each; once a worker's batch measured
    the calls cheap, the messages of a pull ride one request (per_call 1), each still its
    own handler call in order, and a failed call sends back its message alone. Calls
    measured slower than a worker's slice stay one request a message."""
    host = Host()
    seen: list[tuple[int, ...]] = []

    def handle(msgs: Sequence[MessageExt]) -> ConsumeResult:
        seen.append(tuple(m.queue_offset for m in msgs))
        return ConsumeResult.RECONSUME_LATER if msgs[0].queue_offset == 5 else \
            ConsumeResult.SUCCESS  # fmt: skip

    ex = Inline()
    svc = ConsumeMessageConcurrentlyService(host, handle, executor=ex)
    pq, msgs = queue_of(*range(10))
    svc.submit_consume_request(msgs[:2], pq, MQ)
    assert [(len(r.msgs), r.per_call) for r in ex.log] == [(1, 0), (1, 0)]  # type: ignore[attr-defined]
    svc.run_batch([ConsumeRequest((msgs[2],), pq, MQ, svc),
                   ConsumeRequest((msgs[3],), pq, MQ, svc)])
    assert svc.call_cost_s > 0.0
    ex.log.clear()
    svc.submit_consume_request(msgs[4:], pq, MQ)
    assert [(len(r.msgs), r.per_call) for r in ex.log] == [(6, 1)]  # type: ignore[attr-defined]
    assert seen == [(o,) for o in range(10)]
    assert host.sent_back == [(5, 0, 0)] and host.offsets[-1] == (10, True)

    def slow_handle(msgs: Sequence[MessageExt]) -> ConsumeResult:
        time.sleep(0.003)  # longer than a worker's slice (SLICE_S)
        return ConsumeResult.SUCCESS

    slow = ConsumeMessageConcurrentlyService(Host(), slow_handle, executor=Inline())
    pq2, more = queue_of(0, 1, 2, 3, 4)
    slow.run_batch([ConsumeRequest((more[0],), pq2, MQ, slow),
                    ConsumeRequest((more[1],), pq2, MQ, slow)])
    slow.executor.log.clear()  # type: ignore[attr-defined]
    slow.submit_consume_request(more[2:], pq2, MQ)
    assert [r.per_call for r in slow.executor.log] == [0, 0, 0]  # type: ignore[attr-defined]


def test_concurrently_later_and_exception_send_back_with_delay_level() -> None:
    host = Host()
    calls = 0

    def handle(msgs: Sequence[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        nonlocal calls
        calls += 1
        if calls == 1:
            ctx.delay_level = 5
            return ConsumeResult.RECONSUME_LATER
        if calls == 2:
            raise RuntimeError("boom")
        ctx.ack_index = 0  # first succeeded, second to retry
        return ConsumeResult.SUCCESS

    svc = ConsumeMessageConcurrentlyService(host, handle, consume_batch=2, executor=Inline())
    pq, msgs = queue_of(10, 11, 12, 13, 14, 15)
    svc.submit_consume_request(msgs, pq, MQ)
    assert host.sent_back == [(10, 5, 0), (11, 5, 0), (12, 0, 0), (13, 0, 0), (15, 0, 0)]
    assert host.offsets[-1] == (16, True)  # sent back = done with it here


def test_concurrently_failed_send_back_pins_offset_and_retries_locally() -> None:
    host = Host()
    results = [ConsumeResult.RECONSUME_LATER, ConsumeResult.SUCCESS]
    seen: list[tuple[int, int]] = []

    def handle(msgs: Sequence[MessageExt]) -> ConsumeResult:
        seen.extend((m.queue_offset, m.reconsume_times) for m in msgs)
        return results.pop(0)

    svc = ConsumeMessageConcurrentlyService(host, handle, executor=Inline())
    pq, msgs = queue_of(7)
    host.back_ok = False
    svc.submit_consume_request(msgs, pq, MQ)
    assert host.offsets == [(7, True)] and pq.first_offset() == 7  # never past the failed one
    assert [d for d, _ in host.scheduled] == [5000]
    host.run_scheduled()
    assert seen == [(7, 0), (7, 1)]  # consumed again locally with reconsume_times + 1
    assert host.offsets[-1] == (8, True)


def test_broadcasting_failure_is_dropped_not_sent_back() -> None:
    host = Host(MessageModel.BROADCASTING)
    svc = ConsumeMessageConcurrentlyService(host, lambda msgs: None, executor=Inline())
    pq, msgs = queue_of(3)
    svc.submit_consume_request(msgs, pq, MQ)
    assert host.sent_back == [] and host.offsets == [(4, True)]


def test_revoking_queue_starts_nothing_and_dropped_discards_results() -> None:
    host = Host()
    svc = ConsumeMessageConcurrentlyService(host, lambda m: ConsumeResult.SUCCESS,
                                            executor=Inline())
    pq, msgs = queue_of(1, 2)
    pq.revoking = True
    svc.submit_consume_request(msgs, pq, MQ)
    assert host.offsets == [] and host.stats == []

    def drop_while_running(m: Sequence[MessageExt]) -> ConsumeResult:
        pq2.dropped = True
        return ConsumeResult.SUCCESS

    svc2 = ConsumeMessageConcurrentlyService(host, drop_while_running, executor=Inline())
    pq2, msgs2 = queue_of(1)
    svc2.submit_consume_request(msgs2, pq2, MQ)
    assert host.offsets == [] and pq2.in_flight_count() == 0


def test_revoking_queue_applies_running_results_then_reports_drained() -> None:
    host = Host()
    pq, msgs = queue_of(1)

    def revoke_while_running(m: Sequence[MessageExt]) -> ConsumeResult:
        pq.revoking = True  # the rebalance revokes the queue meanwhile
        return ConsumeResult.SUCCESS

    svc = ConsumeMessageConcurrentlyService(host, revoke_while_running, executor=Inline())
    svc.submit_consume_request(msgs, pq, MQ)
    assert host.offsets == [(2, True)] and host.drained == [pq]


def test_retry_topic_message_shows_its_real_topic() -> None:
    host = Host()
    seen: list[str] = []
    svc = ConsumeMessageConcurrentlyService(
        host, lambda msgs: seen.extend(m.topic for m in msgs) or ConsumeResult.SUCCESS,
        executor=Inline())
    pq: ProcessQueue[MessageExt] = ProcessQueue(0)
    m = ext(0, topic="%RETRY%cg", RETRY_TOPIC="Orders")
    pq.put_messages([m])
    svc.submit_consume_request([m], pq, MQ)
    assert seen == ["Orders"] and host.offsets == [(1, True)]


def test_timeout_sweep_reports_running_handler_but_never_sends_it_back() -> None:
    host = Host()
    started = threading.Event()
    release = threading.Event()

    def slow(msgs: Sequence[MessageExt]) -> ConsumeResult:
        started.set()
        release.wait(10)
        return ConsumeResult.SUCCESS

    ex = ConsumeExecutor(2, "t")
    ex.start()
    svc = ConsumeMessageConcurrentlyService(host, slow, consume_timeout_ms=1000, executor=ex)
    pq, msgs = queue_of(0)
    svc.submit_consume_request(msgs, pq, MQ)
    assert started.wait(10)
    host.clock += 5000
    assert svc.report_expired({MQ: pq}) == 1
    assert host.sent_back == []
    release.set()
    deadline = time.monotonic() + 10
    while not host.offsets and time.monotonic() < deadline:
        time.sleep(0.01)
    assert host.offsets == [(1, True)]
    assert ex.shutdown(5)


def test_executor_runs_slow_requests_in_parallel_and_shutdown_waits_for_running() -> None:
    ex = ConsumeExecutor(4, "par")
    ex.start()
    lock = threading.Lock()
    running = [0, 0]  # now, most at once
    done: list[int] = []

    class Req:
        def __init__(self, i: int) -> None:
            self.i = i

        def run(self) -> None:  # a slow handler (I/O bound): the pool runs four at once
            with lock:
                running[0] += 1
                running[1] = max(running[1], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= 1
                done.append(self.i)

    for rnd in range(2):  # the second round runs with a measured (slow) cost
        ex.submit([Req(8 * rnd + i) for i in range(8)])
        deadline = time.monotonic() + 10
        while len(done) < 8 * (rnd + 1) and time.monotonic() < deadline:
            time.sleep(0.01)
    assert sorted(done) == list(range(16))
    assert running[1] == 4
    assert ex.shutdown(5)


def test_executor_batches_fast_requests_on_few_workers() -> None:
    ex = ConsumeExecutor(20, "fast")
    seen: list[tuple[str, int]] = []
    ex.run_batch = lambda batch: seen.extend((threading.current_thread().name, r.i)  # type: ignore
                                             for r in batch)  # fmt: skip
    ex.cost_s = 2e-6  # measured: a no-op handler

    class Req:
        def __init__(self, i: int) -> None:
            self.i = i

        def run(self) -> None: ...

    ex.submit([Req(i) for i in range(256)])  # before start: all waiting at once
    ex.start()
    deadline = time.monotonic() + 10
    while len(seen) < 256 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(i for _, i in seen) == list(range(256))
    assert len({name for name, _ in seen}) == 1  # one batch, not 20 threads over one lock
    assert ex.shutdown(5)


class _Req:
    """A request that records its run, after `gate` is set when one is given."""

    def __init__(self, i: int, ran: list[int], gate: threading.Event | None = None) -> None:
        self.i, self.ran, self.gate = i, ran, gate

    def run(self) -> None:
        if self.gate is not None:
            self.gate.wait(10)
        self.ran.append(self.i)


@pytest.mark.parametrize("seed", range(3))
def test_parked_workers_are_never_lost_between_submitters_and_shutdown_frees_them(
        seed: int) -> None:  # fmt: skip
    """Three threads submit 300 groups of requests each at random moments while the
    workers park and are woken (cheap and unmeasured costs alike): every request runs once;
    idle again, every worker is parked, and shutdown wakes them all to exit."""
    ex = _idle_executor(4)
    ran: list[int] = []
    rnd = random.Random(seed)
    plans = [[rnd.choice([1, 1, 2, 5]) for _ in range(300)] for _ in range(3)]

    def submitter(k: int) -> None:
        i = k * 10_000
        for size in plans[k]:
            ex.submit([_Req(i + j, ran) for j in range(size)])
            i += size
            if rnd.random() < 0.2:
                time.sleep(0.0005)

    threads = [threading.Thread(target=submitter, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    want = sorted(k * 10_000 + j for k in range(3) for j in range(sum(plans[k])))
    deadline = time.monotonic() + 10
    while (len(ran) < len(want) or ex.idle < 4) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert sorted(ran) == want
    assert ex.idle == 4 and ex.running == 0
    assert ex.shutdown(5)
    assert not any(t.is_alive() for t in ex.threads)


def _idle_executor(workers: int) -> ConsumeExecutor:
    ex = ConsumeExecutor(workers, "ho")
    ex.start()
    deadline = time.monotonic() + 10
    while ex.idle < workers and time.monotonic() < deadline:
        time.sleep(0.005)
    assert ex.idle == workers
    return ex


def test_held_wakes_hand_an_idle_fast_executor_its_batch_before_going_on() -> None:
    """The end of a hand-over block returns once the woken worker has run the batch (the I/O
    thread leaves it the GIL instead of writing its next pulls first)."""
    ex = _idle_executor(4)
    ex.cost_s = 1e-5  # measured: a fast handler
    ran: list[int] = []
    with HeldWakes(10.0):
        ex.submit([_Req(1, ran)])
        assert ran == []  # held until the block ends
    assert ran == [1] and ex.gate is None
    assert ex.shutdown(5)


def test_no_hand_over_to_a_busy_slow_or_unmeasured_executor_nor_when_off() -> None:
    """The block's end does not wait when a worker is running, when requests have cost more
    than the limit or nothing was measured yet, or when the pass asks for no hand-over (its
    next pulls left first): no gate is set, the request has not run (it waits for `go`)."""
    ex = _idle_executor(2)
    go = threading.Event()
    ran: list[int] = []
    cases = [(10.0, 0.0), (10.0, 20.0), (0.0, 1e-5)]  # (limit, measured cost)
    for i, (limit, cost) in enumerate(cases):
        ex.cost_s = cost
        with HeldWakes(limit):
            ex.submit([_Req(i, ran, go)])
        assert ex.gate is None and len(ran) == i  # this one has not run
        go.set()
        deadline = time.monotonic() + 10
        while len(ran) <= i and time.monotonic() < deadline:
            time.sleep(0.005)
        go.clear()
        while ex.idle < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
    busy = threading.Event()
    ex.submit([_Req(10, ran, busy)])  # holds one worker
    deadline = time.monotonic() + 10
    while ex.idle == 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    ex.cost_s = 1e-5
    with HeldWakes(10.0):
        ex.submit([_Req(11, ran, go)])
    assert ex.gate is None  # one worker was busy: no hand-over
    go.set()
    busy.set()
    deadline = time.monotonic() + 10
    while len(ran) < 5 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert sorted(ran) == [0, 1, 2, 10, 11]
    assert ex.shutdown(5)


def test_orderly_in_order_suspend_and_max_reconsume() -> None:
    host = Host()
    seen: list[tuple[int, int]] = []
    answers = [ConsumeResult.SUCCESS, ConsumeResult.RECONSUME_LATER,
               ConsumeResult.SUCCESS, ConsumeResult.SUCCESS]

    def handle(msgs: Sequence[MessageExt]) -> ConsumeResult:
        seen.extend((m.queue_offset, m.reconsume_times) for m in msgs)
        return answers.pop(0)

    svc = ConsumeMessageOrderlyService(host, handle, executor=Inline(), suspend_ms=1000)
    pq, msgs = queue_of(0, 1, 2)
    pq.set_locked(True, host.clock)
    assert svc.executor.queued() == 0
    svc.submit_consume_request(msgs, pq, MQ, dispatch_to_consume=True)
    assert seen == [(0, 0), (1, 0)]
    assert host.offsets == [(1, False)]
    assert [d for d, _ in host.scheduled] == [1000]  # suspended a moment
    host.run_scheduled()
    assert seen[2:] == [(1, 1), (2, 0)]  # the same message first, reconsume_times + 1
    assert host.offsets[-2:] == [(2, False), (3, False)]


def test_orderly_over_max_reconsume_goes_to_retry_and_queue_goes_on() -> None:
    host = Host()
    svc = ConsumeMessageOrderlyService(host, lambda m: ConsumeResult.RECONSUME_LATER,
                                       executor=Inline(), max_reconsume_times=1)
    pq, msgs = queue_of(0)
    pq.set_locked(True, host.clock)
    svc.submit_consume_request(msgs, pq, MQ, True)
    host.run_scheduled()  # second delivery: reconsume_times 1 == max: to %RETRY%
    assert host.retried == [(0, 1)]
    assert host.offsets == [(1, False)]


def test_orderly_without_lock_asks_again() -> None:
    host = Host()
    svc = ConsumeMessageOrderlyService(host, lambda m: ConsumeResult.SUCCESS, executor=Inline())
    pq, msgs = queue_of(0)
    svc.submit_consume_request(msgs, pq, MQ, True)  # not locked yet
    assert host.offsets == [] and [d for d, _ in host.scheduled] == [100]
    pq.set_locked(True, host.clock)
    host.run_scheduled()  # relock (granted) -> resubmit in 10 ms
    assert [d for d, _ in host.scheduled] == [10]
    host.run_scheduled()
    assert host.offsets == [(1, False)]
    assert isinstance(svc.executor, Inline) and isinstance(svc.executor.log[0], OrderlyRequest)
    assert not isinstance(svc.executor.log[0], ConsumeRequest)
