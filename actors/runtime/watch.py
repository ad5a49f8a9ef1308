"""A Thespian actor base that owns sockets through ThespianWatch, keyed timers and a linger loop.

Mirrors the event-loop half of remoting/netty/NettyRemotingServer.java, RocketMQ 4.9.x (the
NIO selector and the scheduled executors), as a Thespian actor: readiness arrives as
WatchMessage, timers as WakeupMessage. Every receiveMessage returns the ThespianWatch again
(otherwise Thespian drops the watched sockets).

One epoll per actor: the actor's sockets are registered in its own persistent epoll as they
open and close (O(1) each), and Thespian watches only that epoll's descriptor, which is
readable whenever one of them is. Thespian builds a new selector over every watched descriptor
on every pass of its loop, so handing it thousands of client sockets would cost O(connections)
per pass; this costs O(1).

Let it fail: an exception escaping a handler means the actor's state is unknown, so the actor
logs it (with the traceback) and its process exits at once (EXIT_FAILED); its parent's
supervisor (actors.runtime.supervisor) replaces it. Every actor process also asks the kernel
for SIGTERM when its parent process dies (PR_SET_PDEATHSIG), so an actor whose parent was
killed shuts down instead of running on unsupervised with its ports and files, and takes back
the default action of the CPU fault signals (SIGBUS, SIGSEGV: see default_fault_signals).
A process told to stop by SIGTERM remembers it (terminating()): a supervisor then takes its
children's exits for part of that stop, not deaths to replace (see note_termination).

Linger: one pass through Thespian's select loop costs tens of microseconds (it builds a new
selector per pass) plus a message dispatch, so a data-plane actor that returned to Thespian
after every read would pay that per request. With LINGER_IDLE_MS > 0, once a watched socket is
ready the actor keeps serving from its own persistent epoll over the same sockets, and returns
to Thespian when no socket was ready for LINGER_IDLE_MS, after LINGER_CAP_MS in total, as soon
as it sent a Thespian message (so control traffic leaves at once), or as soon as Thespian's own
sockets have input (a control message for us). With SPIN_US > 0 the loop first polls without
blocking (yielding the CPU between polls) for that long after each pass: a reply that comes
back within the window is read without a sleep/wake-up cycle (spin_s() lets an actor spin only
after passes whose answers come back that fast). Due keyed timers run inside the
loop (the later WakeupMessage is then ignored as superseded). Idle CPU stays ~0: the spin only
follows a pass that served something, and outside traffic the actor blocks in Thespian's select.

CPU affinity (an experiment knob, off by default): ACTORMQ_CPU_AFFINITY="RemotingServer:0,
send:1" pins each named actor (its processor group, else its class name) to those CPUs
("0+1" for several) when its first socket becomes ready.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import select
import signal
import threading
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

from actors.runtime.stack_chunk import on_fresh_stack

log = logging.getLogger(__name__)

_EP_IN = select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP
AFFINITY_ENV = "ACTORMQ_CPU_AFFINITY"
EXIT_FAILED = 70  # an actor process that died of an exception in a handler (EX_SOFTWARE)
_PR_SET_PDEATHSIG = 1


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


def die_with_parent() -> None:
    """Have the kernel send this process SIGTERM when its parent process dies (Linux); a
    parent that died before this call (between the fork and here) counts as dead already."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    parent = multiprocessing.parent_process()  # who forked us (None outside multiprocessing)
    if parent is not None and parent.pid != os.getppid():
        os.kill(os.getpid(), signal.SIGTERM)


# pids, not flags: a forked child inherits its parent's globals but not its own handler
_noted_pid = 0  # the process whose SIGTERM handler note_termination wrapped
_terminating_pid = 0  # the process that was sent SIGTERM


def note_termination() -> None:
    """Have this process remember a SIGTERM before Thespian's own handler turns it into an
    ActorExitRequest to itself. SIGTERM sent to every process of a run at once (a service
    manager stopping its whole control group, `pkill -f`) ends the children first, and their
    exit notices can reach a supervisor ahead of its own exit request: a supervisor that
    replaced them then waited for its new children forever, the run's ports kept. Main
    thread only (where Python runs signal handlers); once per process."""
    global _noted_pid
    pid = os.getpid()
    if _noted_pid == pid or threading.current_thread() is not threading.main_thread():
        return
    _noted_pid = pid
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: Any) -> None:
        global _terminating_pid
        _terminating_pid = os.getpid()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:  # the default action: end the process
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)


def terminating() -> bool:
    """Whether this process was sent SIGTERM (since note_termination)."""
    return _terminating_pid == os.getpid()


# Faults a returning handler cannot fix: the faulting instruction just runs again
FAULT_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGBUS", "SIGSEGV", "SIGILL", "SIGFPE")
    if hasattr(signal, name)
)


def default_fault_signals() -> None:
    """Give the CPU fault signals back their default action (end the process, loudly).
    Thespian's startChild installs a Python handler for every signal; Python's C-level handler
    only notes a signal and returns, so a SIGBUS (a store into a mapped page a full file
    system cannot back) re-ran the faulting store forever with the GIL held: the actor spun
    at 100 % and answered nothing (issue #20). Dying lets its supervisor replace it."""
    for sig in FAULT_SIGNALS:
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, RuntimeError, ValueError):  # not the main thread / not settable
            pass


