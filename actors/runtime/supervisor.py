"""Supervision: each actor is watched by its parent, a dead one is replaced, one that keeps dying
stops what it serves.

Mirrors nothing in RocketMQ (a Java broker's services are threads of one JVM: a thread that
dies takes nothing with it, and a JVM that dies is restarted by whoever started it). Here every
role is an actor in its own process, so a process can die alone (an exception that escaped a
handler: actors.runtime.watch.exit_failed; SIGKILL; the OOM killer) and its parent replaces it:

- RoleSupervisor (this module): the top of one role the launcher started (a name server, a
  broker's controller). It creates the role's actor, sends it the start message, forwards its
  answers to the launcher, and when the actor dies starts a new one with the same message
  (on the port the first one bound). A dead broker controller's children get SIGTERM from the
  kernel (PR_SET_PDEATHSIG, actors.runtime.watch) and shut down cleanly; the supervisor waits
  until those processes are gone (SIGKILL after ORPHAN_WAIT_S) before the new controller opens
  the same store and ports.
- BrokerControllerActor (actors.broker.supervision): the parent of the RemotingServer, the
  processor group actors, the IndexService and the HAService; it rebuilds what a dead child
  held (ports, channels, a fresh state snapshot, the store writer's recovery).

Giving up (RestartBudget): a role that dies MAX_DEATHS times within DEATH_WINDOW_MS (5 in 60 s)
is not replaced again. What it belongs to is stopped and RoleFailed travels up to the launcher,
which stops everything it can and exits non-zero (deploy.cli). So does a role whose
replacement cannot even start (each failed start counts as a death).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import select
import signal
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any, Final

from thespian.actors import ActorExitRequest, ChildActorExited

from actors.runtime.messages import (
    BrokerStarted,
    BrokerStartFailed,
    BrokerStopped,
    ChildPids,
    NamesrvStarted,
    NamesrvStartFailed,
    RoleFailed,
    StartBroker,
    StartNamesrv,
    StopBroker,
    Supervise,
    Supervising,
)
from actors.runtime.watch import (
    EXIT_FAILED,
    PROCESS_NAME_PREFIX,
    WatchingActor,
    now_ms,
    terminating,
)

log = logging.getLogger(__name__)

MAX_DEATHS: Final = 5  # deaths of one role within DEATH_WINDOW_MS that stop it for good
DEATH_WINDOW_MS: Final = 60_000
RETRY_MS: Final = 1000.0  # a replacement that failed to start is tried again after this
ORPHAN_WAIT_S: Final = 10.0  # a dead controller's children: SIGTERM, then SIGKILL after this
ORPHAN_POLL_MS: Final = 20.0
LAUNCHER_POLL_MS: Final = 250.0  # how often the launcher's pidfd is looked at

StartMessage = StartNamesrv | StartBroker
STARTED: Final = (NamesrvStarted, BrokerStarted)
START_FAILED: Final = (NamesrvStartFailed, BrokerStartFailed)
FAILED_FOR: Final[dict[type, type]] = {  # the start message -> how its failure is told
    StartNamesrv: NamesrvStartFailed,
    StartBroker: BrokerStartFailed,
}


class RestartBudget:
    """Deaths per role in a sliding window: replace while under the limit, then give up."""

    def __init__(self, max_deaths: int = MAX_DEATHS, window_ms: int = DEATH_WINDOW_MS) -> None:
        self.max_deaths = max_deaths
        self.window_ms = window_ms
        self._deaths: dict[str, deque[int]] = {}

    def died(self, role: str, now: int) -> bool:
        """Record a death of `role` at `now` (ms); True while it may be replaced."""
        times = self._deaths.setdefault(role, deque())
        times.append(now)
        while times and times[0] <= now - self.window_ms:
            times.popleft()
        return len(times) < self.max_deaths

    def deaths(self, role: str, now: int) -> int:
        """Deaths of `role` within the window ending at `now`."""
        return sum(1 for t in self._deaths.get(role, ()) if t > now - self.window_ms)

    def describe(self, role: str, now: int) -> str:
        """"death N of M in S s" for a log line."""
        return (f"death {self.deaths(role, now)} of {self.max_deaths} allowed within "
                f"{self.window_ms // 1000} s")  # fmt: skip


def exit_cause(code: int | None) -> str:
    """Words for a child process's exit status (multiprocessing's exitcode)."""
    if code is None:
        return "exited (status unknown)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code == EXIT_FAILED:
        return "failed (its exception is logged above)"
    return f"exited with status {code}"


@dataclass
class Child:
    """One child actor: its role, address, process (when known) and start time."""

    role: str
    addr: Any
    proc: BaseProcess | None = None  # the child's process (Thespian's), when known
    started: float = 0.0  # time.monotonic()

    @property
    def pid(self) -> int | None:
        """Its process id, when known."""
        return self.proc.pid if self.proc is not None else None

    def cause(self) -> str:
        """Why it ended, as far as its exit status tells."""
        proc = self.proc
        if proc is None:
            return exit_cause(None)
        try:
            proc.join(0.2)  # Thespian reaped it already; this only reads the status
        except (AssertionError, ValueError, OSError):  # not our child, closed, or gone
            return exit_cause(None)
        return exit_cause(proc.exitcode)


def child_process(parent: Any, addr: Any) -> BaseProcess | None:
    """The multiprocessing.Process Thespian started for the child at `addr` (None when this
    Thespian keeps it elsewhere, or the child was created by the admin)."""
    try:
        procs = parent._myRef._child_procs
    except AttributeError:
        return None
    for info in reversed(procs):
        if getattr(info, "childAddr", None) is addr:  # Thespian's own records: probed
            proc = getattr(info, "childProc", None)
            return proc if isinstance(proc, BaseProcess) else None
    return None


class ChildRoles:
    """Which role each child actor plays (ActorAddress is unhashable: a short list)."""

    def __init__(self) -> None:
        self.children: list[Child] = []

    def add(self, parent: Any, role: str, addr: Any) -> Child:
        """Note a child just created by `parent` (call right after createActor)."""
        self.forget(role)
        child = Child(role, addr, child_process(parent, addr), time.monotonic())
        self.children.append(child)
        return child

    def find(self, addr: Any) -> Child | None:
        """The child at `addr`."""
        for child in self.children:
            if child.addr == addr:
                return child
        return None

    def remove(self, addr: Any) -> Child | None:
        """Remove and return the child at `addr` (None: not ours, or already handled)."""
        child = self.find(addr)
        if child is not None:
            self.children.remove(child)
        return child

    def by_role(self, role: str) -> Child | None:
        """The child playing `role`."""
        return next((c for c in self.children if c.role == role), None)

    def forget(self, role: str) -> Child | None:
        """Stop watching `role` (its exit is then no death: a stop we asked for)."""
        for child in self.children:
            if child.role == role:
                self.children.remove(child)
                return child
        return None

    def pids(self) -> dict[str, int]:
        """role -> pid of every child whose process is known."""
        return {c.role: pid for c in self.children if (pid := c.pid) is not None}


def restart_message(start: StartMessage, started: NamesrvStarted | BrokerStarted
                    ) -> StartMessage:  # fmt: skip
    """The start message for a replacement: the port the first one bound (when it asked for
    any free port), everything else the same. A broker's port is in its BrokerConfig, fixed
    by the launcher before the first start."""
    if isinstance(start, StartNamesrv) and start.port == 0 and started.port:
        return dataclasses.replace(start, port=started.port)
    return start


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X")


class RoleSupervisor(WatchingActor):
    """Starts one top-level role (a name server, a broker controller) and replaces it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.launcher: Any = None
        self.role = ""
        self.actor_class = ""
        self.start: StartMessage | None = None  # for a replacement: restart_message
        self.children = ChildRoles()
        self.budget = RestartBudget()
        self.state = "idle"  # starting, running, replacing, stopping, failed
        self.orphans: dict[str, int] = {}  # a dead controller's children: role -> pid
        self.child_pids: dict[str, int] = {}
        self.orphan_deadline = 0.0
        self.died_at = 0.0
        self.launcher_fd: int | None = None  # a pidfd of the launching process
        self.launcher_pid = 0

    def on_control(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, Supervise):
            self.launcher, self.role = sender, msg.role
            self.actor_class, self.start = msg.actor_class, msg.start
            self.state = "starting"
            self.send(sender, Supervising(msg.role, os.getpid()))
            self._watch_launcher(msg.launcher_pid)
            self._create()
        elif isinstance(msg, STARTED):
            self._started(msg)
        elif isinstance(msg, START_FAILED):
            self._start_failed(msg)
        elif isinstance(msg, RoleFailed):
            self._fail(msg.role, msg.reason)
        elif isinstance(msg, ChildPids):
            self.child_pids = dict(msg.pids)
        elif isinstance(msg, BrokerStopped):
            self.send(self.launcher, msg)
        elif isinstance(msg, StopBroker):
            was, self.state = self.state, "stopping"
            if self.children.by_role(self.role) is None:  # dead and not replaced (yet)
                self.send(sender, BrokerStopped(False, f"{self.role} was not running ({was})"))
            else:
                self._to_child(msg)
        elif isinstance(msg, ChildActorExited):
            self._child_exited(msg.childAddress)
        else:  # anything else from the launcher is for the role's actor
            self._to_child(msg)

    def _to_child(self, msg: Any) -> None:
        child = self.children.by_role(self.role)
        if child is not None:
            self.send(child.addr, msg)

    def _create(self) -> None:
        addr = self.createActor(self.actor_class)
        self.children.add(self, self.role, addr)
        self.send(addr, self.start)

    def _started(self, msg: NamesrvStarted | BrokerStarted) -> None:
        if self.state == "starting":
            self.state = "running"
            assert self.start is not None  # Supervise came first
            self.start = restart_message(self.start, msg)
            self.send(self.launcher, msg)
            return
        if self.state == "replacing":
            self.state = "running"
            log.warning("role=%s replaced: serving again %.0f ms after it died", self.role,
                        (time.monotonic() - self.died_at) * 1000.0)  # fmt: skip

    def _start_failed(self, msg: NamesrvStartFailed | BrokerStartFailed) -> None:
        if self.state == "starting":  # the first start: the launcher reports it and exits 2
            self.state = "failed"
            self.send(self.launcher, msg)
            return
        if self.state != "replacing":
            return
        log.error("role=%s replacement failed to start: %s", self.role, msg.reason)
        failed = self.children.forget(self.role)  # stopped here: its exit is no other death
        if not self.budget.died(self.role, now_ms()):
            self._fail(self.role, f"its replacement keeps failing to start: {msg.reason}")
            return
        self._stop_then_create(failed)

    def _stop_then_create(self, failed: Child | None) -> None:
        """Stop a replacement that failed to start (and its children), then try again."""
        self.orphans = {r: p for r, p in self.child_pids.items() if pid_alive(p)}
        self.child_pids = {}
        if failed is not None:
            if failed.pid is not None:
                self.orphans[self.role] = failed.pid
            self.send(failed.addr, ActorExitRequest())
        self.orphan_deadline = time.monotonic() + ORPHAN_WAIT_S
        self.schedule("orphans", RETRY_MS)

    def _child_exited(self, addr: Any) -> None:
        child = self.children.remove(addr)
        if child is None or self.state in ("stopping", "failed", "idle") or terminating():
            return  # terminating: SIGTERM to the whole run, ours next (no death)
        cause = child.cause()
        if self.state == "starting":  # the first start: the launcher reports it and exits 2
            self.state = "failed"
            failed = FAILED_FOR.get(type(self.start))
            if failed is not None:
                self.send(self.launcher, failed(f"{self.role} {cause} while starting"))
            return
        t = now_ms()
        if not self.budget.died(self.role, t):
            log.error("role=%s pid=%s %s: %s; not replaced", self.role, child.pid, cause,
                      self.budget.describe(self.role, t))  # fmt: skip
            self._fail(self.role, f"{cause}, {self.budget.describe(self.role, t)}")
            return
        log.error("role=%s pid=%s %s: replacing it (%s)", self.role, child.pid, cause,
                  self.budget.describe(self.role, t))  # fmt: skip
        self.state = "replacing"
        self.died_at = time.monotonic()
        self.orphans = {r: p for r, p in self.child_pids.items() if pid_alive(p)}
        self.child_pids = {}
        for pid in self.orphans.values():
            _signal(pid, signal.SIGTERM)  # the kernel sent it too (PDEATHSIG): belt and braces
        self.orphan_deadline = time.monotonic() + ORPHAN_WAIT_S
        self._after_orphans()

    def _after_orphans(self) -> None:
        """Start the replacement once the dead one's children are gone (SIGKILL when late)."""
        self.orphans = {r: p for r, p in self.orphans.items() if pid_alive(p)}
        if self.orphans and time.monotonic() < self.orphan_deadline:
            self.schedule("orphans", ORPHAN_POLL_MS)
            return
        for role, pid in self.orphans.items():
            log.warning("role=%s pid=%d outlived its dead parent by %.0f s: killing it", role,
                        pid, ORPHAN_WAIT_S)  # fmt: skip
            _signal(pid, signal.SIGKILL)
        self.orphans = {}
        self._create()

    def on_exit(self) -> None:
        self.state = "stopping"  # the actor system stops: its child's exit is no death

    def on_timer(self, key: str) -> None:
        if key == "launcher":
            self._check_launcher()
        elif key == "orphans" and self.state == "replacing":
            self._after_orphans()

    def _watch_launcher(self, pid: int) -> None:
        """Hold a pidfd of the launcher (readable once it exits) and look at it periodically."""
        if pid <= 0 or self.launcher_fd is not None:
            return
        try:
            self.launcher_fd = os.pidfd_open(pid)
        except OSError:  # already gone (or no pidfd here): the first look decides
            self.launcher_fd = None
            if pid_alive(pid):
                log.warning("role=%s cannot watch launcher pid %d (no pidfd)", self.role, pid)
                return
            self._launcher_gone(pid)
            return
        self.launcher_pid = pid
        self.schedule("launcher", LAUNCHER_POLL_MS)

    def _check_launcher(self) -> None:
        fd = self.launcher_fd
        if fd is None:
            return
        if select.select([fd], [], [], 0)[0]:
            self._launcher_gone(self.launcher_pid)
        else:
            self.schedule("launcher", LAUNCHER_POLL_MS)

    def _launcher_gone(self, pid: int) -> None:
        """The launcher died without stopping us (kill -9): stop the whole actor system, as a
        killed JVM takes its broker with it. SIGTERM to Thespian's admin (this process's parent)
        and to its logger (its one child that is not an actor): the admin's death reaches every
        actor (PR_SET_PDEATHSIG) and each shuts down (stores flushed, ports closed)."""
        if self.state == "stopping":
            return
        self.state = "stopping"
        log.critical("role=%s: launcher pid %d is gone (killed?): stopping this actor system",
                     self.role, pid)  # fmt: skip
        admin = os.getppid()
        for child in children_of(admin):
            if child != os.getpid() and not process_name(child).startswith(PROCESS_NAME_PREFIX):
                _signal(child, signal.SIGTERM)
        _signal(admin, signal.SIGTERM)

    def _fail(self, role: str, reason: str) -> None:
        """Give up: tell the launcher (it stops everything and exits non-zero)."""
        if self.state == "failed":
            return
        self.state = "failed"
        log.critical("role=%s keeps failing (%s): giving up; the launcher stops the process",
                     role, reason)  # fmt: skip
        if self.launcher is not None:
            self.send(self.launcher, RoleFailed(role, reason))


def children_of(parent: int) -> list[int]:
    """The live processes whose parent is `parent` (from /proc)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == parent and fields[0] not in ("Z", "X"):
            out.append(int(name))
    return out


def process_name(pid: int) -> str:
    """The kernel's name of a process (/proc/<pid>/comm); "" when it is gone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass
