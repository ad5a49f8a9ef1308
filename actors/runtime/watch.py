"""A Thespian actor base that owns sockets through ThespianWatch, keyed timers and a linger loop.

Mirrors the event-loop half of remoting/netty/NettyRemotingServer.java, RocketMQ 4.9.x (the
NIO selector and the scheduled executors), as a Thespian actor: readiness arrives as
WatchMessage, timers as WakeupMessage. Every receiveMessage returns the ThespianWatch again
(otherwise Thespian drops the watched sockets), and an exception in a handler is logged and
never escapes (an escaping exception would also drop the watch).

Linger: one pass through Thespian's select loop costs tens of microseconds (it builds a new
selector per pass) plus a message dispatch, so a data-plane actor that returned to Thespian
after every read would pay that per request. With LINGER_IDLE_MS > 0, once a watched socket is
ready the actor keeps serving from its own persistent epoll over the same sockets, and returns
to Thespian when no socket was ready for LINGER_IDLE_MS, after LINGER_CAP_MS in total, as soon
as it sent a Thespian message (so control traffic leaves at once), or as soon as Thespian's own
sockets have input (a control message for us). With SPIN_US > 0 the loop first polls without
blocking (yielding the CPU between polls) for that long after each pass: a reply that comes
back within the window is read without a sleep/wake-up cycle. Due keyed timers run inside the
loop (the later WakeupMessage is then ignored as superseded). Idle CPU stays ~0: the spin only
follows a pass that served something, and outside traffic the actor blocks in Thespian's select.

CPU affinity (an experiment knob, off by default): ACTORMQ_CPU_AFFINITY="RemotingServer:0,
send:1" pins each named actor (its processor group, else its class name) to those CPUs
("0+1" for several) when its first socket becomes ready.
"""

from __future__ import annotations

import logging
import os
import select
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

_EP_IN = select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP
AFFINITY_ENV = "ACTORMQ_CPU_AFFINITY"


def now_ms() -> int:
    """Wall-clock milliseconds."""
    return time.time_ns() // 1_000_000


def parse_affinity(spec: str | None) -> dict[str, set[int]]:
    """Parse "RemotingServer:0,send:1+2" into {role: CPUs}; bad parts are skipped."""
    table: dict[str, set[int]] = {}
    for part in (spec or "").split(","):
        role, _, cpus = part.strip().partition(":")
        try:
            ids = {int(c) for c in cpus.split("+") if c.strip()}
        except ValueError:
            log.warning("%s: bad part %r ignored", AFFINITY_ENV, part)
            continue
        if role.strip() and ids:
            table[role.strip()] = ids
    return table


PROCESS_NAME_PREFIX = "amq-"


def name_process(role: str) -> None:
    """Name this process "amq-<role>" (15 chars at most) for ps/top and per-actor CPU figures."""
    try:
        with open("/proc/self/comm", "w", encoding="ascii") as f:
            f.write((PROCESS_NAME_PREFIX + role)[:15])
    except (OSError, UnicodeEncodeError):
        pass


def pin_cpus(role: str, spec: str | None) -> set[int] | None:
    """Pin this process to the CPUs `spec` names for `role`; the CPUs set, or None."""
    cpus = parse_affinity(spec).get(role)
    if not cpus:
        return None
    try:
        os.sched_setaffinity(0, cpus)
    except (OSError, ValueError) as exc:
        log.warning("role=%s cannot pin to CPUs %s: %s", role, sorted(cpus), exc)
        return None
    log.info("role=%s pinned to CPUs %s", role, sorted(cpus))
    return cpus


