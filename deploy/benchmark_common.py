"""What the `actormq producer` and `actormq consumer` load tools share.

Mirrors the parts example/benchmark/Producer.java and Consumer.java (RocketMQ 4.9.x) each repeat:
the name server, topic and group options, the stop conditions, and the once-a-second report line
printed by a timer thread until the run stops.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

EXIT_USAGE = 2


def benchmark_parser(prog: str, description: str, group: str) -> argparse.ArgumentParser:
    """A parser with -n (name servers), -t (topic) and -g (group, default `group`)."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("-n", "--namesrv", default=None,
                   help="name server(s) host:port[;host:port] (default $NAMESRV_ADDR)")
    p.add_argument("-t", "--topic", default="BenchmarkTest")
    p.add_argument("-g", "--group", default=group)
    return p


def add_stop_options(p: argparse.ArgumentParser) -> None:
    """--seconds and --count: when a run stops (0: never)."""
    p.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: never)")
    p.add_argument("--count", type=int, default=0, help="stop after this many messages (0: no)")


def namesrv_problems(a: argparse.Namespace) -> list[str]:
    """Resolve a.namesrv ($NAMESRV_ADDR when not given); what is wrong with it."""
    a.namesrv = a.namesrv or os.environ.get("NAMESRV_ADDR")
    if not a.namesrv:
        return ["no name server: pass -n host:port or set NAMESRV_ADDR"]
    from actors.client.client_config import parse_namesrv

    try:
        parse_namesrv(a.namesrv)
    except ValueError as exc:
        return [str(exc)]
    return []


def stop_on_signals(stop: threading.Event) -> None:
    """SIGINT and SIGTERM end the run (its totals are still printed)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())


def start_reporter(line: Callable[[], str], stop: threading.Event, out: Any) -> None:
    """A daemon thread writing line() to out every second until stop is set."""

    def report() -> None:
        while not stop.wait(1.0):
            out.write(line())
            out.flush()

    threading.Thread(target=report, daemon=True).start()
