"""Broker benchmark: `actormq bench` (or `python -m deploy.bench.broker_bench`).

A: one connection, one SEND_MESSAGE_V2 (1 KiB) in flight, vs a raw Python loopback echo of
   1 KiB frames measured in the same run (goal >= 0.4x).
B: send 100, wait for the 100 responses, repeat (goal >= 100,000 msgs/s), twice: with JSON
   headers (what Java, ali-ons and the C++ clients send) and with msgpack headers (serialize
   type 2, ours: what our own clients send).
C: pull 200,000 stored messages of 4 queues, 32 per pull, one pull in flight per queue,
   committing the consume offset on every pull as RocketMQ's push consumer does (goals: >= 0.8x
   the reference, >= 0.9x the same loop without the commit flag, its row below). [real cores]
D: 500 msgs/s round-robin over 4 queues, a long-polling consumer with one pull in flight per
   queue committing on each pull, end-to-end p50 <= 1 ms, p99 <= 5 ms. [real cores]
   (C and D: deploy/bench/consume_bench.py)
E, F: replication (no goal in an issue: reported; deploy/bench/ha_bench.py). [real cores]
--reference: the reference Apache RocketMQ 4.9.8 (deploy/reference.py) runs A, B (JSON), C and
D in the same invocation, each scenario of each run against both brokers back to back; the table
gives both, their per-run ratio and the reference's CPU (its launcher's process tree: both JVMs).
Warm-up: before its first timed run, each scenario's own workload runs untimed against each
broker in turn, repeated until --warmup seconds (default WARMUP_S) have passed, its figures
dropped: a cold JVM (or cold caches, files and topics on either side) would skew the ratio. The
table's last lines say how long each broker was warmed and with how many messages.
Broker CPU microseconds per message (CPU time of every thread of the broker's processes, from
/proc/<pid>/task/*/schedstat) for A-D. The table shows the median and min-max of --runs runs.
"""

from __future__ import annotations

import argparse
import logging
import math
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from typing import Any, Final

from actors.runtime.watch import AFFINITY_ENV
from deploy.bench.bench_table import cell
from deploy.bench.measure import cpu_by_role, cpu_us, one_round_trip, role_cpu_since
from deploy.bench.requests import BODY, send_request, sign_requests

log = logging.getLogger(__name__)

MSGPACK = 2  # protocol.codes.SerializeType.MSGPACK
TICK_US = 1_000_000 / os.sysconf("SC_CLK_TCK")
WARMUP_S: Final = 10.0  # default untimed warm-up of each scenario on each broker, seconds


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


RAW_ECHO_ROUND_TRIPS = 1000  # the raw echo's count when A is skipped (--a 0)


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


