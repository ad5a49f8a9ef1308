"""Paired C or D: two checkouts' PushConsumers against one running cluster, alternated.

`python -m tests.bench.paired_consumer --namesrv 127.0.0.1:9876 --broker 127.0.0.1:10911
--a /path/to/checkout-a --b /path/to/checkout-b [--scenario c|d] [--pairs 8]
[--messages 200000] [--passes 2] [--warmup 3]`

C: the harness stores --messages 1 KiB messages on 8 queues of a new topic once; each side's
pass is `deploy.bench.consumer_bench.push_consume` over that backlog (a new group from the first
offset, a no-op handler, the consumer's rate from its first message to its last and its client
CPU a message), run in a process of its own with the side's checkout first on sys.path, so a
pass starts cold, as a user's consumer does. D: each pass is `consumer_bench.latency` on a new
topic of 4 queues (a Producer in another process sends --messages stamped messages at
500/s after --warmup seconds of untimed ones): p50 and p99 from the send to the handler.

A pair is one slot of --passes passes on each side, the side that goes first swapped every
pair; the ratio of a pair is A over B (C: the mean rate; D: the mean p50). Their median and
spread, and how many pairs favour A, are what this prints. On this 2-core host a drain's rate
moves by +-15% from one minute to the next; alternated passes see both sides under the same
weather, so a change of a few percent shows. Make side B a worktree of the code before a
change (`git worktree add /tmp/base REV`); both sides run on this interpreter (--python).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

PASS_TIMEOUT_S = 400.0
D_QUEUES = 4


def _pass_code(scenario: str, tree: Path, ns: str, broker: str, topic: str, n: int,
               warm_s: float) -> str:  # fmt: skip
    """The program of one side's pass: its JSON result on the last line of stdout."""
    head = (f"import sys, json; sys.path.insert(0, {str(tree)!r}); "
            "from deploy.bench import consumer_bench as cb; ")  # fmt: skip
    if scenario == "c":
        return head + f"print(json.dumps(cb.push_consume({ns!r}, {topic!r}, {n}, False)))"
    host, _, port = broker.rpartition(":")
    return head + (f"cb.create_topic(({host!r}, {int(port)}), {topic!r}, {D_QUEUES}); "
                   f"print(json.dumps(cb.latency({ns!r}, {topic!r}, {n}, warm_s={warm_s})))")


def run_pass(python: str, tree: Path, code: str) -> tuple[float, float]:
    """Run one pass in its own process (output to files, stopped by its session's PID when it
    overruns): its two figures."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([python, "-c", code], cwd=tree, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, start_new_session=True)  # fmt: skip
        try:
            rc = proc.wait(PASS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rc = None
        finally:  # whatever of its session is left (actor processes of a failed pass)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        if rc is None:
            raise RuntimeError(f"a pass in {tree} overran {PASS_TIMEOUT_S:.0f} s")
        out.seek(0)
        err.seek(0)
        lines = out.read().strip().splitlines()
        if rc != 0 or not lines:
            raise RuntimeError(f"a pass in {tree} failed (exit {rc}): {err.read()[-2000:]}")
    first, second = json.loads(lines[-1])
    return float(first), float(second)


def _checkout(text: str) -> Path:
    path = Path(text).resolve()
    if not (path / "deploy" / "bench" / "consumer_bench.py").is_file():
        raise argparse.ArgumentTypeError(f"not an actormq checkout: {text!r}")
    return path


def _addr(text: str) -> str:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"not HOST:PORT: {text!r}")
    return text


def _summary(name: str, figures: list[tuple[float, float]], scenario: str) -> str:
    firsts = [f for f, _ in figures]
    seconds = [s for _, s in figures]
    if scenario == "c":
        return (f"{name}: {statistics.median(firsts):,.0f} msgs/s median "
                f"({min(firsts):,.0f}-{max(firsts):,.0f}), client CPU "
                f"{statistics.median(seconds):.2f} us/msg median")  # fmt: skip
    return (f"{name}: p50 {statistics.median(firsts):.3f} ms median ({min(firsts):.3f}-"
            f"{max(firsts):.3f}), p99 {statistics.median(seconds):.2f} ms median")


def main(argv: list[str] | None = None) -> int:
    """CLI entry: prints each pair, each side's figures and the paired ratio."""
    p = argparse.ArgumentParser(prog="paired_consumer", description=__doc__.split("\n\n")[0])
    p.add_argument("--namesrv", type=_addr, required=True, help="HOST:PORT of the name server")
    p.add_argument("--broker", type=_addr, required=True, help="HOST:PORT of the broker")
    p.add_argument("--a", type=_checkout, required=True, help="checkout of side A")
    p.add_argument("--b", type=_checkout, required=True, help="checkout of side B")
    p.add_argument("--scenario", choices=("c", "d"), default="c")
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--messages", type=int, default=200_000, help="C: backlog; D: stamped sends")
    p.add_argument("--passes", type=int, default=2, help="passes a side in each pair")
    p.add_argument("--warmup", type=float, default=3.0, help="D: untimed seconds of sends")
    p.add_argument("--python", default=sys.executable, help="interpreter of both sides")
    args = p.parse_args(argv)
    if args.pairs < 1 or args.passes < 1 or args.messages < 1 or args.warmup < 0:
        p.error("--pairs, --passes and --messages must be >= 1, --warmup >= 0")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from deploy.bench import consumer_bench as cb

    stamp = time.time_ns()
    topic = f"PairedC{stamp}"
    if args.scenario == "c":
        host, _, port = args.broker.rpartition(":")
        cb.create_topic((host, int(port)), topic)
        cb.preload(args.namesrv, topic, args.messages, cb.BODY)
    sides = {"A": args.a, "B": args.b}
    seq = 0

    def one(name: str) -> tuple[float, float]:
        nonlocal seq
        seq += 1
        t = topic if args.scenario == "c" else f"PairedD{stamp}_{seq}"
        code = _pass_code(args.scenario, sides[name], args.namesrv, args.broker, t,
                          args.messages, args.warmup)  # fmt: skip
        return run_pass(args.python, sides[name], code)

    if args.scenario == "c":  # one untimed pass a side: the page cache and the broker warm
        one("A")
        one("B")
    got: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
    ratios: list[float] = []
    for pair in range(args.pairs):
        order = ["A", "B"] if pair % 2 == 0 else ["B", "A"]
        means: dict[str, float] = {}
        for name in order:
            runs = [one(name) for _ in range(args.passes)]
            got[name] += runs
            means[name] = statistics.mean(f for f, _ in runs)
        ratios.append(means["A"] / means["B"])
        log.info("pair %d: A %.4g B %.4g A/B %.3f", pair, means["A"], means["B"], ratios[-1])
    for name in ("A", "B"):
        log.info("%s", _summary(name, got[name], args.scenario))
    better = sum(r >= 1.0 for r in ratios) if args.scenario == "c" else \
        sum(r <= 1.0 for r in ratios)  # fmt: skip
    log.info("A / B paired (%s): %.3f median (%.3f-%.3f) over %d pairs, %d favour A",
             "rate" if args.scenario == "c" else "p50", statistics.median(ratios), min(ratios),
             max(ratios), len(ratios), better)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
