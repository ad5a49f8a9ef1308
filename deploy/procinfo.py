"""Linux /proc helpers: who listens where, which processes belong to an actor system.

Mirrors nothing in RocketMQ (its scripts use `jps`/`kill`); used by tests and tooling to prove
that a stopped system leaves no process and that only the requested ports face the network.
psutil-free: reads /proc/net/tcp and /proc/<pid>/{stat,fd,environ}.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import Callable

log = logging.getLogger(__name__)

TCP_LISTEN = "0A"
TCP_TIME_WAIT = "06"


def listening_sockets(net_of: int | None = None) -> dict[int, tuple[str, int]]:
    """inode -> (ip, port) of every IPv4 TCP socket in LISTEN state, in our network namespace
    or in the one of process `net_of`."""
    out: dict[int, tuple[str, int]] = {}
    path = "/proc/net/tcp" if net_of is None else f"/proc/{net_of}/net/tcp"
    try:
        with open(path, encoding="ascii") as f:
            next(f)
            for line in f:
                parts = line.split()
                if len(parts) < 10 or parts[3] != TCP_LISTEN:
                    continue
                ip_hex, port_hex = parts[1].split(":")
                ip = socket.inet_ntoa(struct.pack("<I", int(ip_hex, 16)))
                out[int(parts[9])] = (ip, int(port_hex, 16))
    except OSError:
        pass
    return out


def tcp_states(port: int) -> list[str]:
    """The TCP state (hex, as /proc/net/tcp writes it: 0A listen, 06 time-wait, ...) of every
    IPv4 socket whose local port is `port`."""
    states: list[str] = []
    try:
        with open("/proc/net/tcp", encoding="ascii") as f:
            next(f)
            for line in f:
                parts = line.split()
                if len(parts) > 3 and int(parts[1].split(":")[1], 16) == port:
                    states.append(parts[3])
    except OSError:
        pass
    return states


def socket_inodes(pid: int) -> set[int]:
    """Socket inodes held open by a process."""
    inodes: set[int] = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    except OSError:
        pass
    return inodes


def all_pids() -> list[int]:
    """Every process id visible in /proc."""
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def pid_listening_on(port: int) -> int | None:
    """The process that holds a listening socket on `port`, if we can see it."""
    inodes = {i for i, (_ip, p) in listening_sockets().items() if p == port}
    if not inodes:
        return None
    for pid in all_pids():
        if socket_inodes(pid) & inodes:
            return pid
    return None


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first); None when gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def session_id(pid: int) -> int | None:
    """The session id (field 6 of /proc/<pid>/stat)."""
    fields = stat_fields(pid)
    return None if fields is None else int(fields[3])


def pids_in_session(sid: int) -> list[int]:
    """Live (non-zombie) processes of a session."""
    pids = []
    for pid in all_pids():
        if session_id(pid) == sid and not is_zombie(pid):
            pids.append(pid)
    return pids


def start_time(pid: int) -> int:
    """When a process started, in clock ticks since boot (field 22 of /proc/<pid>/stat); 0 when
    it is gone. A pid and its start time name one process even after the pid is reused."""
    fields = stat_fields(pid)
    return 0 if fields is None else int(fields[19])


def parent_pid(pid: int) -> int | None:
    """The parent's pid (field 4 of /proc/<pid>/stat); None when the process is gone."""
    fields = stat_fields(pid)
    return None if fields is None else int(fields[1])


def descendants(root: int) -> list[int]:
    """Every live process below `root` (children, their children, ...), parents first."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        ppid = parent_pid(pid)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop(0)
        if not is_zombie(pid):
            out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def is_zombie(pid: int) -> bool:
    """True for a zombie or a vanished process."""
    fields = stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X")


def _pids_whose(proc_file: str, test: Callable[[bytes], bool]) -> list[int]:
    """Live processes whose /proc/<pid>/<proc_file> passes `test`."""
    found = []
    for pid in all_pids():
        try:
            with open(f"/proc/{pid}/{proc_file}", "rb") as f:
                data = f.read()
        except OSError:
            continue
        if test(data) and not is_zombie(pid):
            found.append(pid)
    return found


def pids_with_env(marker: str) -> list[int]:
    """Processes whose initial environment contains `marker` (e.g. 'ACTORMQ_TEST=abc')."""
    needle = marker.encode()
    return _pids_whose("environ", lambda env: needle in env.split(b"\0"))


def pids_with_arg(text: str) -> list[int]:
    """Processes whose command line contains `text` (e.g. an `actormq up --data` directory)."""
    needle = text.encode()
    return _pids_whose("cmdline", lambda cmdline: needle in cmdline)


def listeners_of(pids: list[int], net_of: int | None = None) -> list[tuple[int, str, int]]:
    """(pid, ip, port) of every listening TCP socket held by `pids` (sockets of the network
    namespace of process `net_of` when given, else of ours)."""
    table = listening_sockets(net_of)
    out = []
    for pid in pids:
        for inode in socket_inodes(pid):
            if inode in table:
                ip, port = table[inode]
                out.append((pid, ip, port))
    return out


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process in clock ticks (0 when gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return 0
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def cpu_ns(pid: int) -> int:
    """CPU time of a process, every thread of it, in nanoseconds (the sum of
    /proc/<pid>/task/*/schedstat: /proc/<pid>/schedstat alone is its main thread, which in a
    JVM does next to nothing; 0 when gone).

    Falls back to utime + stime ticks when schedstat is not available.
    """
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    total = 0
    try:
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:  # the thread ended meanwhile
                continue
    except (OSError, ValueError, IndexError):
        return cpu_ticks(pid) * (1_000_000_000 // os.sysconf("SC_CLK_TCK"))
    return total