def bench_a(addr: tuple[str, int], n: int, pids: list[int]) -> tuple[float, float]:
    """One in flight: (msgs/s, broker CPU us/msg).

    Like the raw echo client, the requests are encoded before the clock starts; every
    response is still decoded and checked (code 0, matching opaque).
    """
    from protocol.framing import FrameDecoder

    reqs = [send_request("BenchA", i % 4) for i in range(n + 1)]
    frames = [r.encode() for r in reqs]
    sock = socket.create_connection(addr, timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    decoder = FrameDecoder()
    buf = memoryview(bytearray(1 << 16))
    try:
        def round_trip(i: int) -> None:
            r = one_round_trip(sock, decoder, buf, frames[i])
            if r.code != 0 or r.opaque != reqs[i].opaque:
                raise RuntimeError(f"send failed: {r.code} {r.remark}")

        round_trip(n)  # warm-up (topic creation)
        c0 = cpu_us(pids)
        t0 = time.perf_counter()
        for i in range(n):
            round_trip(i)
        dt = time.perf_counter() - t0
        return n / dt, (cpu_us(pids) - c0) / n
    finally:
        sock.close()


class BSender:
    """B's client on one connection: a round writes 100 SEND_MESSAGE_V2 at once (encoded
    before any clock starts, b_batches) and reads until every answer is decoded and matched
    by opaque (code 0), as a real client does. `actormq bench` and tests.bench.paired_b."""

    def __init__(self, addr: tuple[str, int]) -> None:
        from protocol.framing import FrameDecoder

        self.sock = socket.create_connection(addr, timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.buf = memoryview(bytearray(1 << 20))

    def close(self) -> None:
        self.sock.close()

    def round_trip(self, data: bytes, opaques: list[int]) -> None:
        from protocol.command import RemotingCommand

        decode = RemotingCommand.decode
        pending = set(opaques)
        self.sock.sendall(data)
        while pending:
            n = self.sock.recv_into(self.buf)
            if not n:
                raise ConnectionError("broker closed the connection")
            for frame in self.decoder.feed(self.buf[:n]):
                r = decode(frame)
                if r.code != 0 or r.opaque not in pending:
                    raise RuntimeError(f"send failed: {r.code} {r.remark} opaque={r.opaque}")
                pending.discard(r.opaque)


def b_batches(rounds: int, serialize_type: int = 0, topic: str = "BenchB"
              ) -> list[tuple[bytes, list[int]]]:  # fmt: skip
    """`rounds` rounds of B: each 100 sends round-robin over 4 queues, encoded and joined."""
    batches = []
    for _ in range(rounds):
        reqs = [send_request(topic, i % 4, serialize_type) for i in range(100)]
        batches.append((b"".join(r.encode() for r in reqs), [r.opaque for r in reqs]))
    return batches


def bench_b(addr: tuple[str, int], rounds: int, pids: list[int], serialize_type: int = 0,
            roles: dict[str, float] | None = None) -> tuple[float, float]:
    """100 in flight, repeated: (msgs/s, broker CPU us/msg); headers in `serialize_type`.

    `roles`, when given, receives the CPU us/msg of each actor role (see cpu_by_role).
    """
    batches = b_batches(rounds + 1, serialize_type)
    sender = BSender(addr)
    try:
        sender.round_trip(*batches[rounds])  # warm-up (topic creation)
        r0 = cpu_by_role(pids)
        c0 = cpu_us(pids)
        t0 = time.perf_counter()
        for data, opaques in batches[:rounds]:
            sender.round_trip(data, opaques)
        dt = time.perf_counter() - t0
        n = rounds * 100
        cpu = (cpu_us(pids) - c0) / n
        if roles is not None:
            roles.update(role_cpu_since(pids, r0, n))
        return n / dt, cpu
    finally:
        sender.close()


def run_bound(args: argparse.Namespace, store_props: dict[str, str] | None = None
              ) -> dict[str, list[float]]:  # fmt: skip
    """A and B against deploy.bench.send_bound's one-process server, --runs times (its store
    built from `store_props`, StoreConfig property names, when given)."""
    from deploy.bench.send_bound import inline_server

    results: dict[str, list[float]] = {}

    def add(key: str, val: float) -> None:
        results.setdefault(key, []).append(val)

    with inline_server(("BenchA", "BenchB"), store_props) as (addr, pids):
        for _ in range(args.runs):
            raw = raw_echo_rate(args.a or RAW_ECHO_ROUND_TRIPS)
            add("raw", raw)
            if args.a:
                rate, cpu = bench_a(addr, args.a, pids)
                add("A", rate)
                add("A_ratio", rate / raw)
                add("A_cpu", cpu)
            if args.b:
                for key, st in (("B", 0), ("Bm", MSGPACK)):
                    roles: dict[str, float] = {}
                    rate, cpu = bench_b(addr, args.b, pids, st, roles=roles)
                    add(key, rate)
                    add(f"{key}_cpu", cpu)
                    for role, us in roles.items():
                        add(f"{key}_cpu:{role}", us)
    return results


SCENARIOS = ("A", "B", "C", "D")


def run_scenario(name: str, addr: tuple[str, int], pids: list[int], run: int,
                 args: argparse.Namespace, add: Any, *, prefix: str = "",
                 msgpack: bool = True, tag: str | None = None) -> int:  # fmt: skip
    """One run of scenario A, B, C or D against one broker; results under `prefix` + key.
    C's groups and D's topic and group are named after `tag` (default: the run). Returns the
    messages it moved (sent, or pulled), 0 when the scenario is skipped (its count is 0)."""
    from deploy.bench.consume_bench import QUEUES, bench_c, bench_d

    tag = str(run) if tag is None else tag
    moved = 0
    if name == "A" and args.a:
        rate, cpu = bench_a(addr, args.a, pids)
        add(prefix + "A", rate)
        add(prefix + "A_cpu", cpu)
        moved += args.a + 1  # and its topic-creating round trip
    elif name == "B" and args.b:
        for key, st in (("B", 0), ("Bm", MSGPACK)) if msgpack else (("B", 0),):
            roles: dict[str, float] = {}
            rate, cpu = bench_b(addr, args.b, pids, st, roles=roles)
            add(prefix + key, rate)
            add(prefix + f"{key}_cpu", cpu)
            if not prefix:
                for role, us in roles.items():
                    add(f"{key}_cpu:{role}", us)
            moved += (args.b + 1) * 100
    elif name == "C" and args.c:
        per_queue = max(1, args.c // QUEUES)
        modes = [("C", True), ("C0", False)]
        for key, commit in modes if run % 2 == 0 else modes[::-1]:  # neither always first
            roles = {}
            rate, cpu = bench_c(addr, "BenchC", f"bench_{key}_{tag}", per_queue, pids,
                                commit=commit, roles=roles)  # fmt: skip
            add(prefix + key, rate)
            add(prefix + f"{key}_cpu", cpu)
            if not prefix:
                for role, us in roles.items():
                    add(f"{key}_cpu:{role}", us)
            moved += per_queue * QUEUES  # bench_c returns once every queue reached per_queue
    elif name == "D" and args.d:
        p50, p99, cpu = bench_d(addr, args.d, pids, tag)
        add(prefix + "D_p50", p50)
        add(prefix + "D_p99", p99)
        add(prefix + "D_cpu", cpu)
        moved += args.d  # bench_d raises unless all arrived
    return moved


def warm_up(name: str, addr: tuple[str, int], pids: list[int], args: argparse.Namespace,
            seconds: float, *, msgpack: bool) -> tuple[float, int]:  # fmt: skip
    """Scenario `name`'s workload against one broker, untimed, run again and again until
    `seconds` have passed (at least once), its figures dropped: (seconds spent, messages
    moved); (0, 0) when the scenario is skipped."""
    t0 = time.monotonic()
    moved = 0
    k = 0
    while True:
        got = run_scenario(name, addr, pids, k, args, lambda _key, _val: None,
                           msgpack=msgpack, tag=f"warm{k}")  # fmt: skip
        if not got:
            return 0.0, 0
        moved += got
        k += 1
        spent = time.monotonic() - t0
        if spent >= seconds:
            return spent, moved


def run(args: argparse.Namespace, broker: str | None = None) -> dict[str, list[float]]:
    """Start a cluster like `actormq up` (and, with --reference, the reference RocketMQ 4.9.8
    on its own ports), run the scenarios --runs times against each in turn, stop them.

    broker: the broker's controller actor class (launch.start_broker's actor_class); another
    than the real one (a runtime test's stand-in) runs A and B only."""
    from actors.broker.config import BrokerConfig
    from deploy import launch, procinfo
    from deploy.bench.consume_bench import QUEUES, preload
    from deploy.bench.ha_bench import bench_e, bench_f, raw_copy_rate, start_sync_pair
    from deploy.launch import cluster_pids
    from store.config import StoreConfig

    real = broker is None or broker == launch.BROKER_CONTROLLER
    results: dict[str, list[float]] = {}

    def add(key: str, val: float) -> None:
        results.setdefault(key, []).append(val)

    if args.affinity:  # inherited by the actor system's processes (see actors.runtime.watch)
        os.environ[AFFINITY_ENV] = args.affinity
    with tempfile.TemporaryDirectory(prefix="amq-bench-") as data:
        data = os.environ.get("AMQ_BENCH_DATA", data)  # keep the logs: an existing dir
        ref: Any = None
        acl_home = os.path.join(data, "aclhome")
        sign_requests(None)
        if args.acl:  # both brokers check every request against the same one account
            from deploy.bench.requests import BENCH_CREDENTIALS, BENCH_PLAIN_ACL

            for home in (acl_home, os.path.join(data, "reference", "rocketmq_home")):
                os.makedirs(os.path.join(home, "conf"), exist_ok=True)
                with open(os.path.join(home, "conf", "plain_acl.yml"), "w") as f:
                    f.write(BENCH_PLAIN_ACL)
            sign_requests(BENCH_CREDENTIALS)
        if args.reference:  # the JVMs start while actormq does; every spawn from this thread
            from deploy import reference

            extra = {"aclEnable": "true"} if args.acl else None
            ref = reference.reference_cluster(os.path.join(data, "reference"), extra).launch()
        try:
            cluster = launch.start_system(data, log_level="WARNING")
        except BaseException:
            if ref is not None:
                ref.stop()
            raise
        try:
            ha_port = launch.stable_free_port()
            props = {"listenPort": "0", "storePathRootDir": os.path.join(data, "store"),
                     "haListenPort": str(ha_port)}
            if args.acl:
                props.update(aclEnable="true", rocketmqHome=acl_home)  # fmt: skip
            bc = BrokerConfig.from_properties(props)
            sc = StoreConfig.from_properties(props)
            port = launch.start_broker(cluster, bc, sc,
                                       actor_class=broker or launch.BROKER_CONTROLLER)
            addr = ("127.0.0.1", port)
            pids = [p for p in cluster_pids(cluster) if p != os.getpid()]
            targets: list[tuple[str, tuple[str, int], list[int]]] = [("", addr, pids)]
            if ref is not None:
                ref.wait_ready()
                ref_pids = procinfo.pids_in_session(ref.pid())  # the launcher and both JVMs
                targets.append(("ref:", ("127.0.0.1", ref.broker_port), ref_pids))
            if real and args.c:  # C's stored messages (not timed)
                for _prefix, t_addr, _pids in targets:
                    preload(t_addr, "BenchC", max(1, args.c // QUEUES) * QUEUES)
            for i in range(args.runs):
                raw = raw_echo_rate(args.a or RAW_ECHO_ROUND_TRIPS)
                add("raw", raw)
                # scenario by scenario, the brokers back to back (in turn first): a ratio
                # compares runs seconds apart, not a whole round apart, on a host whose speed
                # drifts
                for name in SCENARIOS if real else ("A", "B"):
                    if i == 0:  # untimed, both brokers alike, before the scenario's first run
                        for prefix, t_addr, t_pids in targets:
                            spent, moved = warm_up(name, t_addr, t_pids, args, args.warmup,
                                                   msgpack=not prefix)  # fmt: skip
                            if moved:
                                add(f"{prefix}warmup:{name}:s", spent)
                                add(f"{prefix}warmup:{name}:msgs", float(moved))
                    for prefix, t_addr, t_pids in targets if i % 2 == 0 else targets[::-1]:
                        run_scenario(name, t_addr, t_pids, i, args, add, prefix=prefix,
                                     msgpack=not prefix)  # fmt: skip
                if args.a:
                    add("A_ratio", results["A"][-1] / raw)
            if real and args.f:
                f_addr, _root = start_sync_pair(cluster, data)
                f_pids = [p for p in cluster_pids(cluster) if p != os.getpid()]
                for _ in range(args.runs):
                    rate, p50, p99, cpu = bench_f(f_addr, args.f, f_pids)
                    add("F", rate)
                    add("F_p50", p50)
                    add("F_p99", p99)
                    add("F_cpu", cpu)
            if real and args.e:
                add("E_raw", raw_copy_rate())
                timed = bench_e(cluster, data, ha_port, props["storePathRootDir"])
                if timed is not None:  # else caught up before the first look: no figure
                    rate, size = timed
                    add("E", rate)
                    add("E_ratio", rate / results["E_raw"][-1])
                    add("E_bytes", float(size))
        finally:
            try:
                if ref is not None:  # also when actormq failed to start
                    ref.stop()
            finally:
                launch.stop_cluster(cluster)
    return results


# scenario, rate (or latency) key, its format, CPU key, goal
ROWS = (
    ("raw echo (1 KiB, 1 in flight)", "raw", ",.0f", None, "baseline, round trips/s"),
    ("A send, 1 in flight", "A", ",.0f", "A_cpu", ""),
    ("  A / raw echo", "A_ratio", ".2f", None, ">= 0.4x raw echo"),
    ("B send, 100 in flight, JSON", "B", ",.0f", "B_cpu", ">= 100,000 msgs/s"),
    ("B same, msgpack header", "Bm", ",.0f", "Bm_cpu", ">= 100,000 msgs/s"),
    ("C pull 32, commit on every pull", "C", ",.0f", "C_cpu",
     ">= 0.8x ref, CPU <= 2x ref's, >= 150,000 msgs/s"),
    ("C same, no commit flag", "C0", ",.0f", "C0_cpu", ""),
    ("  C commit / no commit", "C/C0", ".2f", None, ">= 0.9x"),
    ("D long-poll + commit, p50 ms", "D_p50", ".2f", "D_cpu", "<= 1 ms (CPU: per message)"),
    ("D same, p99 ms", "D_p99", ".2f", None, "<= 5 ms"),
)


def _ratios(num: list[float] | None, den: list[float] | None) -> list[float] | None:
    """Per-run ratios (the runs of both brokers alternate: run i against run i)."""
    if not num or not den:
        return None
    return [a / b for a, b in zip(num, den, strict=False) if b]


def format_table(results: dict[str, list[float]]) -> str:
    """Per scenario: median (min-max) over the runs for actormq and, when measured, for the
    reference broker, their per-run ratio, and broker CPU us/msg of both."""
    runs = max((len(v) for v in results.values()), default=0)
    with_ref = any(k.startswith("ref:") for k in results)
    results = dict(results)
    if "C" in results and "C0" in results:
        results["C/C0"] = _ratios(results["C"], results["C0"]) or []
    head = f"broker benchmark, {runs} run(s); median (min-max)"
    if with_ref:
        head += ("; reference = Apache RocketMQ 4.9.8 in the same invocation, its CPU the "
                 "launcher's whole process tree (both JVMs)")
    lines = [head, f"{'scenario':32s} {'actormq':>26s} {'reference':>26s} {'actormq/ref':>18s} "
                   f"{'CPU us/msg':>20s} {'CPU us/msg ref':>20s}  goal"]
    for name, key, fmt, cpu, goal in ROWS:
        if key not in results:
            continue
        ref_key = "ref:" + key
        ratio = _ratios(results.get(key), results.get(ref_key))
        if key.endswith(("_p50", "_p99")):
            ratio = None  # a latency: both shown, no ratio
        lines.append(
            f"{name:32s} {cell(results.get(key), fmt):>26s} "
            f"{cell(results.get(ref_key), fmt):>26s} {cell(ratio, '.2f'):>18s} "
            f"{cell(results.get(cpu) if cpu else None, ',.1f'):>20s} "
            f"{cell(results.get('ref:' + cpu) if cpu else None, ',.1f'):>20s}  {goal}")
    if "C_cpu" in results and "ref:C_cpu" in results:
        cpu_ratio = _ratios(results["C_cpu"], results["ref:C_cpu"])
        lines.append(f"{'  C CPU us/msg actormq / ref':32s} {cell(cpu_ratio, '.2f'):>26s}"
                     f"{'':>107s}  <= 2x")
    for key, label in (("B_cpu:", "B JSON"), ("Bm_cpu:", "B msgpack"), ("C_cpu:", "C commit")):
        parts = sorted(
            ((k[len(key):], statistics.median(v)) for k, v in results.items()
             if k.startswith(key)),
            key=lambda kv: -kv[1],
        )
        busy = [f"{role} {us:.1f}" for role, us in parts if us >= 0.05]
        if busy:
            lines.append(f"{label + ' CPU us/msg by process':32s} " + ", ".join(busy))
    if "E" in results:
        mbs = cell([v / 1e6 for v in results["E"]], ".1f")
        lines.append(f"{'E slave catch-up, MB/s':32s} {mbs:>26s} "
                     f"{cell(results['E_ratio'], '.2f'):>18s}  x raw TCP copy "
                     f"({statistics.median(results['E_raw']) / 1e6:.0f} MB/s), "
                     f"{statistics.median(results['E_bytes']) / 1e6:.0f} MB timed")
    if "F" in results:
        lines.append(
            f"{'F SYNC_MASTER, 1 WAIT in flight':32s} {cell(results['F'], ',.0f'):>26s} "
            f"{'-':>18s} {cell(results['F_cpu'], '.1f'):>18s}  (reported; all processes)"
        )
        lines.append(
            f"{'F send latency with a slave, ms':32s} p50 {cell(results['F_p50'], '.2f')}"
            f"  p99 {cell(results['F_p99'], '.2f')}"
        )
    lines += warmup_lines(results)
    return "\n".join(lines) + "\n"


def warmup_lines(results: dict[str, list[float]]) -> list[str]:
    """What the untimed warm-up did: per scenario, each broker's seconds and messages."""
    lines = []
    for name in SCENARIOS:
        parts = []
        for prefix, label in (("", "actormq"), ("ref:", "reference")):
            secs = results.get(f"{prefix}warmup:{name}:s")
            msgs = results.get(f"{prefix}warmup:{name}:msgs")
            if secs and msgs:
                parts.append(f"{label} {secs[0]:.1f} s, {msgs[0]:,.0f} msgs")
        if parts:
            lines.append(f"{'warm-up ' + name + ' (untimed)':32s} " + "; ".join(parts))
    return lines


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's options (`actormq bench ...`)."""
    p = argparse.ArgumentParser(prog="broker_bench")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--a", type=int, default=2000, help="A: requests (0 = skip)")
    p.add_argument("--b", type=int, default=100, help="B: rounds of 100 (0 = skip)")
    p.add_argument("--c", type=int, default=200_000,
                   help="C: messages to pull, over 4 queues (0 = skip)")
    p.add_argument("--d", type=int, default=2500, help="D: messages at 500/s (0 = skip)")
    p.add_argument("--e", type=int, default=1, help="E: replication catch-up (0 = skip)")
    p.add_argument("--f", type=int, default=1000,
                   help="F: WAIT sends to a SYNC_MASTER with one slave (0 = skip)")
    p.add_argument("--reference", action="store_true",
                   help="also start the reference Apache RocketMQ 4.9.8 (deploy/reference.py) on "
                        "its own ports and run A-D against it in the same invocation, each "
                        "scenario against both brokers back to back; the table gives actormq / "
                        "reference ratios")
    p.add_argument("--warmup", type=float, default=WARMUP_S, metavar="SECONDS",
                   help="untimed warm-up: before its first timed run, each scenario's workload "
                        "runs against each broker (actormq, and the reference with --reference) "
                        f"until SECONDS have passed, at least once (default {WARMUP_S:g}; "
                        "not with --bound)")
    p.add_argument("--acl", nargs="?", const="on", default="off", choices=("on", "off", "both"),
                   help="on: both brokers with aclEnable=true (one admin account) and every "
                        "benchmark request signed, as AclClientRPCHook signs (A-D); both: the "
                        "whole benchmark without ACL, then with it, in this one invocation, "
                        "and what ACL costs each broker")
    p.add_argument("--affinity", default=None,
                   help='pin actors to CPUs, e.g. "RemotingServer:0,send:1" (actor group or class)')
    p.add_argument("--bound", action="store_true",
                   help="A and B against one process running the send core inline, no actors "
                        "(deploy.bench.send_bound): the ceiling of any layout of this send path")
    return p


def main(argv: list[str] | None = None) -> int:
    """CLI entry."""
    p = build_parser()
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be >= 1")
    if args.bound and args.reference:
        p.error("--bound and --reference do not go together")
    if args.bound and args.acl != "off":
        p.error("--bound has no ACL check: --acl goes with the real broker")
    if not math.isfinite(args.warmup) or args.warmup < 0:
        p.error(f"--warmup must be a number of seconds >= 0, got {args.warmup}")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.bound:
        sys.stdout.write(format_table(run_bound(args)))
        return 0
    by_mode: dict[bool, dict[str, list[float]]] = {}
    for acl in {"off": (False,), "on": (True,), "both": (False, True)}[args.acl]:
        by_mode[acl] = results = run(argparse.Namespace(**dict(vars(args), acl=acl)))
        if args.acl == "both":
            sys.stdout.write(f"\n== ACL {'on' if acl else 'off'} ==\n")
        sys.stdout.write(format_table(results))
        sys.stdout.flush()
    if len(by_mode) == 2:
        sys.stdout.write(acl_cost_table(by_mode[False], by_mode[True]))
    return 0


def acl_cost_table(off: dict[str, list[float]], on: dict[str, list[float]]) -> str:
    """Per scenario: each broker's rate with ACL on / off (medians) and the two side by side
    (issue #23's goal: ACL costs actormq no more, relatively, than it costs the reference)."""
    lines = ["", f"{'ACL on / off (median rates)':32s} {'actormq':>10s} {'reference':>10s}  "
                 "actormq's / the reference's"]  # fmt: skip
    for name, key in (("A", "A"), ("B", "B"), ("B msgpack (ours only)", "Bm"), ("C", "C")):
        mine = _median_ratio(on.get(key), off.get(key))
        ref = _median_ratio(on.get("ref:" + key), off.get("ref:" + key))
        if mine is None:
            continue
        ref_text = f"{ref:.2f}" if ref else "-"
        both = f"{mine / ref:.2f}  (>= 1.0: ACL costs actormq no more)" if ref else "-"
        lines.append(f"{name:32s} {mine:>10.2f} {ref_text:>10s}  {both}")
    return "\n".join(lines) + "\n"


def _median_ratio(num: list[float] | None, den: list[float] | None) -> float | None:
    if not num or not den or not statistics.median(den):
        return None
    return statistics.median(num) / statistics.median(den)


if __name__ == "__main__":
    sys.exit(main())
