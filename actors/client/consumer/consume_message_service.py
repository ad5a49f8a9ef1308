"""ConsumeMessageService: client/impl/consumer/ConsumeMessageService.java and what its two
implementations share (RocketMQ 4.9.x): the listener's result and context, and the consume
executor.

ConsumeResult folds ConsumeConcurrentlyStatus (CONSUME_SUCCESS, RECONSUME_LATER) and
ConsumeOrderlyStatus (SUCCESS, SUSPEND_CURRENT_QUEUE_A_MOMENT, COMMIT, ROLLBACK) into one enum:
an orderly handler's RECONSUME_LATER means SUSPEND_CURRENT_QUEUE_A_MOMENT. A handler that raises
or returns None counts as RECONSUME_LATER, as Java's null status does.

ConsumeExecutor is Java's consumeExecutor (consumeThreadMin = consumeThreadMax = 20 threads)
without a thread hop per message: requests are queued in one lock acquisition per pull result,
and an idle worker takes a batch at once, sized by what the requests have been costing: at
least a fair share of the queue (so slow handlers still run 20 at a time), and as many as fit
in about SLICE_S of work (so a fast handler costs one lock round per batch, not per message,
and one or two threads serve it instead of 20 fighting over the GIL and the queue's locks).
The service runs a batch as one unit (`run_batch`): the handler once per request, the results
applied per queue.
"""

from __future__ import annotations

import enum
import inspect
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from actors.client.trace_dispatcher import AsyncTraceDispatcher, sub_after, sub_before
from protocol.bodies import MessageQueue
from protocol.trace import ConsumeReturnType

log = logging.getLogger(__name__)


class ConsumeResult(enum.Enum):
    """What a handler returns."""

    SUCCESS = "SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"  # orderly: SUSPEND_CURRENT_QUEUE_A_MOMENT
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"  # orderly's own name
    COMMIT = "COMMIT"  # orderly with auto_commit=False
    ROLLBACK = "ROLLBACK"  # orderly with auto_commit=False


ACK_ALL = 2**31 - 1  # Java's default ackIndex (Integer.MAX_VALUE): every message acknowledged


@dataclass(slots=True)
class ConsumeContext:
    """Per call: the queue, and what the handler may change (Java's Consume*Context)."""

    queue: MessageQueue
    ack_index: int = ACK_ALL  # concurrently: messages [0..ack_index] succeeded on SUCCESS
    delay_level: int = 0  # concurrently: 0 lets the broker choose (3 + reconsume times)
    suspend_millis: int = -1  # orderly: -1 = the consumer's suspend_current_queue_time_ms
    auto_commit: bool = True  # orderly


class Request(Protocol):
    """A unit of consume work."""

    def run(self) -> None: ...


def handler_arity(handler: Callable[..., Any]) -> int:
    """1 when the handler takes (msgs), 2 when it takes (msgs, context); checked once."""
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return 1
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not 1 <= len(positional) <= 2:
        raise TypeError("a consume handler takes (msgs) or (msgs, context)")
    return len(positional)


def status_of(result: object) -> ConsumeResult:
    """The handler's return value as a ConsumeResult (None and anything else: RECONSUME_LATER)."""
    if isinstance(result, ConsumeResult):
        return result
    if isinstance(result, str):
        try:
            return ConsumeResult(result)
        except ValueError:
            pass
    return ConsumeResult.RECONSUME_LATER


SLICE_S = 0.002  # a worker takes about this much handler time at once
HAND_OVER_S = 0.0005  # the I/O thread hands the GIL to a woken worker for at most this long
MAX_TAKE = 256  # and never more requests than this


def run_each(batch: Sequence[Request]) -> None:
    """Run a batch one request after the other."""
    for req in batch:
        req.run()


class _Held(threading.local):
    executors: set[ConsumeExecutor] | None = None  # whose wake-ups this thread holds back


_held = _Held()


