"""The consumer's scheduled executor: the ScheduledExecutorService threads a Java consumer keeps
(DefaultMQPushConsumerImpl.executePullRequestLater / executeTaskLater,
ConsumeMessageConcurrentlyService.submitConsumeRequestLater, the orderly service's
tryLockLaterAndReconsume, the cleanExpireMsg sweep), RocketMQ 4.9.x, as one thread per consumer.

Tasks run in due order on the thread `ConsumerScheduler_<group>`; they may block on a broker
call (computing a queue's first offset, a sync offset commit) without holding up the I/O
thread. A task that raises is logged with its traceback and the next one runs: each task is
one self-contained step (a pull gate, a resubmission), whose failure loses no state another
task relies on.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class ConsumerScheduler:
    """A delay queue of callables served by one thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = itertools.count()
        self.cond = threading.Condition()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self.thread.start()

    def schedule(self, delay_ms: float, fn: Callable[[], None]) -> None:
        """Run fn after delay_ms (0: as soon as the thread is free)."""
        due = time.monotonic() + max(delay_ms, 0.0) / 1000.0
        with self.cond:
            if self.stopped:
                return
            first = not self.heap or due < self.heap[0][0]
            heapq.heappush(self.heap, (due, next(self.seq), fn))
            if first:
                self.cond.notify()

    def submit(self, fn: Callable[[], None]) -> None:
        """Run fn as soon as the thread is free."""
        self.schedule(0.0, fn)

    def on_thread(self) -> bool:
        """True when called from the scheduler's own thread."""
        return threading.current_thread() is self.thread

    def _run(self) -> None:
        heap = self.heap
        while True:
            with self.cond:
                while not self.stopped:
                    if heap:
                        wait = heap[0][0] - time.monotonic()
                        if wait <= 0:
                            break
                        self.cond.wait(wait)
                    else:
                        self.cond.wait()
                if self.stopped:
                    return
                _, _, fn = heapq.heappop(heap)
            try:
                fn()
            except Exception:
                log.exception("%s: a scheduled task failed", self.name)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Drop what is pending and stop the thread (after the running task)."""
        with self.cond:
            self.stopped = True
            self.heap.clear()
            self.cond.notify_all()
        if self.thread.is_alive() and not self.on_thread():
            self.thread.join(timeout_s)
