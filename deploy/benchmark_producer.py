"""`actormq producer`: a producer load generator that prints TPS and RT every second.

Mirrors example/benchmark/Producer.java, RocketMQ 4.9.x: N threads send messages of a given
size to a topic (BenchmarkTest by default), with optional keys and tags, and every second one
line reports the send TPS, the max and average RT and the failures; the totals are printed at
the end (after --seconds / --count, or on Ctrl-C / SIGTERM). Built on actors.client.Producer,
so it measures what a Python application gets: sync sends (--mode sync, the Java tool's),
async sends with a bounded in-flight budget, oneway sends, or batches.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from deploy.admin_ext import Usage
from deploy.admin_message import parse_properties
from deploy.benchmark_common import (
    EXIT_USAGE,
    add_stop_options,
    benchmark_parser,
    namesrv_problems,
    start_reporter,
    stop_on_signals,
)


@dataclass
class Stats:
    """Counters shared by the sending threads (guarded by lock)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    ok: int = 0
    failed: int = 0
    rt_sum_ms: float = 0.0
    rt_max_ms: float = 0.0
    total_ok: int = 0
    total_failed: int = 0
    total_rt_ms: float = 0.0
    total_max_ms: float = 0.0

    def record(self, rt_ms: float, ok: bool, n: int = 1) -> None:
        """One send's (or batch's) outcome."""
        with self.lock:
            if ok:
                self.ok += n
                self.rt_sum_ms += rt_ms * n
                self.rt_max_ms = max(self.rt_max_ms, rt_ms)
            else:
                self.failed += n

    def roll(self) -> tuple[int, float, float, int]:
        """(sent, max RT, average RT, failed) since the last roll."""
        with self.lock:
            ok, failed, rt_sum, rt_max = self.ok, self.failed, self.rt_sum_ms, self.rt_max_ms
            self.ok = self.failed = 0
            self.rt_sum_ms = self.rt_max_ms = 0.0
            self.total_ok += ok
            self.total_failed += failed
            self.total_rt_ms += rt_sum
            self.total_max_ms = max(self.total_max_ms, rt_max)
        return ok, rt_max, rt_sum / ok if ok else 0.0, failed


def build_parser() -> argparse.ArgumentParser:
    """Options in the Java tool's spirit (-t -w -s -k -c -n), plus the client's modes."""
    p = benchmark_parser("actormq producer", "producer benchmark (RocketMQ benchmark Producer)",
                         "benchmark_producer")
    p.add_argument("-w", "--threads", type=int, default=4, help="sending threads")
    p.add_argument("-s", "--size", type=int, default=128, help="message body bytes")
    p.add_argument("-k", "--keys", action="store_true", help="give each message a key")
    p.add_argument("-c", "--tag-count", type=int, default=0, help="tags Tag0..TagN-1 (0: none)")
    p.add_argument("-l", "--delay-level", type=int, default=0, help="delay level (0: none)")
    p.add_argument("--mode", choices=("sync", "async", "oneway", "batch"), default="sync")
    p.add_argument("--inflight", type=int, default=1000, help="async: max in flight")
    p.add_argument("--batch", type=int, default=32, help="batch mode: messages per batch")
    p.add_argument("--property", action="append", metavar="NAME=VALUE",
                   help="a user property on every message (repeatable); system names such as "
                        "TAGS or UNIQ_KEY are refused")  # fmt: skip
    add_stop_options(p)
    return p


def _report_line(stats: Stats) -> str:
    sent, rt_max, rt_avg, failed = stats.roll()
    return (f"Current Time: {time.strftime('%H:%M:%S')} | Send TPS: {sent} | "
            f"Max RT(ms): {rt_max:.3f} | Average RT(ms): {rt_avg:7.3f} | "
            f"Send Failed: {failed}\n")


def _sender(p: Any, a: argparse.Namespace, stats: Stats, stop: threading.Event, idx: int,
            budget: list[int], budget_lock: threading.Lock) -> None:  # fmt: skip
    from actors.client import Message, MQClientError

    body = b"x" * a.size
    seq = 0
    while not stop.is_set():
        n = a.batch if a.mode == "batch" else 1
        if a.count:
            with budget_lock:
                if budget[0] <= 0:
                    return
                n = min(n, budget[0])
                budget[0] -= n
        seq += 1
        tags = f"Tag{seq % a.tag_count}" if a.tag_count else None
        keys = f"{idx}-{seq}" if a.keys else None
        msg = Message(a.topic, body, tags=tags, keys=keys, properties=a.properties,
                      delay_level=a.delay_level)
        t0 = time.perf_counter()
        try:
            if a.mode == "sync":
                p.send(msg)
            elif a.mode == "oneway":
                p.send_oneway(msg)
            elif a.mode == "batch":
                p.send_batch([msg] * n)
            else:
                def done(r: Any, err: Any, t0: float = t0) -> None:
                    stats.record((time.perf_counter() - t0) * 1000, err is None)

                p.send_async(msg, callback=done)
                continue
        except MQClientError:
            stats.record(0.0, False, n)
            continue
        stats.record((time.perf_counter() - t0) * 1000, True, n)


def main(argv: list[str] | None = None) -> int:
    """Run until --seconds / --count or a signal; totals at the end; the exit code."""
    a = build_parser().parse_args(argv)
    problems = namesrv_problems(a)
    if a.threads < 1 or a.size < 1 or a.inflight < 1 or a.batch < 1:
        problems.append("--threads, --size, --inflight and --batch must be >= 1")
    if a.tag_count < 0 or a.delay_level < 0 or a.seconds < 0 or a.count < 0:
        problems.append("--tag-count, --delay-level, --seconds and --count must be >= 0")
    try:
        a.properties = parse_properties(a.property)
    except Usage as exc:
        problems.append(str(exc))
    if problems:
        sys.stderr.write(f"actormq producer: {'; '.join(problems)}\n")
        return EXIT_USAGE
    from actors.client import MQClientError, Producer

    stats, stop = Stats(), threading.Event()
    stop_on_signals(stop)
    try:
        producer = Producer(a.group, namesrv=a.namesrv, max_inflight=a.inflight)
    except ValueError as exc:
        sys.stderr.write(f"actormq producer: {exc}\n")
        return EXIT_USAGE
    start = time.monotonic()
    try:
        with producer as p:
            start_reporter(lambda: _report_line(stats), stop, sys.stdout)
            budget, budget_lock = [a.count], threading.Lock()
            threads = [threading.Thread(target=_sender, daemon=True,
                                        args=(p, a, stats, stop, i, budget, budget_lock))
                       for i in range(a.threads)]
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads) and not stop.is_set():
                if a.seconds and time.monotonic() - start >= a.seconds:
                    break
                time.sleep(0.05)
            stop.set()
            for t in threads:
                t.join(10)
            p.flush(30)
    except MQClientError as exc:
        sys.stderr.write(f"actormq producer: {exc.message}\n")
        return 1
    elapsed = time.monotonic() - start
    stats.roll()
    avg = stats.total_rt_ms / stats.total_ok if stats.total_ok else 0.0
    sys.stdout.write(f"Total: sent {stats.total_ok} | failed {stats.total_failed} | "
                     f"{elapsed:.1f} s | TPS {stats.total_ok / max(elapsed, 1e-9):.0f} | "
                     f"Max RT(ms): {stats.total_max_ms:.3f} | Average RT(ms): {avg:.3f}\n")
    return 0 if stats.total_failed == 0 else 1
