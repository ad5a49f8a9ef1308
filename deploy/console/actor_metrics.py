"""The actor system's own metrics: each actormq process on this host, by role.

Ours (RocketMQ has no such thing): every actor process names itself `amq-<role>`
(actors.runtime.watch.name_process), so /proc tells the console which roles run here, their
CPU time and resident memory, the bytes waiting unread in its channels (deploy.console.
socket_queues), and (by the process ids it has seen for a role across scrapes) how often a
supervisor replaced one. Only the console user's own processes are looked at.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from deploy.console.metrics import Family
from deploy.console.socket_queues import unix_queue_bytes

log = logging.getLogger(__name__)

PREFIX = "amq-"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class ActorProcess:
    pid: int
    role: str
    cpu_s: float
    rss_bytes: int
    started_ticks: int


def actor_processes(uid: int | None = None) -> Iterator[ActorProcess]:
    """This user's actormq processes (comm `amq-<role>`; the role is cut at 15 characters)."""
    uid = os.getuid() if uid is None else uid
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.find("(") + 1:stat.rfind(")")]
        if not comm.startswith(PREFIX):
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        try:  # fields 14, 15 (utime, stime), 22 (starttime), 24 (rss pages): 1-based in proc(5)
            cpu = (int(rest[11]) + int(rest[12])) / _TICKS
            started, rss = int(rest[19]), int(rest[21]) * _PAGE
        except (IndexError, ValueError):
            continue
        yield ActorProcess(int(entry), comm[len(PREFIX):], cpu, rss, started)


@dataclass
class ActorMetrics:
    """Per-role CPU, memory and replacements, remembered across scrapes.

    A replacement is a process of a role first seen while the role already had its most
    processes alive at once: the role's distinct processes beyond that peak. A role that
    only stopped counts none."""

    seen: dict[str, set[tuple[int, int]]] = field(default_factory=dict)  # role -> (pid, start)
    peak: dict[str, int] = field(default_factory=dict)  # role -> most processes alive at once

    def observe(self, procs: list[ActorProcess]) -> dict[str, list[ActorProcess]]:
        """Note this scrape's live processes; them by role."""
        live: dict[str, list[ActorProcess]] = {}
        for p in procs:
            live.setdefault(p.role, []).append(p)
        for role, ps in live.items():
            self.seen.setdefault(role, set()).update((p.pid, p.started_ticks) for p in ps)
            self.peak[role] = max(self.peak.get(role, 0), len(ps))
        return live

    def replacements(self, role: str) -> int:
        return len(self.seen.get(role, ())) - self.peak.get(role, 0)

    def families(self) -> list[Family]:
        cpu = Family("actormq_actor_cpu_seconds_total", "CPU time of the role's processes",
                     ("role",))  # fmt: skip
        rss = Family("actormq_actor_resident_memory_bytes",
                     "resident memory of the role's processes", ("role",))  # fmt: skip
        procs = Family("actormq_actor_processes", "live processes of the role", ("role",))
        queued = Family("actormq_actor_channel_queue_bytes",
                        "bytes waiting unread in the role's channels (Unix stream sockets)",
                        ("role",))  # fmt: skip
        restarts = Family("actormq_actor_restarts_total",
                          "times a supervisor replaced the role's process, as seen by this "
                          "console", ("role",))  # fmt: skip
        live = self.observe(list(actor_processes()))
        for role, ps in sorted(live.items()):
            cpu.set((role,), sum(p.cpu_s for p in ps))
            rss.set((role,), sum(p.rss_bytes for p in ps))
            procs.set((role,), len(ps))
        try:
            depth = unix_queue_bytes(p.pid for ps in live.values() for p in ps)
        except OSError as exc:  # no sock_diag here (a kernel without it): no such figures
            log.info("channel queue depth not read: %s", exc)
            depth = {}
        for role, ps in sorted(live.items()):
            if depth:
                queued.set((role,), sum(depth.get(p.pid, 0) for p in ps))
        for role in sorted(self.seen):
            restarts.set((role,), self.replacements(role))
        up = Family("actormq_console_scrape_timestamp_seconds", "when this scrape ran", ())
        up.set((), round(time.time(), 3))
        return [cpu, rss, procs, queued, restarts, up]
