"""The launcher's shutdown hook: what stops a command, and the loop it serves in.

Mirrors the ShutdownHookThread that broker/BrokerStartup.java and namesrv/NamesrvStartup.java
install (RocketMQ 4.9.x): SIGTERM / Ctrl-C stop the command. Here the handler only sets a
StopSignal; the command's start steps run in a thread of their own (`start_steps`) so that a
signal ends the start between roles, and `serve` is the loop after the start: it returns when
asked to stop, or with EXIT_ROLE_FAILED when a role kept failing (RoleFailed) or a supervisor
process died; the CLI then stops everything (deploy.launch.stop_cluster).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeVar

T = TypeVar("T")

EXIT_ROLE_FAILED: Final = 3  # a role kept dying (or its supervisor died): everything was stopped
POLL_S: Final = 0.25  # start_steps: how often it looks whether the admin is still there


class ServedCluster(Protocol):
    """What the hook reads and marks on the cluster it serves (deploy.launch.LocalCluster)."""

    asys: Any
    admin_port: int
    supervisor_pids: dict[str, int]
    role_failures: list[Any]
    interrupt: StopSignal | None
    abandoned: bool


def wait_for_stop(cluster: ServedCluster, stop: threading.Event) -> str | None:
    """Serve until `stop` is set (None), or until a role keeps failing or a supervisor process
    dies: then the reason (the caller stops the cluster and exits non-zero)."""
    from datetime import timedelta

    from actors.runtime.messages import RoleFailed
    from deploy.procinfo import is_zombie

    if cluster.role_failures:
        msg = cluster.role_failures[0]
        return f"{msg.role} keeps failing ({msg.reason})"
    while not stop.is_set():
        msg = cluster.asys.listen(timedelta(seconds=1))
        if isinstance(msg, RoleFailed):
            return f"{msg.role} keeps failing ({msg.reason})"
        for role, pid in cluster.supervisor_pids.items():
            if is_zombie(pid):
                return f"the supervisor of {role} (pid {pid}) died"
    return None


class StartInterrupted(Exception):
    """SIGTERM or Ctrl-C arrived while the servers were still starting."""


class StopSignal(threading.Event):
    """Set by SIGTERM / Ctrl-C (the handler only sets it: an exception raised from a handler
    lands wherever the main thread happens to be, inside Thespian's transport or an import,
    and is swallowed or rewrapped there). `signame` is the signal's name."""

    def __init__(self) -> None:
        super().__init__()
        self.signame = ""


def stop_event() -> StopSignal:
    """A StopSignal, its handlers installed before the servers start."""
    stop = StopSignal()

    def handler(signum: int, frame: Any) -> None:
        stop.signame = stop.signame or signal.Signals(signum).name
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def start_steps(cluster: ServedCluster, stop: StopSignal, steps: Callable[[], T]) -> T:
    """Run a command's start steps in a thread of their own while this thread (the one the
    signal handlers run in) waits for them or for `stop`. After a stop the role being started
    finishes starting (so stop_cluster stops it cleanly, its store shut down; a role cut off
    mid-start left processes the actor system's shutdown could not end) and the next one does
    not start (StartInterrupted). When the same signal ended the actor system's admin, the
    steps may sit up to 50 s inside Thespian's createActor, so the wait ends at once: the
    cluster is marked abandoned (its actor system belongs to that thread) and stop_cluster
    only reaps its processes. Raises what the steps raised, or StartInterrupted when
    stopped."""
    from deploy.procinfo import is_zombie, pid_listening_on

    admin = pid_listening_on(cluster.admin_port)
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("value", steps()))
        except BaseException as exc:  # handed to the main thread as it is
            outcome.append(("error", exc))

    cluster.interrupt = stop
    worker = threading.Thread(target=run, name="actormq-start", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(POLL_S)
            if worker.is_alive() and stop.is_set() and (admin is None or is_zombie(admin)):
                cluster.abandoned = True
                raise StartInterrupted(stop.signame)
    finally:
        cluster.interrupt = None
    kind, value = outcome[0]
    if kind == "error":
        raise value
    if stop.is_set():
        raise StartInterrupted(stop.signame)
    return value  # type: ignore[no-any-return]


def serve(cluster: ServedCluster, stop: StopSignal) -> int:
    """Until SIGTERM / Ctrl-C (0), or until a role keeps failing (EXIT_ROLE_FAILED, said on
    stderr); the caller stops the cluster either way."""
    failure = wait_for_stop(cluster, stop)
    if failure is None:
        return 0
    sys.stderr.write(f"actormq: stopping: {failure}\n")
    sys.stderr.flush()
    return EXIT_ROLE_FAILED
