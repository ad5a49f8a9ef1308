"""`actormq consumer`: a consumer load reader that prints TPS and latency every second.

Mirrors example/benchmark/Consumer.java, RocketMQ 4.9.x: a PushConsumer of a group
(benchmark_consumer by default) subscribes to a topic (BenchmarkTest by default) with a tag
or SQL92 expression, and every second one line reports the consume TPS, the average and max
born-to-consume (B2C) and store-to-consume (S2C) latency and the failures (a handler can be
told to fail a share of its calls with --fail-rate, as Java's -r). The totals are printed at the
end (after --seconds / --count, or on Ctrl-C / SIGTERM). Built on actors.client's PushConsumer,
so it measures what a Python application gets.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

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
    """Counters shared by the consume threads (guarded by lock)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    ok: int = 0
    failed: int = 0
    b2c_sum: float = 0.0
    s2c_sum: float = 0.0
    b2c_max: float = 0.0
    s2c_max: float = 0.0
    total_ok: int = 0
    total_failed: int = 0
    total_b2c: float = 0.0
    total_b2c_max: float = 0.0

    def record(self, msgs: Any, now_ms: float, ok: bool) -> None:
        """One handler call's messages."""
        with self.lock:
            if not ok:
                self.failed += len(msgs)
                return
            for m in msgs:
                b2c = now_ms - m.born_timestamp
                s2c = now_ms - m.store_timestamp
                self.b2c_sum += b2c
                self.s2c_sum += s2c
                self.b2c_max = max(self.b2c_max, b2c)
                self.s2c_max = max(self.s2c_max, s2c)
            self.ok += len(msgs)

    def roll(self) -> tuple[int, float, float, float, float, int]:
        """(consumed, avg B2C, avg S2C, max B2C, max S2C, failed) since the last roll."""
        with self.lock:
            ok, failed = self.ok, self.failed
            out = (ok, self.b2c_sum / ok if ok else 0.0, self.s2c_sum / ok if ok else 0.0,
                   self.b2c_max, self.s2c_max, failed)
            self.total_ok += ok
            self.total_failed += failed
            self.total_b2c += self.b2c_sum
            self.total_b2c_max = max(self.total_b2c_max, self.b2c_max)
            self.ok = self.failed = 0
            self.b2c_sum = self.s2c_sum = self.b2c_max = self.s2c_max = 0.0
        return out


def build_parser() -> argparse.ArgumentParser:
    """Options in the Java tool's spirit (-t -g -e -r), plus the client's modes."""
    p = benchmark_parser("actormq consumer", "consumer benchmark (RocketMQ benchmark Consumer)",
                         "benchmark_consumer")
    p.add_argument("-e", "--expression", default="*", help="tags ('TagA || TagB') or SQL92")
    p.add_argument("--sql", action="store_true", help="the expression is SQL92")
    p.add_argument("-r", "--fail-rate", type=float, default=0.0,
                   help="share of handler calls answered RECONSUME_LATER (0..1)")
    p.add_argument("--orderly", action="store_true", help="consume orderly")
    p.add_argument("--broadcasting", action="store_true")
    p.add_argument("--from", dest="consume_from", choices=("last", "first"), default="last")
    p.add_argument("-w", "--threads", type=int, default=20, help="consume workers")
    p.add_argument("--batch", type=int, default=1, help="consumeMessageBatchMaxSize")
    add_stop_options(p)
    return p


def _report_line(stats: Stats) -> str:
    n, b2c, s2c, b2c_max, s2c_max, failed = stats.roll()
    return (f"Current Time: {time.strftime('%H:%M:%S')} | Consume TPS: {n} | "
            f"AVG(B2C) RT(ms): {b2c:7.3f} | AVG(S2C) RT(ms): {s2c:7.3f} | "
            f"MAX(B2C) RT(ms): {b2c_max:.0f} | MAX(S2C) RT(ms): {s2c_max:.0f} | "
            f"Consume Fail: {failed}\n")


def main(argv: list[str] | None = None) -> int:
    """Run until --seconds / --count or a signal; totals at the end; the exit code."""
    a = build_parser().parse_args(argv)
    problems = namesrv_problems(a)
    if a.threads < 1 or a.batch < 1:
        problems.append("--threads and --batch must be >= 1")
    if not 0.0 <= a.fail_rate <= 1.0:
        problems.append("--fail-rate must be in 0..1")
    if a.seconds < 0 or a.count < 0:
        problems.append("--seconds and --count must be >= 0")
    if problems:
        sys.stderr.write(f"actormq consumer: {'; '.join(problems)}\n")
        return EXIT_USAGE
    from actors.client import MQClientError
    from actors.client.consumer import ConsumeResult, PushConsumer

    stats, stop = Stats(), threading.Event()
    rnd = random.Random()

    def handle(msgs: Any) -> ConsumeResult:
        ok = not (a.fail_rate and rnd.random() < a.fail_rate)
        stats.record(msgs, time.time() * 1000, ok)
        return ConsumeResult.SUCCESS if ok else ConsumeResult.RECONSUME_LATER

    stop_on_signals(stop)
    try:
        consumer = PushConsumer(a.group, namesrv=a.namesrv, handler=handle, orderly=a.orderly,
                                model="broadcasting" if a.broadcasting else "clustering",
                                consume_from=a.consume_from, workers=a.threads,
                                consume_batch=a.batch)
    except ValueError as exc:
        sys.stderr.write(f"actormq consumer: {exc}\n")
        return EXIT_USAGE
    start = time.monotonic()
    try:
        with consumer as c:
            c.subscribe(a.topic, a.expression, expression_type="SQL92" if a.sql else None)
            start_reporter(lambda: _report_line(stats), stop, sys.stdout)
            while not stop.is_set():
                if a.seconds and time.monotonic() - start >= a.seconds:
                    break
                if a.count and stats.total_ok + stats.ok >= a.count:
                    break
                time.sleep(0.05)
            stop.set()
    except (MQClientError, ValueError) as exc:
        text = exc.message if isinstance(exc, MQClientError) else str(exc)
        sys.stderr.write(f"actormq consumer: {text}\n")
        return 1
    elapsed = time.monotonic() - start
    stats.roll()
    avg = stats.total_b2c / stats.total_ok if stats.total_ok else 0.0
    sys.stdout.write(f"Total: consumed {stats.total_ok} | failed {stats.total_failed} | "
                     f"{elapsed:.1f} s | TPS {stats.total_ok / max(elapsed, 1e-9):.0f} | "
                     f"AVG(B2C) RT(ms): {avg:.3f} | MAX(B2C) RT(ms): {stats.total_b2c_max:.0f}\n")
    return 0
