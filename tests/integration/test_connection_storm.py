"""A burst of short connections against the broker and the name server (issue #12 item 1).

2,000 connections opened and closed as fast as one client can, three times in a row, while a
good client keeps asking on its own connection: it gets answers throughout, every port still
listens afterwards, and the descriptors and memory of every actor process come back to their
level; the log does not grow by a line per connection.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from deploy import procinfo
from deploy.wire import BlockingClient
from protocol.codes import RequestCode, ResponseCode
from tests.integration.conftest import cluster_pids
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    broker_addr,
    create_topic_cmd,
    msg_props,
    namesrv_addr,
    send_cmd,
    simple_cmd,
    start_real,
    wait_route,
    wait_until,
)

pytestmark = pytest.mark.integration

TOPIC = "StormTopic"
CONNECTIONS = 2000
ROUNDS = 3
MAX_GAP_S = 5.0  # the good client never waits this long for an answer
FD_SLACK = 3  # descriptors a process may hold beyond its level (a file opened lazily)
RSS_SLACK = 24 * 1024 * 1024  # bytes of RSS beyond the level (allocator arenas kept)
SETTLE_S = 20.0


def fd_count(pid: int) -> int:
    """Open descriptors of a process (-1 when gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def rss(pid: int) -> int:
    """Resident set size in bytes (0 when gone)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def storm(port: int) -> None:
    """CONNECTIONS connect + close, one after the other."""
    for _ in range(CONNECTIONS):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.connect(("127.0.0.1", port))
        finally:
            s.close()


class GoodClient(threading.Thread):
    """Asks one request after the other on its own connection until stopped."""

    def __init__(self, addr: tuple[str, int], make: Any) -> None:
        super().__init__(daemon=True)
        self.addr = addr
        self.make = make
        self.stop = threading.Event()
        self.answers: list[tuple[float, int]] = []  # (monotonic time, code)
        self.errors: list[str] = []

    def run(self) -> None:
        deadline = time.monotonic() + 120.0
        with BlockingClient(self.addr) as cl:
            while not self.stop.is_set() and time.monotonic() < deadline:
                try:
                    resp = cl.invoke(self.make(), RPC_TIMEOUT_S)
                except Exception as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    cl.close()
                    time.sleep(0.05)
                    continue
                self.answers.append((time.monotonic(), resp.code))
                time.sleep(0.002)

    def check(self, since: float, until: float) -> None:
        """Answers all along [since, until], each SUCCESS or SYSTEM_BUSY, and no error."""
        assert self.errors == []
        codes = {c for _t, c in self.answers}
        assert codes <= {0, int(ResponseCode.SYSTEM_BUSY)}, codes
        times = [since] + [t for t, _c in self.answers if since <= t <= until] + [until]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert max(gaps) < MAX_GAP_S, f"no answer for {max(gaps):.1f} s"
        assert sum(1 for t, c in self.answers if since <= t <= until and c == 0) > 0


def _levels(pids: list[int]) -> dict[int, tuple[int, int]]:
    return {p: (fd_count(p), rss(p)) for p in pids}


def _back_to_level(before: dict[int, tuple[int, int]]) -> list[str]:
    """What is still above its level (empty: everything is back)."""
    out = []
    for pid, (fds, mem) in before.items():
        now_fds, now_mem = fd_count(pid), rss(pid)
        if now_fds < 0:
            out.append(f"pid {pid} died")
        elif now_fds > fds + FD_SLACK:
            out.append(f"pid {pid}: {now_fds} descriptors (was {fds})")
        elif now_mem > mem + RSS_SLACK:
            out.append(f"pid {pid}: RSS {now_mem >> 20} MiB (was {mem >> 20} MiB)")
    return out


def test_connection_storms_leave_broker_and_namesrv_serving(local_cluster) -> None:
    cluster = start_real(local_cluster)
    addr, ns = broker_addr(cluster), namesrv_addr(cluster)
    with BlockingClient(addr) as cl:
        assert cl.invoke(create_topic_cmd(TOPIC, 4), RPC_TIMEOUT_S).code == 0
    assert wait_route(ns, TOPIC, True, 10.0).code == 0
    pids = cluster_pids(cluster)
    ports = {addr[1], addr[1] - 2, ns[1]}
    log_path = Path(cluster.data_dir) / "actormq.log"

    producer = GoodClient(addr, lambda: send_cmd(TOPIC, b"good", msg_props()))
    router = GoodClient(ns, lambda: simple_cmd(int(RequestCode.GET_ROUTEINFO_BY_TOPIC),
                                               topic=TOPIC))  # fmt: skip
    producer.start()
    router.start()
    try:
        storm(addr[1])  # warm-up: the allocators' first growth is not a leak
        storm(ns[1])
        time.sleep(1.0)
        before = _levels(pids)
        log_lines = len(log_path.read_text(errors="replace").splitlines())
        t0 = time.monotonic()
        for _ in range(ROUNDS):
            storm(addr[1])
        t1 = time.monotonic()
        for _ in range(ROUNDS):
            storm(ns[1])
        t2 = time.monotonic()
        time.sleep(0.5)
        producer.check(t0, t1 + 0.5)
        router.check(t1, t2 + 0.5)
    finally:
        producer.stop.set()
        router.stop.set()
        producer.join(RPC_TIMEOUT_S + 5)
        router.join(RPC_TIMEOUT_S + 5)
    listening = {port for _pid, _ip, port in procinfo.listeners_of(pids)}
    assert ports <= listening, (ports, listening)
    left = wait_until(lambda: _back_to_level(before) == [], SETTLE_S, 0.2)
    assert left, _back_to_level(before)
    added = len(log_path.read_text(errors="replace").splitlines()) - log_lines
    assert added < 50, f"{added} log lines for {2 * ROUNDS * CONNECTIONS} connections"
    thespian_log = (Path(cluster.data_dir) / "thespian.log")
    if thespian_log.exists():
        assert "excessive queue" not in thespian_log.read_text(errors="replace")