def exit_failed(role: str, what: str) -> None:
    """Log the exception being handled and end this actor process at once (let it fail)."""
    log.critical("role=%s failed %s: exiting to be replaced", role, what, exc_info=True)
    os._exit(EXIT_FAILED)


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
        die_with_parent()
        note_termination()  # after Thespian's handlers (startChild sets them first)
        default_fault_signals()
        self._timer_due: dict[str, float] = {}
        self._next_due = float("inf")  # lower bound of the pending due times
        self._watched: set[int] = set()
        self._ep: Any = None  # select.epoll over _watched (what Thespian watches)
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

    def spin_s(self) -> float:
        """How long to poll without sleeping after the pass just served (SPIN_US unless a
        subclass knows no fast answer is coming)."""
        return self.SPIN_US / 1e6

    def process_role(self) -> str:
        """The role this process is named and CPU-pinned after (the class name unless told)."""
        return type(self).__name__

    # -- the watched set ------------------------------------------------------------------------
    def _epoll(self) -> Any:
        if self._ep is None:
            self._ep = select.epoll()
        return self._ep

    def watch_fds(self) -> list[int]:
        """What Thespian watches after this turn: our epoll, when anything is in it."""
        return [self._ep.fileno()] if self._watched and self._ep is not None else []

    def watched(self) -> set[int]:
        """The descriptors currently watched."""
        return self._watched

    def watch(self, fd: int) -> None:
        """Watch `fd` for input (a descriptor number closed and reused is registered anew)."""
        ep = self._epoll()
        try:
            ep.register(fd, _EP_IN)
        except FileExistsError:
            ep.modify(fd, _EP_IN)
        self._watched.add(fd)

    def unwatch(self, fd: int) -> None:
        """Stop watching `fd`; call it before closing the descriptor."""
        self._watched.discard(fd)
        if self._ep is not None:
            try:
                self._ep.unregister(fd)
            except (OSError, ValueError):
                pass  # closed already: the kernel dropped it

    def set_watch_fds(self, fds: list[int]) -> None:
        """Replace the watched set (small sets; a busy owner calls watch/unwatch per socket)."""
        new = set(fds)
        for fd in self._watched - new:
            self.unwatch(fd)
        for fd in new:
            try:
                self.watch(fd)
            except (OSError, ValueError) as exc:
                log.debug("fd=%d not watchable: %s", fd, exc)

    def _ready_fds(self) -> list[int]:
        """The watched descriptors ready now (without blocking)."""
        if self._ep is None:
            return []
        fds = [fd for fd, _ in self._ep.poll(0)]
        watched = self._watched
        if any(fd not in watched for fd in fds):
            self._rebuild_epoll()
            fds = [fd for fd in fds if fd in watched]
        return fds

    def _rebuild_epoll(self) -> None:
        """A descriptor closed before unwatch() while another process (a child forked since)
        still held it stays registered under its old number: start from a new epoll."""
        log.warning("role=%s epoll had a closed descriptor registered: rebuilt", self._named)
        old, self._ep = self._ep, select.epoll()
        for fd in list(self._watched):
            try:
                self._ep.register(fd, _EP_IN)
            except (OSError, ValueError):
                self._watched.discard(fd)
        if old is not None:
            old.close()

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
    def _thespian_inputs(self) -> tuple[list[int], bool]:
        """Thespian's own readable sockets for this actor, and whether input is already queued."""
        try:
            transport = self._myRef.transport
            fds = [transport.socket.fileno(), *transport._incomingSockets]
            return fds, bool(transport._incomingEnvelopes)
        except AttributeError:  # a Thespian without these internals: rely on the cap alone
            return [], False

    def _linger(self) -> None:
        idle_s = self.LINGER_IDLE_MS / 1000.0
        if idle_s <= 0 or self._sent_control or not self._watched:
            return
        tfds, queued = self._thespian_inputs()
        if queued:
            return
        ep = self._epoll()
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
        spin_until = start + self.spin_s()
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
                if any(fd not in self._watched for fd in fds):
                    return  # a stale registration: _ready_fds rebuilds the epoll
                self.linger_passes += 1
                self.on_ready(fds)
                now = time.monotonic()
                idle_until = now + idle_s
                spin_until = now + self.spin_s()
        finally:
            try:
                ep.unregister(tep_fd)
            except (OSError, ValueError):
                pass
            tep.close()

    def _serve(self) -> None:
        """A readiness turn: the ready descriptors, then the linger loop."""
        fds = self._ready_fds()
        if fds:
            self.on_ready(fds)
        self._linger()

    # -- Thespian entry point -----------------------------------------------------------------
    def receiveMessage(self, msg: Any, sender: Any) -> Any:
        self._sent_control = False
        role = self.process_role()
        if isinstance(msg, ActorExitRequest):
            try:
                self.on_exit()
            except Exception:
                log.exception("role=%s failed releasing its resources on exit", role)
            if self._ep is not None:
                self._ep.close()
                self._ep = None
                self._watched.clear()
            return None
        try:
            if role != self._named:  # a processor learns its group from its first message
                self._named = role
                name_process(role)
            if isinstance(msg, WatchMessage):
                if not self._pinned:
                    self._pinned = True
                    spec = os.environ.get(AFFINITY_ENV)
                    if spec:
                        pin_cpus(role, spec)
                if self.LINGER_IDLE_MS > 0:  # a data-plane actor: see actors.runtime.stack_chunk
                    on_fresh_stack(self._serve)
                else:  # a control actor: not worth a chunk mapping per turn
                    self._serve()
            elif isinstance(msg, WakeupMessage):
                self._fire(msg.payload)
            elif isinstance(msg, ChildActorExited):
                self.on_control(msg, sender)
            elif isinstance(msg, PoisonMessage):
                log.warning("poison message returned: %r", msg.poisonMessage)
            else:
                self.on_control(msg, sender)
        except Exception:
            exit_failed(role, f"handling {type(msg).__name__}")
        return ThespianWatch(self.watch_fds())