class WatchingActor(Actor):
    """Dispatches readiness, keyed timers and control messages; always re-arms the watch."""

    LINGER_IDLE_MS: float = 0.0  # 0 = return to Thespian after every pass
    LINGER_CAP_MS: float = 50.0
    SPIN_US: float = 0.0  # after a pass, poll without sleeping this long (0 = block at once)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer_due: dict[str, float] = {}
        self._next_due = float("inf")  # lower bound of the pending due times
        self._watch_fds: list[int] = []
        self._watch_version = 0
        self._ep: Any = None  # select.epoll over _watch_fds (linger only)
        self._ep_version = -1
        self._sent_control = False
        self._pinned = False
        self._named = ""  # the role this process is named after (see name_process)
        self.linger_passes = 0  # passes served from our own epoll (diagnostics)

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

    def set_watch_fds(self, fds: list[int]) -> None:
        """Replace the watched set; call whenever a socket was opened or closed."""
        self._watch_fds = fds
        self._watch_version += 1

    # -- Thespian sends: note them so the linger loop hands control back at once ----------------
    def send(self, targetAddr: Any, msg: Any) -> None:
        self._sent_control = True
        super().send(targetAddr, msg)

    # -- timers -----------------------------------------------------------------------------
    def schedule(self, key: str, delay_ms: float) -> None:
        """Run on_timer(key) after delay_ms; an earlier pending due time for key wins."""
        due = time.monotonic() + delay_ms / 1000.0
        current = self._timer_due.get(key)
        if current is not None and current <= due:
            return
        self._timer_due[key] = due
        if due < self._next_due:
            self._next_due = due
        self.wakeupAfter(timedelta(milliseconds=max(delay_ms, 0.5)), payload=(key, due))

    def _fire(self, payload: Any) -> None:
        if not isinstance(payload, tuple) or len(payload) != 2:
            return
        key, due = payload
        if self._timer_due.get(key) != due:
            return  # superseded by an earlier schedule, or already run by the linger loop
        del self._timer_due[key]
        self.on_timer(key)

    def _run_due_timers(self, now: float) -> float:
        """Run timers due by `now` inline; return the next due time (inf when none)."""
        if now < self._next_due:
            return self._next_due
        timers = self._timer_due
        if not timers:
            self._next_due = float("inf")
            return self._next_due
        due_keys = [k for k, due in timers.items() if due <= now]
        for key in due_keys:
            if timers.get(key, now + 1) <= now:
                del timers[key]
                self.on_timer(key)
        self._next_due = min(timers.values()) if timers else float("inf")
        return self._next_due

    # -- linger loop ------------------------------------------------------------------------------
    def _sync_epoll(self) -> Any:
        """The persistent epoll over the watched fds (rebuilt when the set changed)."""
        if self._ep is not None and self._ep_version == self._watch_version:
            return self._ep
        if self._ep is not None:
            self._ep.close()  # fds may have been closed and reused: start from scratch
        ep = select.epoll()
        for fd in self._watch_fds:
            try:
                ep.register(fd, _EP_IN)
            except (OSError, ValueError) as exc:
                log.debug("fd=%d not watchable: %s", fd, exc)
        self._ep = ep
        self._ep_version = self._watch_version
        return ep

    def _thespian_inputs(self) -> tuple[list[int], bool]:
        """Thespian's own readable sockets for this actor, and whether input is already queued."""
        try:
            transport = self._myRef.transport
            fds = [transport.socket.fileno(), *transport._incomingSockets]
            return fds, bool(transport._incomingEnvelopes)
        except Exception:  # a Thespian without these internals: rely on the cap alone
            return [], False

    def _linger(self) -> None:
        idle_s = self.LINGER_IDLE_MS / 1000.0
        if idle_s <= 0 or self._sent_control or not self._watch_fds:
            return
        tfds, queued = self._thespian_inputs()
        if queued:
            return
        ep = self._sync_epoll()
        tep = select.epoll()
        for fd in tfds:
            try:
                tep.register(fd, _EP_IN)
            except (OSError, ValueError):
                pass
        tep_fd = tep.fileno()
        ep.register(tep_fd, _EP_IN)
        start = time.monotonic()
        cap = start + self.LINGER_CAP_MS / 1000.0
        idle_until = start + idle_s
        spin_s = self.SPIN_US / 1e6
        spin_until = start + spin_s
        poll = ep.poll
        try:
            while True:
                now = time.monotonic()
                next_due = self._run_due_timers(now)
                if self._sent_control or now >= cap or now >= idle_until:
                    return
                if now < spin_until:
                    events = poll(0)
                    if not events:
                        os.sched_yield()  # a peer woken on this CPU runs first
                        continue
                else:
                    timeout = min(idle_until, cap, next_due) - now
                    events = poll(timeout if timeout > 0 else 0)
                    if not events:
                        continue
                fds = [fd for fd, _ in events if fd != tep_fd]
                if len(fds) != len(events):
                    return  # a Thespian message is waiting for us
                self.linger_passes += 1
                self.on_ready(fds)
                if self._ep_version != self._watch_version:
                    ep.unregister(tep_fd)
                    ep = self._sync_epoll()
                    ep.register(tep_fd, _EP_IN)
                    poll = ep.poll
                now = time.monotonic()
                idle_until = now + idle_s
                spin_until = now + spin_s
        finally:
            try:
                ep.unregister(tep_fd)
            except (OSError, ValueError):
                pass
            tep.close()

    # -- Thespian entry point -----------------------------------------------------------------
    def receiveMessage(self, msg: Any, sender: Any) -> Any:
        self._sent_control = False
        try:
            role = getattr(self, "group", "") or type(self).__name__
            if role != self._named:  # a processor learns its group from its first message
                self._named = role
                name_process(role)
            if isinstance(msg, WatchMessage):
                if not self._pinned:
                    self._pinned = True
                    spec = os.environ.get(AFFINITY_ENV)
                    if spec:
                        pin_cpus(role, spec)
                self.on_ready(msg.ready)
                self._linger()
            elif isinstance(msg, WakeupMessage):
                self._fire(msg.payload)
            elif isinstance(msg, ActorExitRequest):
                self.on_exit()
                if self._ep is not None:
                    self._ep.close()
                    self._ep = None
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
