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
import os
import socket
import statistics
import time

from deploy.bench.measure import cpu_us
from deploy.bench.requests import send_request
from protocol.command import RemotingCommand
from protocol.framing import FrameDecoder

log = logging.getLogger(__name__)

TOPIC = "BenchB"
IN_FLIGHT = 100


def _pids(match: str) -> list[int]:
    """Processes whose command line contains `match` (none when it is empty)."""
    if not match:
        return []
    needle = match.encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if needle in f.read():
                        found.append(int(name))
            except OSError:
                continue
    return found


class _Sender:
    """One producer connection running B's rounds."""

    def __init__(self, addr: tuple[str, int], match: str) -> None:
        self.sock = socket.create_connection(addr, timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.buf = memoryview(bytearray(1 << 20))
        self.pids = _pids(match)

    def close(self) -> None:
        self.sock.close()

    def _round(self, data: bytes, opaques: set[int]) -> None:
        pending = set(opaques)
        self.sock.sendall(data)
        while pending:
            n = self.sock.recv_into(self.buf)
            if not n:
                raise ConnectionError("the broker closed the connection")
            for frame in self.decoder.feed(self.buf[:n]):
                r = RemotingCommand.decode(frame)
                if r.code != 0 or r.opaque not in pending:
                    raise RuntimeError(f"send failed: {r.code} {r.remark} opaque={r.opaque}")
                pending.discard(r.opaque)

    @staticmethod
    def _batches(rounds: int) -> list[tuple[bytes, set[int]]]:
        out = []
        for _ in range(rounds):
            reqs = [send_request(TOPIC, i % 4) for i in range(IN_FLIGHT)]
            out.append((b"".join(r.encode() for r in reqs), {r.opaque for r in reqs}))
        return out

    def untimed(self, rounds: int) -> None:
        for data, opaques in self._batches(rounds):
            self._round(data, opaques)

    def timed(self, rounds: int) -> tuple[float, float]:
        """(msgs/s, CPU us per message of the matched processes; 0 without any)."""
        batches = self._batches(rounds)  # encoded before the clock starts, as the bench does
        c0 = cpu_us(self.pids)
        t0 = time.perf_counter()
        for data, opaques in batches:
            self._round(data, opaques)
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
    a, b = _Sender(args.a, args.a_match), _Sender(args.b, args.b_match)
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
        a.close()
        b.close()
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
