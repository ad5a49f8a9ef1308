"""What the benchmarks measure with: CPU time per actor role, one request's round trip.

Mirrors nothing in RocketMQ. CPU time is read from /proc (deploy.procinfo.cpu_ns: every
thread's schedstat); a role is the actor process's name (actors.runtime.watch.name_process).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any


def cpu_us(pids: list[int]) -> float:
    """CPU time of the processes in microseconds (schedstat nanoseconds when available)."""
    from deploy import procinfo

    return sum(procinfo.cpu_ns(p) for p in pids) / 1000.0


def role_of(pid: int) -> str:
    """An actor process's role from its name ("amq-send" -> "send"), else its name."""
    from actors.runtime.watch import PROCESS_NAME_PREFIX

    try:
        with open(f"/proc/{pid}/comm", encoding="ascii") as f:
            name = f.read().strip()
    except OSError:
        return "?"
    return name[len(PROCESS_NAME_PREFIX):] if name.startswith(PROCESS_NAME_PREFIX) else name


def cpu_by_role(pids: list[int]) -> dict[str, float]:
    """CPU microseconds per role (processes of the same role summed)."""
    from deploy import procinfo

    out: dict[str, float] = {}
    for p in pids:
        role = role_of(p)
        out[role] = out.get(role, 0.0) + procinfo.cpu_ns(p) / 1000.0
    return out


def role_cpu_since(pids: list[int], before: dict[str, float], n: int) -> dict[str, float]:
    """CPU us per item of each role since `before` (a cpu_by_role snapshot), over n items."""
    return {role: (us - before.get(role, 0.0)) / n for role, us in cpu_by_role(pids).items()}


def one_round_trip(sock: socket.socket, decoder: Any, buf: memoryview, frame: bytes) -> Any:
    """Write one request frame and read until a response frame is complete; it, decoded."""
    from protocol.command import RemotingCommand

    sock.sendall(frame)
    got: list[Any] = []
    while not got:
        k = sock.recv_into(buf)
        if not k:
            raise ConnectionError("broker closed the connection")
        got = decoder.feed(buf[:k])
    return RemotingCommand.decode(got[0])


def paced(n: int, rate: float, step: Callable[[int], None]) -> None:
    """step(i) for i in range(n), started at `rate`/s on a fixed schedule (a late step is not
    made up for by sleeping less: the next one starts as soon as it is due)."""
    period = 1.0 / rate
    t_next = time.monotonic()
    for i in range(n):
        delay = t_next - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        t_next += period
        step(i)


def paced_sends(addr: tuple[str, int], n: int, rate: float, request: Callable[[int], Any],
                what: str = "send") -> None:  # fmt: skip
    """n requests at `rate`/s, one in flight (`request(i)` builds the i-th), as a paced
    producer sends; raises RuntimeError on a failed one (a benchmark's child process exits
    non-zero: its parent checks the exit code)."""
    from deploy.wire import BlockingClient

    with BlockingClient(addr) as cl:

        def send(i: int) -> None:
            r = cl.invoke(request(i), 10)
            if r.code != 0:
                raise RuntimeError(f"{what} {i} failed: {r.code} {r.remark}")

        paced(n, rate, send)
