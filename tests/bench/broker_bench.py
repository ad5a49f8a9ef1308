"""Broker benchmark: `python -m tests.bench.broker_bench` or `actormq bench`.

A: one connection, one SEND_MESSAGE_V2 (1 KiB) in flight, vs a raw Python loopback echo of
   1 KiB frames measured in the same run (goal >= 0.4x).
B: send 100, wait for the 100 responses, repeat (goal >= 100,000 msgs/s).
C: pull 200,000 stored messages, 32 per pull (goal >= 150,000 msgs/s).   [real cores only]
D: 500 msgs/s with a long-polling consumer, end-to-end p50 <= 1 ms, p99 <= 5 ms. [real cores]
Broker CPU microseconds per message (utime+stime of the actor system's processes from
/proc/<pid>/stat) for A, B, C. Each figure is the median of --runs runs.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from typing import Any

log = logging.getLogger(__name__)

BODY = b"x" * 1024
TICK_US = 1_000_000 / os.sysconf("SC_CLK_TCK")


def _echo_server(sock: socket.socket) -> None:
    """Raw loopback echo: parse 4-byte-length frames, write each one back."""
    conn, _ = sock.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    while True:
        data = conn.recv(65536)
        if not data:
            return
        buf += data
        out = []
        pos = 0
        while len(buf) - pos >= 4:
            (n,) = struct.unpack_from(">i", buf, pos)
            if len(buf) - pos < 4 + n:
                break
            out.append(buf[pos : pos + 4 + n])
            pos += 4 + n
        buf = buf[pos:]
        if out:
            conn.sendall(b"".join(out))


def raw_echo_rate(n: int) -> float:
    """Round trips per second of 1 KiB frames against a plain Python echo process."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=_echo_server, args=(srv,), daemon=True)
    proc.start()
    try:
        c = socket.create_connection(srv.getsockname())
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        frame = struct.pack(">i", len(BODY)) + BODY
        t0 = time.perf_counter()
        for _ in range(n):
            c.sendall(frame)
            need = len(frame)
            while need:
                need -= len(c.recv(65536))
        rate = n / (time.perf_counter() - t0)
        c.close()
        return rate
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
        srv.close()


def send_request(topic: str, queue_id: int, serialize_type: int = 0) -> Any:
    """A SEND_MESSAGE_V2 request as a Java producer writes it."""
    from protocol.command import RemotingCommand

    ext = {"a": "bench_pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": "WAIT\x01true\x02TAGS\x01bench",
           "j": "0", "k": "false", "m": "false"}
    return RemotingCommand.request(310, ext, BODY, serialize_type=serialize_type)


def cpu_us(pids: list[int]) -> float:
    """CPU time of the processes in microseconds."""
    from deploy import procinfo

    return sum(procinfo.cpu_ticks(p) for p in pids) * TICK_US


def bench_a(addr: tuple[str, int], n: int, pids: list[int]) -> tuple[float, float]:
    """One in flight: (msgs/s, broker CPU us/msg)."""
    from deploy.wire import BlockingClient

    with BlockingClient(addr) as cl:
        cl.invoke(send_request("BenchA", 0), 10)
        c0 = cpu_us(pids)
        t0 = time.perf_counter()
        for i in range(n):
            r = cl.invoke(send_request("BenchA", i % 4), 10)
            if r.code != 0:
                raise RuntimeError(f"send failed: {r.code} {r.remark}")
        dt = time.perf_counter() - t0
        return n / dt, (cpu_us(pids) - c0) / n


def bench_b(addr: tuple[str, int], rounds: int, pids: list[int]) -> tuple[float, float]:
    """100 in flight, repeated: (msgs/s, broker CPU us/msg)."""
    from deploy.wire import BlockingClient

    with BlockingClient(addr) as cl:
        c0 = cpu_us(pids)
        t0 = time.perf_counter()
        for _ in range(rounds):
            reqs = [send_request("BenchB", i % 4) for i in range(100)]
            for r in cl.invoke_many(reqs, 30):
                if r.code != 0:
                    raise RuntimeError(f"send failed: {r.code} {r.remark}")
        dt = time.perf_counter() - t0
        n = rounds * 100
        return n / dt, (cpu_us(pids) - c0) / n


