"""Delay-level delivery benchmark (ScheduleMessageService): `python -m tests.bench.delay_bench`.

G1, lateness: a sender at --rate msgs/s for --seconds, each message DELAY=1 (level 1: 1 s),
    round-robin over 4 queues, and a long-polling consumer of the real topic holding one pull
    in flight per queue: how late each message arrives past its due time (receive - send -
    1000 ms), p50 and p99.
G2, drain: --burst messages with DELAY=1 sent as fast as the broker takes them (100 in flight);
    the consumer counts them as they arrive: the delivery rate from the first arrival to the
    last (msgs/s): how fast the service drains a level whose messages are all due.
Broker CPU microseconds per message (every process of the broker) for each. Self-contained
(it starts a broker as `actormq up` does and stops it), so the same file runs against an older
checkout (PYTHONPATH=<that tree> python <this file>) for same-session comparisons.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import socket
import struct
import sys
import tempfile
import time
from typing import Any, Final

from deploy.bench.consume_bench import QUEUES, consumer_pull, subscribe
from deploy.bench.measure import cpu_us, paced_sends
from deploy.bench.requests import BODY, send_request
from deploy.wire import BlockingClient
from protocol.command import RemotingCommand
from protocol.framing import FrameDecoder
from protocol.message import decode_messages
from tests.integration.e2e_helpers import create_topic_cmd

log = logging.getLogger(__name__)

DELAY_MS: Final = 1000  # level 1 of the default messageDelayLevel
RECV_TIMEOUT_S: Final = 1.0


def delayed_request(topic: str, queue_id: int) -> RemotingCommand:
    """SEND_MESSAGE_V2 with DELAY=1, the body starting with the sender's monotonic_ns."""
    req = send_request(topic, queue_id)
    assert req.ext_fields is not None
    req.ext_fields["i"] += "\x02DELAY\x011"
    req.body = struct.pack(">q", time.monotonic_ns()) + BODY[8:]
    return req


def _paced_sender(addr: tuple[str, int], topic: str, n: int, rate: float) -> None:
    """Child process: n delayed sends at `rate`/s (exits non-zero on a failed send)."""
    paced_sends(addr, n, rate, lambda i: delayed_request(topic, i % QUEUES))


def _burst_sender(addr: tuple[str, int], topic: str, n: int) -> None:
    """Child process: n delayed sends, 100 in flight (a SYSTEM_BUSY is sent again)."""
    with BlockingClient(addr) as cl:
        sent = 0
        while sent < n:
            reqs = [delayed_request(topic, (sent + i) % QUEUES) for i in range(min(100, n - sent))]
            cl.send(*reqs)
            for req in reqs:
                r = cl.wait_response(req.opaque, 30)
                if r.code == 0:
                    sent += 1
                elif r.code != 2:
                    raise RuntimeError(f"send failed: {r.code} {r.remark}")


