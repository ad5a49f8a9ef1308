"""ConsumeMessageService: client/impl/consumer/ConsumeMessageService.java and what its two
implementations share (RocketMQ 4.9.x): the listener's result and context, and the consume
executor.

ConsumeResult folds ConsumeConcurrentlyStatus (CONSUME_SUCCESS, RECONSUME_LATER) and
ConsumeOrderlyStatus (SUCCESS, SUSPEND_CURRENT_QUEUE_A_MOMENT, COMMIT, ROLLBACK) into one enum:
an orderly handler's RECONSUME_LATER means SUSPEND_CURRENT_QUEUE_A_MOMENT. A handler that raises
or returns None counts as RECONSUME_LATER, as Java's null status does.

ConsumeExecutor is Java's consumeExecutor (consumeThreadMin = consumeThreadMax = 20 threads)
without a thread hop per message: requests are queued in one lock acquisition per pull result,
and an idle worker takes a fair share of the queue at once (one request when few are waiting,
so slow handlers still run 20 at a time; many when the queue is long, so a fast handler costs a
lock round per batch, not per message).
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

from protocol.bodies import MessageQueue

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


class ConsumeExecutor:
    """A fixed pool of worker threads over one queue of consume requests."""

    def __init__(self, workers: int, name: str) -> None:
        if workers < 1:
            raise ValueError("consume workers must be >= 1")
        self.workers = workers
        self.name = name
        self.items: deque[Request] = deque()
        self.cond = threading.Condition()
        self.running = 0  # requests being run now
        self.stopped = False
        self.threads: list[threading.Thread] = []

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
            before = len(self.items)
            self.items.extend(requests)
            added = len(self.items) - before
            if added == 1:
                self.cond.notify()
            elif added:
                self.cond.notify(min(added, self.workers))

    def queued(self) -> int:
        """Requests waiting for a worker."""
        return len(self.items)

    def _work(self) -> None:
        items = self.items
        cond = self.cond
        while True:
            with cond:
                while not items and not self.stopped:
                    cond.wait()
                if self.stopped:
                    return
                take = max(1, len(items) // self.workers)
                batch = [items.popleft() for _ in range(min(take, len(items)))]
                self.running += len(batch)
            done = 0
            try:
                for req in batch:
                    req.run()
                    done += 1
            except BaseException:
                log.exception("%s: a consume request failed; the worker goes on", self.name)
                raise
            finally:
                with cond:
                    self.running -= len(batch)
                    if not self.running:
                        cond.notify_all()
                if done < len(batch):  # requeue what this worker did not reach
                    with cond:
                        items.extendleft(reversed(batch[done + 1 :]))

    def shutdown(self, timeout_s: float) -> bool:
        """Stop starting requests (queued ones are dropped); wait up to timeout_s for the
        running ones. True when none is left running."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            self.stopped = True
            self.items.clear()
            self.cond.notify_all()
            while self.running:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            idle = not self.running
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()) if idle else 0.0)
        return idle


class ServiceHost(Protocol):
    """What every consume service needs of its consumer."""

    group: str


H = TypeVar("H", bound=ServiceHost)


class ConsumeMessageServiceBase(Generic[H]):
    """What ConsumeMessageConcurrentlyService and ConsumeMessageOrderlyService share: the
    consumer, the listener and the consume executor."""

    def __init__(self, host: H, handler: Callable[..., Any], *, workers: int, consume_batch: int,
                 executor: ConsumeExecutor | None) -> None:  # fmt: skip
        if not 1 <= consume_batch <= 1024:
            raise ValueError("consume_batch (consumeMessageBatchMaxSize) must be in 1..1024")
        self.host = host
        self.handler = handler
        self.with_context = handler_arity(handler) == 2
        self.consume_batch = consume_batch
        self.executor = executor or ConsumeExecutor(workers, f"ConsumeMessageThread_{host.group}")

    def start(self) -> None:
        """Start the workers."""
        self.executor.start()
