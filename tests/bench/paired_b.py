"""Paired B: two running brokers, B's rounds alternated between them, the ratio per pair.

`python -m tests.bench.paired_b --a 127.0.0.1:20911 --b 127.0.0.1:30911
[--a-match /tmp/x/data] [--b-match /tmp/y/data] [--slots 10] [--rounds 1000] [--warmup 12]`

B as `actormq bench` runs it (100 SEND_MESSAGE_V2 of 1 KiB written at once, every answer
decoded and matched before the next 100), against two brokers that are both up, a slot of
--rounds rounds on one then on the other, the order swapped every slot, after --warmup seconds
of untimed rounds alternated between them. Each pair of slots gives a ratio A / B; their median
and spread are what this prints, beside each broker's rates and CPU per message (the processes
whose command line contains --a-match / --b-match, e.g. the `--data` directory of an
`actormq up`). On this 2-core host the rate of one broker moves by +-30% from one minute to the
next; slots of a few seconds, alternated, see both brokers under the same weather, so a change
of a few percent in one of them shows (two `actormq up` from two checkouts, or one with a
knob set in its environment). Either broker may be the reference RocketMQ 4.9.8.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

from deploy.bench.broker_bench import BSender, b_batches
from deploy.bench.measure import cpu_us
from deploy.procinfo import pids_with_arg

log = logging.getLogger(__name__)

TOPIC = "BenchB"
IN_FLIGHT = 100  # a round's sends (b_batches)


class _Side:
    """One broker: B's sender and the processes whose CPU is its own."""

    def __init__(self, addr: tuple[str, int], match: str) -> None:
        self.sender = BSender(addr)
        self.pids = pids_with_arg(match) if match else []

    def untimed(self, rounds: int) -> None:
        for data, opaques in b_batches(rounds, topic=TOPIC):
            self.sender.round_trip(data, opaques)

    def timed(self, rounds: int) -> tuple[float, float]:
        """(msgs/s, CPU us per message of the matched processes; 0 without any)."""
        batches = b_batches(rounds, topic=TOPIC)  # encoded before the clock starts
        c0 = cpu_us(self.pids)
        t0 = time.perf_counter()
        for data, opaques in batches:
            self.sender.round_trip(data, opaques)
        dt = time.perf_counter() - t0
        n = rounds * IN_FLIGHT
        return n / dt, (cpu_us(self.pids) - c0) / n


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"not HOST:PORT: {text!r}")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    """CLI entry: prints each broker's figures and the paired ratio."""
    p = argparse.ArgumentParser(prog="paired_b", description=__doc__.split("\n\n")[0])
    p.add_argument("--a", type=_addr, required=True, help="HOST:PORT of broker A")
    p.add_argument("--b", type=_addr, required=True, help="HOST:PORT of broker B")
    p.add_argument("--a-match", default="", help="command-line text of A's processes (CPU)")
    p.add_argument("--b-match", default="", help="command-line text of B's processes (CPU)")
    p.add_argument("--slots", type=int, default=10, help="timed slots per broker")
    p.add_argument("--rounds", type=int, default=1000, help="rounds of 100 sends per slot")
    p.add_argument("--warmup", type=float, default=12.0, help="untimed seconds, alternated")
    args = p.parse_args(argv)
    if args.slots < 1 or args.rounds < 1:
        p.error("--slots and --rounds must be >= 1")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    a, b = _Side(args.a, args.a_match), _Side(args.b, args.b_match)
    try:
        a.untimed(1)  # the topic is created by its first send
        b.untimed(1)
        end = time.monotonic() + args.warmup
        while time.monotonic() < end:
            a.untimed(200)
            b.untimed(200)
        got: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
        for slot in range(args.slots):
            order = [("A", a), ("B", b)] if slot % 2 == 0 else [("B", b), ("A", a)]
            for name, sender in order:
                got[name].append(sender.timed(args.rounds))
    finally:
        a.sender.close()
        b.sender.close()
    for name in ("A", "B"):
        rates = [r for r, _ in got[name]]
        cpus = [c for _, c in got[name]]
        log.info("%s: %s msgs/s median (%s-%s), CPU %.1f us/msg median", name,
                 f"{statistics.median(rates):,.0f}", f"{min(rates):,.0f}", f"{max(rates):,.0f}",
                 statistics.median(cpus))  # fmt: skip
    ratios = [ra / rb for (ra, _), (rb, _) in zip(got["A"], got["B"], strict=True)]
    log.info("A / B paired: %.3f median (%.3f-%.3f) over %d pairs", statistics.median(ratios),
             min(ratios), max(ratios), len(ratios))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