class HeldWakes:
    """Within the block, this thread's submits wake no worker; the executors they filled
    wake theirs once at the end (the I/O thread handing over a read's pull results: one
    wake-up per read, not one per pull). Nested blocks hold for the outermost one. A class,
    not a generator: at 500 reads a second its code runs with cold caches, where a
    @contextmanager cost 17 us a block and this about 7 (caches thrashed before each).

    With `hand_over_s` > 0, waking an executor whose workers are all idle and whose requests
    have been costing less than hand_over_s each also hands it the GIL: the block's end
    waits (up to hand_over_s, or until a worker has run its batch) instead of going on with
    the pass's other work. Without it the woken worker waited twice, for its wake-up and
    then for the GIL the I/O thread held while it wrote the next pulls; with it, from a pull
    answer's read to its handler: p50 ~200 -> ~150 us, p99 ~450 -> ~280 us (D, docs/
    CLIENT.md). The I/O thread's wait is bounded by about one short handler call."""

    __slots__ = ("hand_over_s", "held")

    def __init__(self, hand_over_s: float = 0.0) -> None:
        self.hand_over_s = hand_over_s

    def __enter__(self) -> None:
        if _held.executors is not None:
            self.held: set[ConsumeExecutor] | None = None
            return
        self.held = _held.executors = set()

    def __exit__(self, *exc: object) -> None:
        held = self.held
        if held is None:
            return
        _held.executors = None
        limit = self.hand_over_s
        gates = []
        for ex in held:
            with ex.cond:
                if ex.items and not ex.stopped:
                    if limit > 0.0 and ex.gate is None and ex.idle == ex.workers and \
                            0.0 < ex.cost_s < limit:  # fmt: skip
                        gate = ex.gate = threading.Lock()
                        gate.acquire()
                        gates.append(gate)
                    ex._wake()
        for gate in gates:
            gate.acquire(timeout=limit)  # released by the worker once its batch has run


