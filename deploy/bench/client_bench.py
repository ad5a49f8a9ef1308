"""Client benchmark: `python -m deploy.bench.client_bench` or `actormq bench --client`.

Against one cluster started like `actormq up` (name server + real broker), each run measures
the raw wire client of the broker benchmark (deploy/bench/broker_bench.py: requests encoded
before the clock starts, JSON headers) and then the public client API, in the same run:

A  one SEND_MESSAGE_V2 of 1 KiB in flight: raw vs `Producer.send` (goal >= 0.7x raw)
B  raw: 100 in flight, repeated; client: `send_async` with max_inflight=1000 (auto-batching
   on, the default; and off, reported) and `send_batch` of 100 messages (goal >= 0.8x raw)

With --java, B also runs the Java 4.9.8 client from the reference kit (deploy/bench/java_client.py):
a DefaultMQProducer's async sends with the same 1,000 in flight, beside our send_async without
auto-batching (goal >= 0.8x Java's, issue #22); both warmed alike for --warmup seconds first.

Client CPU microseconds per message: the CPU time of this process (every thread of the
client) plus its client actor system's processes, over the scenario. The table shows the
median and min-max of --runs runs. The machine's other load moves every figure: compare the
ratios, which are taken within one run.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from typing import Any

from deploy.bench.bench_table import cell

log = logging.getLogger(__name__)

BODY = b"x" * 1024


def client_cpu_us() -> float:
    """CPU time of this process and of its client actor system, in microseconds."""
    from actors.client.client_runtime import ClientRuntime, _pids_in_group
    from deploy import procinfo

    total = time.process_time() * 1e6
    rt = ClientRuntime._instance
    if rt is not None:
        for pgid in rt._pgids:
            total += sum(procinfo.cpu_ns(p) for p in _pids_in_group(pgid)) / 1000.0
    return total


def producer_a(p: Any, n: int) -> tuple[float, float]:
    """Producer.send one in flight: (msgs/s, client CPU us/msg)."""
    from actors.client import Message

    msgs = [Message("BenchPA", BODY) for _ in range(n)]
    p.send(Message("BenchPA", BODY))  # warm-up: route, connection
    c0, t0 = client_cpu_us(), time.perf_counter()
    for m in msgs:
        r = p.send(m)
        if r.status != "SEND_OK":
            raise RuntimeError(f"send failed: {r}")
    dt = time.perf_counter() - t0
    return n / dt, (client_cpu_us() - c0) / n


def producer_b_async(p: Any, n: int) -> tuple[float, float]:
    """send_async with a budget of 1,000 in flight: (msgs/s, client CPU us/msg)."""
    from actors.client import Message

    msgs = [Message("BenchPB", BODY) for _ in range(n)]
    p.send(Message("BenchPB", BODY))
    c0, t0 = client_cpu_us(), time.perf_counter()
    futs = [p.send_async(m) for m in msgs]
    if p.flush(60):
        raise RuntimeError("async sends still in flight after 60 s")
    dt = time.perf_counter() - t0
    bad = sum(1 for f in futs if f.exception() is not None or f.result().status != "SEND_OK")
    if bad:
        raise RuntimeError(f"{bad} async sends failed")
    return n / dt, (client_cpu_us() - c0) / n


def producer_b_batch(p: Any, n: int) -> tuple[float, float]:
    """send_batch of 100 messages, one batch in flight: (msgs/s, client CPU us/msg)."""
    from actors.client import Message

    batches = [[Message("BenchPC", BODY) for _ in range(100)] for _ in range(max(1, n // 100))]
    p.send_batch(batches[0])
    c0, t0 = client_cpu_us(), time.perf_counter()
    for b in batches:
        r = p.send_batch(b)
        if r.status != "SEND_OK":
            raise RuntimeError(f"batch failed: {r}")
    dt = time.perf_counter() - t0
    total = 100 * len(batches)
    return total / dt, (client_cpu_us() - c0) / total


def run(args: argparse.Namespace) -> dict[str, list[float]]:
    """Start a cluster like `actormq up`, run the scenarios --runs times, stop it."""
    from actors.broker.config import BrokerConfig
    from actors.client import Producer
    from deploy import launch
    from deploy.bench.broker_bench import bench_a, bench_b
    from deploy.launch import cluster_pids
    from store.config import StoreConfig

    results: dict[str, list[float]] = {}

    def add(key: str, val: float) -> None:
        results.setdefault(key, []).append(val)

    with tempfile.TemporaryDirectory(prefix="amq-cbench-") as data:
        cluster = launch.start_system(data, log_level="WARNING")
        try:
            ns_port = launch.start_namesrv(cluster, port=0)
            props = {"listenPort": "0", "storePathRootDir": os.path.join(data, "store"),
                     "namesrvAddr": f"127.0.0.1:{ns_port}", "traceTopicEnable": "true"}
            port = launch.start_broker(cluster, BrokerConfig.from_properties(props),
                                       StoreConfig.from_properties(props))
            addr = ("127.0.0.1", port)
            pids = [p for p in cluster_pids(cluster) if p != os.getpid()]
            ns = f"127.0.0.1:{ns_port}"
            with Producer("bench_pg", namesrv=ns, max_inflight=1000) as p, \
                    Producer("bench_pg_single", namesrv=ns, max_inflight=1000,
                             auto_batch=False) as single, \
                    Producer("bench_pg_traced", namesrv=ns, max_inflight=1000,
                             enable_trace=True) as traced:
                if args.java and args.b:  # both clients warmed alike before the first run
                    warm_end = time.monotonic() + args.warmup
                    while True:
                        producer_b_async(single, min(args.b, 10_000))
                        if time.monotonic() >= warm_end:
                            break
                for _ in range(args.runs):
                    if args.a:
                        raw, _cpu = bench_a(addr, args.a, pids)
                        rate, cpu = producer_a(p, args.a)
                        add("A_raw", raw)
                        add("A", rate)
                        add("A_ratio", rate / raw)
                        add("A_cpu", cpu)
                    if args.b:
                        raw, _cpu = bench_b(addr, args.b // 100, pids)
                        add("B_raw", raw)
                        rate, cpu = producer_b_async(p, args.b)
                        add("B_async", rate)
                        add("B_async_ratio", rate / raw)
                        add("B_async_cpu", cpu)
                        untraced = rate
                        rate, cpu = producer_b_async(traced, args.b)
                        add("B_traced", rate)
                        add("B_traced_ratio", rate / untraced)  # on / off, seconds apart
                        add("B_traced_cpu", cpu)
                        rate, cpu = producer_b_async(single, args.b)
                        add("B_single", rate)
                        add("B_single_ratio", rate / raw)
                        add("B_single_cpu", cpu)
                        if args.java:
                            from deploy.bench import java_client

                            jrate, jcpu = java_client.produce(ns, "BenchPB", args.b, 1000,
                                                              args.warmup)  # fmt: skip
                            add("B_java", jrate)
                            add("B_java_cpu", jcpu)
                            add("B_single_vs_java", rate / jrate)
                            add("B_single_cpu_vs_java", cpu / jcpu)
                        rate, cpu = producer_b_batch(p, args.b)
                        add("B_batch", rate)
                        add("B_batch_ratio", rate / raw)
                        add("B_batch_cpu", cpu)
        finally:
            launch.stop_cluster(cluster)
    return results


ROWS = (  # label, rate key, ratio key, cpu key, goal
    ("A raw wire client, 1 in flight", "A_raw", None, None, "baseline"),
    ("A Producer.send, 1 in flight", "A", "A_ratio", "A_cpu", ">= 0.7x raw A"),
    ("B raw wire client, 100 in flight", "B_raw", None, None, "baseline"),
    ("B Producer.send_async, 1000 budget", "B_async", "B_async_ratio", "B_async_cpu",
     ">= 0.8x raw B"),
    ("  same, enable_trace=True (x: / off)", "B_traced", "B_traced_ratio", "B_traced_cpu",
     ">= 0.9x without trace"),
    ("  same, auto_batch=False", "B_single", "B_single_ratio", "B_single_cpu", "(reported)"),
    ("B Java 4.9.8 send(msg, callback), 1000", "B_java", None, "B_java_cpu", "(warmed alike)"),
    ("B Producer.send_batch of 100", "B_batch", "B_batch_ratio", "B_batch_cpu", ">= 0.8x raw B"),
)


def format_table(results: dict[str, list[float]]) -> str:
    """Per scenario: median (min-max) over the runs, ratio to raw, client CPU us/msg."""
    runs = max((len(v) for v in results.values()), default=0)
    lines = [f"client benchmark, {runs} run(s); median (min-max)",
             f"{'scenario':36s} {'msgs/s':>24s} {'x raw':>18s} {'client CPU us/msg':>20s}  goal"]
    for label, rate, ratio, cpu, goal in ROWS:
        if rate in results:
            lines.append(f"{label:36s} {cell(results.get(rate), ',.0f'):>24s} "
                         f"{cell(results.get(ratio) if ratio else None, '.2f'):>18s} "
                         f"{cell(results.get(cpu) if cpu else None, '.1f'):>20s}  {goal}")
    if "B_single_vs_java" in results:  # ratios, not rates
        lines.append(f"{'  auto_batch=False / Java':36s} "
                     f"{cell(results['B_single_vs_java'], '.2f'):>24s} {'':>18s} "
                     f"{cell(results.get('B_single_cpu_vs_java'), '.2f'):>20s}  "
                     "issue #22: >= 0.8x (CPU: ours / Java)")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """CLI entry."""
    p = argparse.ArgumentParser(prog="client_bench")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--a", type=int, default=3000, help="A: sends per run (0 = skip)")
    p.add_argument("--b", type=int, default=20000, help="B: messages per run (0 = skip)")
    p.add_argument("--java", action="store_true",
                   help="B on the Java 4.9.8 client too (the reference's jars, javac): async "
                        "sends with the same 1,000 in flight, warmed alike")
    p.add_argument("--warmup", type=float, default=10.0,
                   help="with --java: untimed seconds of B for each client before it is timed")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be >= 1")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sys.stdout.write(format_table(run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
