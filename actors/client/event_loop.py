"""The user process's I/O thread and callback thread.

Mirrors the client half of remoting/netty/NettyRemotingClient.java, RocketMQ 4.9.x: Netty's
event loop (here one thread, `actormq-client-io`, blocking in epoll over the broker
connections and the client channels) and the callbackExecutor (here one thread,
`actormq-client-callback`, running the users' callbacks in completion order).

Thread safety: register / modify / unregister / call_soon / call_later may be called from any
thread (epoll_ctl is; the handler table and the timer heap are guarded by a lock and the loop
is woken through a pipe). Handlers and timers run on the loop thread; they must not block.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import queue
import select
import threading
import time
from collections.abc import Callable
from typing import Any, Final

log = logging.getLogger(__name__)

EPOLLIN: Final = select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP | select.EPOLLRDHUP
EPOLLOUT: Final = select.EPOLLOUT
EPOLLONESHOT: Final = select.EPOLLONESHOT
MAX_WAIT_S: Final = 1.0

Handler = Callable[[int], None]


def run_calls(calls: list[Callable[[], None]], what: str) -> None:
    """Run each call in turn; one that raises is logged ("<what> failed") and the rest run."""
    for fn in calls:
        try:
            fn()
        except Exception:
            log.exception("%s failed", what)


class EventLoop:
    """One thread blocking in epoll; fd handlers, timers and thread-safe calls."""

    def __init__(self, name: str = "actormq-client-io") -> None:
        self._ep = select.epoll()
        self._handlers: dict[int, Handler] = {}
        self._lock = threading.Lock()
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._calls: list[Callable[[], None]] = []
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._ep.register(self._wake_r, select.EPOLLIN)
        self._woken = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def thread(self) -> threading.Thread:
        """The loop's thread."""
        return self._thread

    def in_loop(self) -> bool:
        """True when called on the loop's own thread."""
        return threading.current_thread() is self._thread

    # -- registration -------------------------------------------------------------------------
    def register(self, fd: int, events: int, handler: Handler) -> None:
        """Watch fd for events; handler(events) runs on the loop thread."""
        with self._lock:
            self._handlers[fd] = handler
        self._ep.register(fd, events)

    def modify(self, fd: int, events: int) -> None:
        """Change what fd is watched for (re-arms a ONESHOT registration)."""
        try:
            self._ep.modify(fd, events)
        except (OSError, ValueError) as exc:  # closed meanwhile: its owner unregisters it
            log.debug("fd=%d modify failed: %s", fd, exc)

    def unregister(self, fd: int) -> None:
        """Stop watching fd (call before closing it)."""
        with self._lock:
            self._handlers.pop(fd, None)
        try:
            self._ep.unregister(fd)
        except (OSError, ValueError):
            pass

    # -- calls and timers ---------------------------------------------------------------------
    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run fn on the loop thread soon."""
        with self._lock:
            self._calls.append(fn)
            wake = not self._woken
            self._woken = True
        if wake:
            self._wake()

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> None:
        """Run fn on the loop thread after delay_s."""
        due = time.monotonic() + delay_s
        with self._lock:
            first = not self._timers or due < self._timers[0][0]
            heapq.heappush(self._timers, (due, next(self._seq), fn))
        if first and not self.in_loop():
            self._wake()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass
        except OSError:
            if not self._stopped:
                raise

    # -- the loop -------------------------------------------------------------------------------
    def _run(self) -> None:
        poll = self._ep.poll
        while not self._stopped:
            with self._lock:
                timeout = MAX_WAIT_S
                if self._timers:
                    timeout = max(0.0, min(timeout, self._timers[0][0] - time.monotonic()))
                if self._calls:
                    timeout = 0.0
            try:
                events = poll(timeout)
            except InterruptedError:
                continue
            for fd, ev in events:
                if fd == self._wake_r:
                    self._drain_wake()
                    continue
                handler = self._handlers.get(fd)
                if handler is None:
                    continue
                try:
                    handler(ev)
                except Exception:
                    log.exception("event loop handler for fd=%d failed", fd)
            self._run_calls()
            self._run_timers()

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass
        with self._lock:
            self._woken = False

    def _run_calls(self) -> None:
        with self._lock:
            calls, self._calls = self._calls, []
        run_calls(calls, "event loop call")

    def _run_timers(self) -> None:
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._timers or self._timers[0][0] > now:
                    return
                _due, _seq, fn = heapq.heappop(self._timers)
            try:
                fn()
            except Exception:
                log.exception("event loop timer failed")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread (bounded join) and release the epoll and the pipe."""
        if self._stopped:
            return
        self._stopped = True
        self._wake()
        if not self.in_loop():
            self._thread.join(timeout_s)
        self._ep.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass


class CallbackExecutor:
    """One thread running users' callbacks in order; an exception is logged, never lost."""

    def __init__(self, name: str = "actormq-client-callback") -> None:
        self._q: queue.SimpleQueue[Callable[[], Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._stopped = False
        self._thread.start()

    def submit(self, fn: Callable[[], Any]) -> None:
        """Run fn on the callback thread."""
        self._q.put(fn)

    def in_executor(self) -> bool:
        """True on the callback thread itself."""
        return threading.current_thread() is self._thread

    def _run(self) -> None:
        while True:
            fn = self._q.get()
            if fn is None:
                return
            try:
                fn()
            except Exception:
                log.exception("a client callback raised")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Run what is queued, then stop (bounded join; never from the callback thread)."""
        if self._stopped:
            return
        self._stopped = True
        self._q.put(None)
        if not self.in_executor():
            self._thread.join(timeout_s)