class ConsumeExecutor:
    """A fixed pool of worker threads over one queue of consume requests."""

    def __init__(self, workers: int, name: str,
                 run_batch: Callable[[Sequence[Request]], None] = run_each) -> None:  # fmt: skip
        if workers < 1:
            raise ValueError("consume workers must be >= 1")
        self.workers = workers
        self.name = name
        self.run_batch = run_batch
        self.cost_s = 0.0  # moving average of a request's run time (0: none measured yet)
        self.items: deque[Request] = deque()
        lock = threading.Lock()
        self.cond = threading.Condition(lock)  # guards the queue and the counts below
        self.idle_cond = threading.Condition(lock)  # shutdown waits here for running == 0
        # idle workers' parking locks, the last one to go idle last (woken first: its caches
        # are warm); a worker blocks on its own, held, lock and the waker releases it: no
        # waiter lock made, queued and dropped per wait as a Condition's wait does
        self.parked: list[threading.Lock] = []
        self.running = 0  # requests being run now
        self.stopped = False
        self.threads: list[threading.Thread] = []
        self.gate: threading.Lock | None = None  # a hand-over's waiter (HeldWakes)

    def start(self) -> None:
        """Start the worker threads."""
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"{self.name}_{i + 1}", daemon=True)
            t.start()
            self.threads.append(t)

    def submit(self, requests: Sequence[Request] | Iterable[Request]) -> None:
        """Queue requests (run in order of submission, spread over the workers)."""
        with self.cond:
            if self.stopped:
                return
            self.items.extend(requests)
            if self.items:
                held = _held.executors
                if held is None:
                    self._wake()
                else:
                    held.add(self)

    def queued(self) -> int:
        """Requests waiting for a worker."""
        return len(self.items)

    @property
    def idle(self) -> int:
        """Workers waiting for requests (and not woken yet)."""
        return len(self.parked)

    def _wake(self) -> None:
        """Wake as many idle workers as the queue's measured cost needs beyond those awake
        (who take the queue's requests before they wait again). The lock is held."""
        waiting = len(self.items)
        cost = self.cost_s
        want = min(waiting, self.workers) if cost <= 0.0 else \
            max(1, min(waiting, self.workers, int(waiting * cost / SLICE_S) + 1))  # fmt: skip
        parked = self.parked
        short = want - (self.workers - len(parked))
        for _ in range(min(short, len(parked))):
            parked.pop().release()  # counted awake from now: no second wake-up

    def _take(self, waiting: int) -> int:
        """How many requests a worker takes of `waiting`."""
        fair = max(1, waiting // self.workers)
        cost = self.cost_s
        if cost > 0.0:
            fair = max(fair, min(MAX_TAKE, int(SLICE_S / cost)))
        return min(fair, waiting)

    def _work(self) -> None:
        items = self.items
        cond = self.cond
        parked = self.parked
        park = threading.Lock()
        park.acquire()  # held: the worker blocks on it until a waker releases it
        clock = time.perf_counter
        while True:
            with cond:
                while not items and not self.stopped:
                    parked.append(park)  # the waker takes it off when it releases it
                    cond.release()
                    try:
                        park.acquire()
                    finally:
                        cond.acquire()
                if self.stopped:
                    return
                batch = [items.popleft() for _ in range(self._take(len(items)))]
                self.running += len(batch)
                if items:
                    self._wake()  # more than this worker's share is waiting
            t0 = clock()
            try:
                self.run_batch(batch)
            except BaseException:
                log.exception("%s: a batch of %d consume requests failed; requeued, and this "
                              "worker stops", self.name, len(batch))  # fmt: skip
                with cond:  # at least once: what ran may run again, nothing is skipped
                    items.extendleft(reversed(batch))
                    self.workers = max(1, self.workers - 1)  # this one is gone: not "awake"
                    self._wake()
                raise
            finally:
                per = (clock() - t0) / len(batch)
                self.cost_s = per if self.cost_s <= 0.0 else 0.8 * self.cost_s + 0.2 * per
                with cond:
                    gate, self.gate = self.gate, None
                    if gate is not None:
                        gate.release()
                    self.running -= len(batch)
                    if not self.running and self.stopped:  # shutdown() waits for it
                        self.idle_cond.notify_all()

    def shutdown(self, timeout_s: float) -> bool:
        """Stop starting requests (queued ones are dropped); wait up to timeout_s for the
        running ones. True when none is left running."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            self.stopped = True
            self.items.clear()
            for park in self.parked:
                park.release()
            self.parked.clear()
            while self.running:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.idle_cond.wait(left)
            idle = not self.running
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()) if idle else 0.0)
        return idle


def traced_handler(handler: Callable[..., Any], tracer: AsyncTraceDispatcher, group: str,
                   timeout_ms: int) -> Callable[..., Any]:  # fmt: skip
    """The handler with ConsumeMessageTraceHookImpl around it: a SubBefore record before each
    call, a SubAfter after it (success, cost per message, and how it ended: SUCCESS, FAILED,
    EXCEPTION, RETURNNULL or TIME_OUT). The handler's result and exceptions pass unchanged."""

    def now() -> int:
        return int(time.time() * 1000)

    def call(msgs: Sequence[Any], *context: Any) -> Any:
        before = sub_before(group, msgs, now())
        if before is None:  # every message has TRACE_ON=false
            return handler(msgs, *context)
        tracer.append(before)
        try:
            result = handler(msgs, *context)
        except Exception:
            tracer.append(sub_after(before, len(msgs), False, ConsumeReturnType.EXCEPTION,
                                    now()))  # fmt: skip
            raise
        end = now()
        status = status_of(result)
        ok = status in (ConsumeResult.SUCCESS, ConsumeResult.COMMIT)
        if result is None:
            returned = ConsumeReturnType.RETURNNULL
        elif end - before.time_stamp >= timeout_ms:
            returned = ConsumeReturnType.TIME_OUT
        else:
            returned = ConsumeReturnType.SUCCESS if ok else ConsumeReturnType.FAILED
        tracer.append(sub_after(before, len(msgs), ok, returned, end))
        return result

    return call


class ServiceHost(Protocol):
    """What every consume service needs of its consumer."""

    group: str


H = TypeVar("H", bound=ServiceHost)


class ConsumeMessageServiceBase(Generic[H]):
    """What ConsumeMessageConcurrentlyService and ConsumeMessageOrderlyService share: the
    consumer, the listener and the consume executor."""

    def __init__(self, host: H, handler: Callable[..., Any], *, workers: int, consume_batch: int,
                 executor: ConsumeExecutor | None, tracer: AsyncTraceDispatcher | None = None,
                 consume_timeout_ms: int = 15 * 60_000) -> None:  # fmt: skip
        if not 1 <= consume_batch <= 1024:
            raise ValueError("consume_batch (consumeMessageBatchMaxSize) must be in 1..1024")
        self.host = host
        self.with_context = handler_arity(handler) == 2
        self.handler = handler if tracer is None else traced_handler(
            handler, tracer, host.group, consume_timeout_ms)
        self.consume_batch = consume_batch
        self.executor = executor or ConsumeExecutor(
            workers, f"ConsumeMessageThread_{host.group}", self.run_batch)

    def run_batch(self, batch: Sequence[Request]) -> None:
        """Run a worker's batch (one request after the other unless a service does better)."""
        run_each(batch)

    def start(self) -> None:
        """Start the workers."""
        self.executor.start()
