"""A Thespian actor base that owns sockets through ThespianWatch and keyed timers.

Mirrors the event-loop half of remoting/netty/NettyRemotingServer.java, RocketMQ 4.9.x (the
NIO selector and the scheduled executors), as a Thespian actor: readiness arrives as
WatchMessage, timers as WakeupMessage. Every receiveMessage returns the ThespianWatch again
(otherwise Thespian drops the watched sockets), and an exception in a handler is logged and
never escapes (an escaping exception would also drop the watch).
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from thespian.actors import (
    Actor,
    ActorExitRequest,
    ChildActorExited,
    PoisonMessage,
    ThespianWatch,
    WakeupMessage,
    WatchMessage,
)

log = logging.getLogger(__name__)


class WatchingActor(Actor):
    """Dispatches readiness, keyed timers and control messages; always re-arms the watch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer_due: dict[str, float] = {}
        self._watch_fds: list[int] = []

    # -- hooks for subclasses -------------------------------------------------------------
    def on_ready(self, fds: list[int]) -> None:
        """Some watched descriptors are readable."""

    def on_timer(self, key: str) -> None:
        """The timer `key` fired."""

    def on_control(self, msg: Any, sender: Any) -> None:
        """A Thespian control message (not readiness, not a timer)."""

    def on_exit(self) -> None:
        """The actor is being stopped: release sockets and files."""

    def watch_fds(self) -> list[int]:
        """Descriptors to watch after this turn."""
        return self._watch_fds

    # -- timers -----------------------------------------------------------------------------
    def schedule(self, key: str, delay_ms: float) -> None:
        """Run on_timer(key) after delay_ms; an earlier pending due time for key wins."""
        due = time.monotonic() + delay_ms / 1000.0
        current = self._timer_due.get(key)
        if current is not None and current <= due:
            return
        self._timer_due[key] = due
        self.wakeupAfter(timedelta(milliseconds=max(delay_ms, 0.5)), payload=(key, due))

    def _fire(self, payload: Any) -> None:
        if not isinstance(payload, tuple) or len(payload) != 2:
            return
        key, due = payload
        if self._timer_due.get(key) != due:
            return  # superseded by an earlier schedule: wakeups cannot be cancelled
        del self._timer_due[key]
        self.on_timer(key)

    # -- Thespian entry point -----------------------------------------------------------------
    def receiveMessage(self, msg: Any, sender: Any) -> Any:
        try:
            if isinstance(msg, WatchMessage):
                self.on_ready(msg.ready)
            elif isinstance(msg, WakeupMessage):
                self._fire(msg.payload)
            elif isinstance(msg, ActorExitRequest):
                self.on_exit()
                return None
            elif isinstance(msg, ChildActorExited):
                log.warning("child actor exited: %s", msg.childAddress)
                self.on_control(msg, sender)
            elif isinstance(msg, PoisonMessage):
                log.warning("poison message returned: %r", msg.poisonMessage)
            else:
                self.on_control(msg, sender)
        except Exception:
            log.exception("%s failed handling %s", type(self).__name__, type(msg).__name__)
        return ThespianWatch(self.watch_fds())