def bench_c(addr: tuple[str, int], total: int, pids: list[int]) -> tuple[float, float]:
    """Pull `total` stored messages from one queue, 32 per pull: (msgs/s, CPU us/msg)."""
    from deploy.wire import BlockingClient
    from protocol.command import RemotingCommand

    topic = "BenchC"
    with BlockingClient(addr) as cl:
        sent = 0
        while sent < total:
            k = min(100, total - sent)
            for r in cl.invoke_many([send_request(topic, 0) for _ in range(k)], 30):
                if r.code != 0:
                    raise RuntimeError(f"send failed: {r.code} {r.remark}")
            sent += k
        time.sleep(0.5)  # let the consume queue catch up
        offset = 0
        got = 0
        c0 = cpu_us(pids)
        t0 = time.perf_counter()
        while got < total:
            ext = {"consumerGroup": "bench_cg", "topic": topic, "queueId": "0",
                   "queueOffset": str(offset), "maxMsgNums": "32", "sysFlag": "0",
                   "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0",
                   "expressionType": "TAG", "subscription": "*"}
            r = cl.invoke(RemotingCommand.request(11, ext), 30)
            if r.code != 0:
                raise RuntimeError(f"pull failed at {offset}: {r.code} {r.remark}")
            nxt = int(r.ext_fields["nextBeginOffset"])
            got += nxt - offset
            offset = nxt
        dt = time.perf_counter() - t0
        return got / dt, (cpu_us(pids) - c0) / got


def run(args: argparse.Namespace) -> dict[str, list[float]]:
    """Start a cluster like `actormq up`, run the scenarios, stop it."""
    from actors.broker.config import BrokerConfig
    from deploy import launch
    from store.config import StoreConfig
    from tests.integration.conftest import cluster_pids

    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="amq-bench-") as data:
        cluster = launch.start_system(data, log_level="WARNING")
        try:
            props = {"listenPort": "0", "storePathRootDir": os.path.join(data, "store")}
            bc = BrokerConfig.from_properties(props)
            sc = StoreConfig.from_properties(props)
            port = launch.start_broker(cluster, bc, sc, personality=args.personality)
            addr = ("127.0.0.1", port)
            pids = cluster_pids(cluster)
            for _ in range(args.runs):
                raw = raw_echo_rate(args.a)
                a_rate, a_cpu = bench_a(addr, args.a, pids)
                b_rate, b_cpu = bench_b(addr, args.b, pids)
                for key, val in (("raw_echo", raw), ("A_msgs_s", a_rate), ("A_ratio", a_rate / raw),
                                 ("A_cpu_us", a_cpu), ("B_msgs_s", b_rate), ("B_cpu_us", b_cpu)):
                    results.setdefault(key, []).append(val)
                if args.personality is None and args.c:
                    c_rate, c_cpu = bench_c(addr, args.c, pids)
                    results.setdefault("C_msgs_s", []).append(c_rate)
                    results.setdefault("C_cpu_us", []).append(c_cpu)
        finally:
            launch.stop_cluster(cluster)
    return results


def main(argv: list[str] | None = None) -> int:
    """CLI entry."""
    p = argparse.ArgumentParser(prog="broker_bench")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--a", type=int, default=2000, help="A: requests")
    p.add_argument("--b", type=int, default=100, help="B: rounds of 100")
    p.add_argument("--c", type=int, default=0, help="C: messages to pull (0 = skip)")
    p.add_argument("--personality", default=None,
                   help="actors.runtime.echo to measure the runtime alone")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    results = run(args)
    for key, vals in results.items():
        sys.stdout.write(f"{key:10s} median {statistics.median(vals):12.2f}   runs "
                         + " ".join(f"{v:.2f}" for v in vals) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
