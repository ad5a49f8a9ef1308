"""Consumer benchmark: `python -m deploy.bench.consumer_bench` or `actormq bench --consumer`.

Against one cluster started like `actormq up` (name server + real broker), each run measures,
in the same run:

C  200,000 stored 1 KiB messages on 8 queues: the raw wire pull loop (one PULL_MESSAGE of 32 in
   flight, the queues in turn, each pull committing the offset reached: what a hand-written
   client does, with nothing decoded) vs a PushConsumer with a no-op handler
   (consumeMessageBatchMaxSize 1: one handler call per message), concurrently and orderly
   (goal: concurrently >= 0.7x raw). The consumer's rate is taken from its first message to its
   last; the raw loop's from its first pull.
D  a Producer in another process sends 500 msgs/s; a PushConsumer's handler takes the latency
   from the send (a wall-clock stamp in the body) to the handler (goal p50 <= 2 ms, p99 <= 10).
E  a 1,000,000-message backlog (128 B bodies) and a PushConsumer whose handler sleeps: the
   resident memory of the user's process and of every client actor process once the cache
   is full (flow control holds it), after 5 s of consuming.

Client CPU microseconds per message (C): this process (every thread) plus its client actor
system's processes, over the scenario. The table shows median (min-max) of --runs runs; the
machine's other load moves every figure: compare the ratios, taken within one run.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import struct
import sys
import tempfile
import threading
import time
from typing import Any

from deploy.bench.bench_table import cell
from deploy.bench.measure import paced

log = logging.getLogger(__name__)

BODY = b"x" * 1024
QUEUES = 8


def client_cpu_us() -> float:
    """CPU time of this process and of its client actor system, in microseconds."""
    from deploy.bench.client_bench import client_cpu_us as cpu

    return cpu()


def client_pids() -> list[int]:
    """The client actor system's processes."""
    from actors.client.client_runtime import ClientRuntime, _pids_in_group

    rt = ClientRuntime._instance
    if rt is None:
        return []
    return sorted({p for g in rt._pgids for p in _pids_in_group(g)} - {os.getpid()})