def consume(addr: tuple[str, int], topic: str, n: int, sender: Any, args: tuple[Any, ...],
            pids: list[int], timeout_s: float) -> tuple[list[int], list[int], float]:  # fmt: skip
    """Start `sender` in a child process and long-poll the topic until n messages arrived:
    (each one's lateness in ns, each one's arrival monotonic_ns, broker CPU us per message)."""
    group = f"bench_delay_{topic}"
    late: list[int] = []
    arrived: list[int] = []
    with BlockingClient(addr) as cl:
        r = cl.invoke(create_topic_cmd(topic, QUEUES), 10)
        if r.code != 0:
            raise RuntimeError(f"creating {topic} failed: {r.code} {r.remark}")
        subscribe(cl, group, topic)
        sock = cl.sock
        assert isinstance(sock, socket.socket)
        sock.settimeout(RECV_TIMEOUT_S)
        decoder = FrameDecoder()
        buf = memoryview(bytearray(1 << 20))
        offsets = [0] * QUEUES
        inflight: dict[int, int] = {}

        def pull(q: int) -> bytes:
            req = consumer_pull(group, topic, q, offsets[q], commit=True)
            inflight[req.opaque] = q
            return req.encode()

        c0 = cpu_us(pids)
        sock.sendall(b"".join(pull(q) for q in range(QUEUES)))
        proc = multiprocessing.get_context("fork").Process(
            target=sender, args=(addr, topic, *args), daemon=True)
        proc.start()
        deadline = time.monotonic() + timeout_s
        try:
            while len(late) < n and time.monotonic() < deadline:
                try:
                    k = sock.recv_into(buf)
                except TimeoutError:
                    if proc.exitcode not in (None, 0):
                        break
                    continue
                now = time.monotonic_ns()
                if not k:
                    raise ConnectionError("broker closed the connection")
                out = []
                for frame in decoder.feed(buf[:k]):
                    r = RemotingCommand.decode(frame)
                    if not r.is_response:
                        continue
                    q = inflight.pop(r.opaque)
                    if r.code == 0:
                        for m in decode_messages(bytes(r.body)):
                            sent = struct.unpack_from(">q", bytes(m.body), 0)[0]
                            late.append(now - sent - DELAY_MS * 1_000_000)
                            arrived.append(now)
                    elif r.code not in (19, 20):
                        raise RuntimeError(f"pull failed: {r.code} {r.remark}")
                    if r.ext_fields and "nextBeginOffset" in r.ext_fields:
                        offsets[q] = int(r.ext_fields["nextBeginOffset"])
                    out.append(pull(q))
                if out:
                    sock.sendall(b"".join(out))
        finally:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        cpu = (cpu_us(pids) - c0) / max(len(late), 1)
    if proc.exitcode != 0:
        raise RuntimeError(f"the sender failed (exit code {proc.exitcode})")
    if len(late) < n:
        raise RuntimeError(f"{len(late)} of {n} delayed messages delivered")
    return late, arrived, cpu


def bench_lateness(addr: tuple[str, int], n: int, rate: float, pids: list[int], tag: str
                   ) -> tuple[float, float, float]:  # fmt: skip
    """G1: (p50 ms, p99 ms, CPU us/msg) of how late paced DELAY=1 messages arrive."""
    late, _arrived, cpu = consume(addr, f"BenchDelay{tag}", n, _paced_sender, (n, rate), pids,
                                  n / rate + 30)  # fmt: skip
    late.sort()
    return late[len(late) // 2] / 1e6, late[min(len(late) - 1, int(len(late) * 0.99))] / 1e6, cpu


def bench_drain(addr: tuple[str, int], n: int, pids: list[int], tag: str
                ) -> tuple[float, float]:  # fmt: skip
    """G2: (delivery rate msgs/s, CPU us/msg) of a burst of DELAY=1 messages."""
    _late, arrived, cpu = consume(addr, f"BenchDrain{tag}", n, _burst_sender, (n,), pids, 120)
    span = (max(arrived) - min(arrived)) / 1e9
    return n / span if span > 0 else float("inf"), cpu


def main(argv: list[str] | None = None) -> int:
    """Start a broker, run G1 and G2 --runs times, print one JSON line per run."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--rate", type=float, default=500.0)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--burst", type=int, default=10_000)
    p.add_argument("--label", default="")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from actors.broker.config import BrokerConfig
    from deploy import launch
    from store.config import StoreConfig
    from tests.integration.conftest import cluster_pids

    with tempfile.TemporaryDirectory(prefix="amq-delay-bench-") as data:
        cluster = launch.start_system(data, log_level="WARNING")
        try:
            props = {"listenPort": "0", "storePathRootDir": os.path.join(data, "store")}
            port = launch.start_broker(cluster, BrokerConfig.from_properties(props),
                                       StoreConfig.from_properties(props))  # fmt: skip
            addr = ("127.0.0.1", port)
            pids = [pid for pid in cluster_pids(cluster) if pid != os.getpid()]
            n = int(args.rate * args.seconds)
            for i in range(args.runs):
                p50, p99, cpu1 = bench_lateness(addr, n, args.rate, pids, str(i))
                rate, cpu2 = bench_drain(addr, args.burst, pids, str(i))
                print(json.dumps({"label": args.label, "run": i, "G1_late_p50_ms": round(p50, 1),
                                  "G1_late_p99_ms": round(p99, 1), "G1_cpu_us": round(cpu1),
                                  "G2_msgs_s": round(rate), "G2_cpu_us": round(cpu2)}),
                      flush=True)  # fmt: skip
        finally:
            launch.stop_cluster(cluster)
    return 0


if __name__ == "__main__":
    sys.exit(main())