def rss_mib(pid: int) -> float:
    """Resident set size of a process in MiB (/proc/<pid>/status VmRSS)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def create_topic(addr: tuple[str, int], topic: str, queues: int = QUEUES) -> None:
    """UPDATE_AND_CREATE_TOPIC at the broker."""
    from deploy.bench.requests import create_topic_cmd
    from deploy.wire import BlockingClient

    with BlockingClient(addr) as c:
        r = c.invoke(create_topic_cmd(topic, queues), 10)
        if r.code != 0:
            raise RuntimeError(f"create {topic}: {r.code} {r.remark}")


def preload(ns: str, topic: str, n: int, body: bytes) -> None:
    """n messages, spread over the topic's queues, in batches of 100 (not timed)."""
    from actors.client import Message, Producer

    with Producer("bench_preload_pg", namesrv=ns) as p:
        queues = sorted(p.publish_queues(topic))
        sent = 0
        while sent < n:
            k = min(100, n - sent)
            q = queues[(sent // 100) % len(queues)]
            r = p.send_batch([Message(topic, body) for _ in range(k)], queue=q)
            if r.status != "SEND_OK":
                raise RuntimeError(f"preload failed: {r}")
            sent += k


def raw_pull_loop(addr: tuple[str, int], topic: str, total: int) -> float:
    """The raw wire client: pull every queue in turn, 32 per pull, committing: msgs/s."""
    from deploy.bench.consume_bench import heartbeat_request
    from deploy.bench.requests import pull_cmd
    from deploy.wire import BlockingClient

    group = f"bench_raw_cg_{time.monotonic_ns()}"
    with BlockingClient(addr) as c:
        r = c.invoke(heartbeat_request(f"bench@{os.getpid()}", group, topic), 10)
        if r.code != 0:
            raise RuntimeError(f"heartbeat: {r.code}")
        offsets = [0] * QUEUES
        done = [False] * QUEUES
        got = 0
        t0 = time.perf_counter()
        while got < total and not all(done):
            for q in range(QUEUES):
                if done[q]:
                    continue
                r = c.invoke(pull_cmd(group, topic, q, offsets[q], max_nums=32, sys_flag=4 | 1,
                                      commit_offset=offsets[q]), 30)  # fmt: skip
                if r.code != 0:
                    done[q] = True
                    continue
                nxt = int((r.ext_fields or {})["nextBeginOffset"])
                got += nxt - offsets[q]
                offsets[q] = nxt
        dt = time.perf_counter() - t0
    return got / dt


def push_consume(ns: str, topic: str, total: int, orderly: bool) -> tuple[float, float]:
    """A PushConsumer with a no-op handler over the backlog: (msgs/s, client CPU us/msg)."""
    from actors.client.consumer import ConsumeResult, PushConsumer

    first: list[float] = []
    lock = threading.Lock()

    def handle(msgs: Any) -> ConsumeResult:
        if not first:
            with lock:
                if not first:
                    first.append(time.perf_counter())
        return ConsumeResult.SUCCESS

    group = f"bench_push_cg_{'o' if orderly else 'c'}_{time.monotonic_ns()}"
    c = PushConsumer(group, namesrv=ns, handler=handle, orderly=orderly, consume_from="first")
    with c:
        c.subscribe(topic)
        c0 = client_cpu_us()
        deadline = time.monotonic() + 300
        assert c._impl is not None  # started by `with`
        stats = c._impl.stats
        while stats.totals().ok < total and time.monotonic() < deadline:
            time.sleep(0.002)
        end = time.perf_counter()
        done = stats.totals().ok
        cpu = (client_cpu_us() - c0) / max(done, 1)
    if done < total:
        raise RuntimeError(f"C: only {done} of {total} consumed")
    return done / (end - first[0]), cpu


def _d_sender(ns: str, topic: str, n: int, rate: float, warm_s: float = 0.0) -> None:
    """Child process: a Producer sends n messages at `rate`/s, each body a time_ns stamp,
    after warm_s seconds of 9-byte warm-up bodies at the same rate (not counted)."""
    from actors.client import Message, Producer

    with Producer("bench_d_pg", namesrv=ns) as p:
        p.send(Message(topic, struct.pack(">q", time.time_ns()) + b"w"))  # warm-up (dropped)
        warm = int(warm_s * rate)

        def send_warm(_i: int) -> None:
            p.send(Message(topic, b"w" * 9))

        if warm:
            paced(warm, rate, send_warm)

        def send(_i: int) -> None:
            p.send(Message(topic, struct.pack(">q", time.time_ns()) + BODY[8:]))

        paced(n, rate, send)


def latency(ns: str, topic: str, n: int, rate: float = 500.0, warm_s: float = 0.0
            ) -> tuple[float, float]:  # fmt: skip
    """D: Producer -> PushConsumer at `rate`/s (after warm_s s of the same, untimed):
    (p50 ms, p99 ms)."""
    from actors.client.consumer import ConsumeResult, PushConsumer

    lat: list[int] = []

    def handle(msgs: Any) -> ConsumeResult:
        now = time.time_ns()
        for m in msgs:
            if len(m.body) > 9:
                lat.append(now - struct.unpack_from(">q", m.body, 0)[0])
        return ConsumeResult.SUCCESS

    ctx = multiprocessing.get_context("spawn")  # no fork of a process running a client
    with PushConsumer(f"bench_d_cg_{time.monotonic_ns()}", namesrv=ns, handler=handle) as c:
        c.subscribe(topic)
        deadline = time.monotonic() + 30
        while len(c.assignment()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the first long polls are parked at the broker
        proc = ctx.Process(target=_d_sender, args=(ns, topic, n, rate, warm_s), daemon=True)
        proc.start()
        try:
            deadline = time.monotonic() + warm_s + n / rate + 60
            while len(lat) < n and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
    if len(lat) < n:
        raise RuntimeError(f"D: {len(lat)} of {n} received")
    lat.sort()
    return lat[len(lat) // 2] / 1e6, lat[min(len(lat) - 1, int(len(lat) * 0.99))] / 1e6


def java_latency(ns: str, topic: str, n: int, rate: float, warm_s: float) -> tuple[float, float]:
    """D on the Java 4.9.8 client, the same sender: (p50 ms, p99 ms)."""
    from deploy.bench import java_client

    ctx = multiprocessing.get_context("spawn")

    def start() -> Any:
        proc = ctx.Process(target=_d_sender, args=(ns, topic, n, rate, warm_s), daemon=True)
        proc.start()
        return proc

    def wait(proc: Any) -> None:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
            proc.join(5)

    return java_client.latency(ns, topic, n, start, wait)


def warm_push(ns: str, topic: str, total: int, warm_s: float) -> int:
    """Our PushConsumer over the backlog, untimed, until warm_s seconds have gone (at least
    once), as the Java side warms in its JVM: the passes run."""
    end = time.monotonic() + warm_s
    passes = 0
    while passes == 0 or time.monotonic() < end:
        push_consume(ns, topic, total, False)
        passes += 1
    return passes


def memory(ns: str, topic: str) -> dict[str, float]:
    """E: RSS (MiB) of this process and each client actor process, a slow consumer on the
    backlog after 5 s (cache full, flow control holding it)."""
    from actors.client.consumer import ConsumeResult, PushConsumer

    def slow(msgs: Any) -> ConsumeResult:
        time.sleep(0.001)
        return ConsumeResult.SUCCESS

    out: dict[str, float] = {}
    with PushConsumer(f"bench_e_cg_{time.monotonic_ns()}", namesrv=ns, handler=slow,
                      consume_from="first") as c:
        c.subscribe(topic)
        time.sleep(5.0)
        st = c.stats()
        out["cached_msgs"] = float(st["cached_msgs"])
        out["user"] = rss_mib(os.getpid())
        for i, pid in enumerate(p for p in client_pids() if rss_mib(p) > 0):
            out[f"actor{i}"] = rss_mib(pid)
    return out


def run(args: argparse.Namespace) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Start a cluster like `actormq up`, run the scenarios --runs times, stop it."""
    from actors.broker.config import BrokerConfig
    from deploy import launch
    from store.config import StoreConfig

    results: dict[str, list[float]] = {}
    mem: dict[str, float] = {}

    def add(key: str, val: float) -> None:
        results.setdefault(key, []).append(val)

    with tempfile.TemporaryDirectory(prefix="amq-consbench-") as data:
        cluster = launch.start_system(data, log_level="WARNING")
        try:
            ns_port = launch.start_namesrv(cluster, port=0)
            props = {"listenPort": "0", "storePathRootDir": os.path.join(data, "store"),
                     "namesrvAddr": f"127.0.0.1:{ns_port}"}
            port = launch.start_broker(cluster, BrokerConfig.from_properties(props),
                                       StoreConfig.from_properties(props))
            addr = ("127.0.0.1", port)
            ns = f"127.0.0.1:{ns_port}"
            if args.c:
                create_topic(addr, "BenchConsumeC")
                preload(ns, "BenchConsumeC", args.c, BODY)
                if args.java:
                    add("C_warm_passes", warm_push(ns, "BenchConsumeC", args.c, args.warmup))
            for run in range(args.runs):
                if args.c:
                    raw = raw_pull_loop(addr, "BenchConsumeC", args.c)
                    add("C_raw", raw)
                    rate, cpu = push_consume(ns, "BenchConsumeC", args.c, False)
                    add("C", rate)
                    add("C_ratio", rate / raw)
                    add("C_cpu", cpu)
                    if args.java:
                        from deploy.bench import java_client

                        jrate, jcpu = java_client.consume(ns, "BenchConsumeC", args.c,
                                                          args.warmup)  # fmt: skip
                        add("C_java", jrate)
                        add("C_java_cpu", jcpu)
                        add("C_vs_java", rate / jrate)
                        add("C_cpu_vs_java", cpu / jcpu)
                    rate, cpu = push_consume(ns, "BenchConsumeC", args.c, True)
                    add("C_orderly", rate)
                    add("C_orderly_ratio", rate / raw)
                    add("C_orderly_cpu", cpu)
                if args.d:  # a topic per run: a new group starts at offset 0 of a queue whose
                    # messages are all in memory (the broker's QUERY_CONSUMER_OFFSET rule), so an
                    # earlier run's messages would be counted
                    create_topic(addr, f"BenchConsumeD{run}", 4)
                    warm = args.warmup if args.java else 0.0
                    p50, p99 = latency(ns, f"BenchConsumeD{run}", args.d, warm_s=warm)
                    add("D_p50", p50)
                    add("D_p99", p99)
                    if args.java:
                        create_topic(addr, f"BenchConsumeDJ{run}", 4)
                        jp50, jp99 = java_latency(ns, f"BenchConsumeDJ{run}", args.d, 500.0,
                                                  warm)  # fmt: skip
                        add("D_java_p50", jp50)
                        add("D_java_p99", jp99)
                        add("D_p50_vs_java", p50 / jp50)
            if args.e:
                create_topic(addr, "BenchConsumeE")
                preload(ns, "BenchConsumeE", args.e, b"y" * 128)
                mem = memory(ns, "BenchConsumeE")
        finally:
            launch.stop_cluster(cluster)
    return results, mem


def format_table(results: dict[str, list[float]], mem: dict[str, float]) -> str:
    """Per scenario: median (min-max) over the runs."""
    runs = max((len(v) for v in results.values()), default=0)
    lines = [f"consumer benchmark, {runs} run(s); median (min-max)",
             f"{'scenario':40s} {'msgs/s':>24s} {'x raw':>18s} {'client CPU us/msg':>20s}  goal"]
    rows = (("C raw wire pull loop (commit per pull)", "C_raw", None, None, "baseline"),
            ("C PushConsumer, no-op handler", "C", "C_ratio", "C_cpu", ">= 0.7x raw C"),
            ("C PushConsumer orderly, no-op handler", "C_orderly", "C_orderly_ratio",
             "C_orderly_cpu", "(reported)"))
    for label, rate, ratio, cpu, goal in rows:
        if rate in results:
            lines.append(f"{label:40s} {cell(results.get(rate), ',.0f'):>24s} "
                         f"{cell(results.get(ratio) if ratio else None, '.2f'):>18s} "
                         f"{cell(results.get(cpu) if cpu else None, '.1f'):>20s}  {goal}")
    if "C_java" in results:
        lines.append(f"{'C Java 4.9.8 DefaultMQPushConsumer':40s} "
                     f"{cell(results['C_java'], ',.0f'):>24s} {'':>18s} "
                     f"{cell(results['C_java_cpu'], '.1f'):>20s}  (same backlog, warmed)")
        lines.append(f"{'C ours / Java (msgs/s; CPU us/msg)':40s} "
                     f"{cell(results['C_vs_java'], '.2f'):>24s} {'':>18s} "
                     f"{cell(results['C_cpu_vs_java'], '.2f'):>20s}  issue #22: >= 1.0x")
    if "D_p50" in results:
        lines.append(f"{'D Producer -> PushConsumer, 500 msgs/s':40s} p50 "
                     f"{cell(results['D_p50'], '.2f')} ms, p99 {cell(results['D_p99'], '.2f')}"
                     f" ms  goal p50 <= 2, p99 <= 10")
    if "D_java_p50" in results:
        lines.append(f"{'D the same into the Java 4.9.8 consumer':40s} p50 "
                     f"{cell(results['D_java_p50'], '.2f')} ms, p99 "
                     f"{cell(results['D_java_p99'], '.2f')} ms; ours / Java p50 "
                     f"{cell(results['D_p50_vs_java'], '.2f')}  issue #22: p50 <= Java's")
    if "C_warm_passes" in results:
        lines.append(f"warm-up (untimed): our PushConsumer {results['C_warm_passes'][0]:.0f} "
                     f"passes over the backlog; D {'' if 'D_java_p50' in results else 'no '}"
                     f"warm-up stream before each D")
    if mem:
        procs = ", ".join(f"{k} {v:.0f}" for k, v in mem.items() if k not in ("cached_msgs",))
        lines.append(f"E 1M backlog, slow consumer ({mem.get('cached_msgs', 0):.0f} cached): "
                     f"RSS MiB: {procs}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """CLI entry."""
    p = argparse.ArgumentParser(prog="consumer_bench")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--c", type=int, default=200_000, help="C: stored messages (0 = skip)")
    p.add_argument("--d", type=int, default=2500, help="D: messages at 500/s (0 = skip)")
    p.add_argument("--e", type=int, default=1_000_000, help="E: backlog (0 = skip)")
    p.add_argument("--java", action="store_true",
                   help="C and D on the Java 4.9.8 client too (the reference's jars, javac), "
                        "both sides warmed alike for --warmup seconds")
    p.add_argument("--warmup", type=float, default=10.0,
                   help="with --java: untimed seconds of each workload before it is timed")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be >= 1")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.java:
        from deploy.bench import java_client
        from deploy.reference import ReferenceUnavailable

        try:
            java_client.compiled()
        except (ReferenceUnavailable, java_client.JavaBenchError, OSError) as exc:
            p.exit(2, f"consumer_bench: --java needs the reference client jars and javac: {exc}\n")
    sys.stdout.write(format_table(*run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
