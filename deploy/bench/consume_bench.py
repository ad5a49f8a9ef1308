"""Consume scenarios of the broker benchmark (C and D), as RocketMQ's push consumer pulls.

C: pull every stored message of 4 queues, 32 per pull, one pull in flight per queue on one
   connection (PullMessageService's one request per queue), each pull carrying the consume
   offset of its queue as DefaultMQPushConsumerImpl.pullMessage does (PullSysFlag commit bit once
   the offset is > 0, the suspend bit, the subscription registered by the heartbeat), or, in the
   labelled no-commit row, without the commit bit.
D: a sender at 500 msgs/s round-robin over 4 queues (a producer's default queue selection) and
   a long-polling consumer holding one pull in flight per queue, each committing the offset
   reached: end-to-end latency from the sender's clock in the body to the consumer's.
The same client runs against actormq and the reference broker (deploy/bench/broker_bench.py).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import struct
import time
from collections import deque
from typing import Final

from deploy.bench.measure import cpu_by_role, cpu_us, paced_sends, role_cpu_since
from deploy.bench.requests import BODY, send_request, signed
from deploy.wire import BlockingClient
from protocol.command import RemotingCommand
from protocol.framing import FrameDecoder

log = logging.getLogger(__name__)

FLAG_COMMIT: Final = 1  # PullSysFlag
FLAG_SUSPEND: Final = 2
FLAG_SUBSCRIPTION: Final = 4
QUEUES: Final = 4
PULL_BATCH: Final = 32
PRELOAD_BUSY_LIMIT: Final = 10_000  # resends of SYSTEM_BUSY replies while preloading C
SUSPEND_MS: Final = 15_000  # brokerSuspendMaxTimeMillis
D_RECV_TIMEOUT_S: Final = 1.0  # D: how often the consumer looks at its deadline and sender


def heartbeat_request(client_id: str, group: str, topic: str) -> RemotingCommand:
    """HEART_BEAT (34) of a push consumer subscribed to `topic` with '*'."""
    sub = {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
           "subVersion": 1, "tagsSet": [], "topic": topic}
    body = {"clientID": client_id,
            "consumerDataSet": [{"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                 "consumeType": "CONSUME_PASSIVELY", "groupName": group,
                                 "messageModel": "CLUSTERING", "subscriptionDataSet": [sub],
                                 "unitMode": False}],
            "producerDataSet": []}
    data = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    return signed(RemotingCommand.request(34, None, data))


def pull_request(group: str, topic: str, queue_id: int, offset: int, max_nums: int, *,
                 sys_flag: int, commit_offset: int = 0, suspend_ms: int = 0
                 ) -> RemotingCommand:  # fmt: skip
    """PULL_MESSAGE (11) with the given PullSysFlag bits."""
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id),
           "queueOffset": str(offset), "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag),
           "commitOffset": str(commit_offset), "suspendTimeoutMillis": str(suspend_ms),
           "subVersion": "0", "expressionType": "TAG", "subscription": "*"}
    return signed(RemotingCommand.request(11, ext))


def consumer_pull(group: str, topic: str, queue_id: int, offset: int, *, commit: bool,
                  suspend_ms: int = SUSPEND_MS) -> RemotingCommand:  # fmt: skip
    """A push consumer's pull: commit bit (and the offset) once it is > 0, suspend bit, the
    subscription the heartbeat registered."""
    flag = FLAG_SUSPEND | (FLAG_COMMIT if commit and offset > 0 else 0)
    return pull_request(group, topic, queue_id, offset, PULL_BATCH, sys_flag=flag,
                        commit_offset=offset, suspend_ms=suspend_ms)  # fmt: skip


def subscribe(cl: BlockingClient, group: str, topic: str) -> None:
    """Heartbeat on the consumer's own connection, then wait (bounded) until a pull relying on
    the registered subscription is accepted (actormq's pull actor learns the group one
    replication hop after the heartbeat's answer)."""
    r = cl.invoke(heartbeat_request(f"bench@{os.getpid()}", group, topic), 10)
    if r.code != 0:
        raise RuntimeError(f"heartbeat failed: {r.code} {r.remark}")
    for _ in range(300):
        r = cl.invoke(pull_request(group, topic, 0, 0, 1, sys_flag=0), 10)
        if r.code in (0, 19, 20, 21):
            return
        time.sleep(0.01)
    raise RuntimeError(f"pull never accepted for {group}/{topic}: {r.code} {r.remark}")


def preload(addr: tuple[str, int], topic: str, total: int, queues: int = QUEUES) -> None:
    """Store `total` messages round-robin over the queues (not timed); a SYSTEM_BUSY reply is
    resent to the same queue, as a producer backs off and retries, and counted: each queue
    gets its share exactly (C pulls each to total / queues)."""
    with BlockingClient(addr) as cl:
        busy = 0
        pending = deque(i % queues for i in range(total))  # the queue of each unsent message
        while pending:
            batch = [pending.popleft() for _ in range(min(100, len(pending)))]
            answers = cl.invoke_many([send_request(topic, q) for q in batch], 30)
            for q, r in zip(batch, answers, strict=True):
                if r.code == 0:
                    continue
                if r.code == 2 and busy < PRELOAD_BUSY_LIMIT:
                    busy += 1
                    pending.append(q)
                else:
                    raise RuntimeError(f"send failed: {r.code} {r.remark}")
    if busy:
        log.warning("preload of %s: %d sends answered SYSTEM_BUSY and resent", topic, busy)


def bench_c(addr: tuple[str, int], topic: str, group: str, per_queue: int, pids: list[int], *,
            commit: bool, queues: int = QUEUES, roles: dict[str, float] | None = None,
            ) -> tuple[float, float]:  # fmt: skip
    """Pull `per_queue` messages of each queue, one pull in flight per queue: (msgs/s, broker
    CPU us/msg); `roles`, when given, receives the CPU us/msg of each actor role."""
    cl = BlockingClient(addr)
    try:
        subscribe(cl, group, topic)
        sock = cl.sock
        assert sock is not None
        sock.settimeout(30)
        decoder = FrameDecoder()
        buf = memoryview(bytearray(1 << 20))
        offsets = [0] * queues
        inflight: dict[int, int] = {}  # opaque -> queue
        got = 0
        r0 = cpu_by_role(pids) if roles is not None else {}
        c0 = cpu_us(pids)
        t0 = time.perf_counter()
        first = [consumer_pull(group, topic, q, 0, commit=commit) for q in range(queues)]
        inflight.update((r.opaque, q) for q, r in enumerate(first))
        sock.sendall(b"".join(r.encode() for r in first))
        while inflight:
            n = sock.recv_into(buf)
            if not n:
                raise ConnectionError("broker closed the connection")
            out = []
            for frame in decoder.feed(buf[:n]):
                r = RemotingCommand.decode(frame)
                q = inflight.pop(r.opaque)
                if r.code != 0:
                    raise RuntimeError(f"pull failed at {q}:{offsets[q]}: {r.code} {r.remark}")
                nxt = int((r.ext_fields or {})["nextBeginOffset"])
                got += nxt - offsets[q]
                offsets[q] = nxt
                if nxt < per_queue:
                    req = consumer_pull(group, topic, q, nxt, commit=commit)
                    inflight[req.opaque] = q
                    out.append(req.encode())
            if out:
                sock.sendall(b"".join(out))
        dt = time.perf_counter() - t0
        cpu = (cpu_us(pids) - c0) / max(got, 1)
        if roles is not None:
            roles.update(role_cpu_since(pids, r0, max(got, 1)))
        return got / dt, cpu
    finally:
        cl.close()


def _d_sender(addr: tuple[str, int], topic: str, n: int, rate: float,
              queues: int = QUEUES) -> None:  # fmt: skip
    """Child process: send n messages at `rate`/s round-robin over the queues (as a producer's
    default queue selection does), each body starting with monotonic_ns."""

    def request(i: int) -> RemotingCommand:
        return send_request(topic, i % queues,
                            body=struct.pack(">q", time.monotonic_ns()) + BODY[8:])

    paced_sends(addr, n, rate, request, "D send")


def bench_d(addr: tuple[str, int], n: int, pids: list[int], tag: str = "0", rate: float = 500.0,
            queues: int = QUEUES) -> tuple[float, float, float]:  # fmt: skip
    """A sender at `rate`/s round-robin over the topic's queues and a long-polling consumer
    holding one pull in flight per queue (PullMessageService's one request per queue), each
    committing the offset reached: (p50 ms, p99 ms, broker CPU us per message received).
    Topic and group are named after `tag`. Raises unless all n messages arrive."""
    from deploy.bench.requests import create_topic_cmd
    from protocol.message import decode_messages

    topic = f"BenchD{tag}"
    group = f"bench_dg{tag}"
    lat_ns: list[int] = []
    with BlockingClient(addr) as cl:
        # created empty (no message to skip, no offset to guess while the broker dispatches)
        r = cl.invoke(create_topic_cmd(topic, queues), 10)
        if r.code != 0:
            raise RuntimeError(f"creating {topic} failed: {r.code} {r.remark}")
        subscribe(cl, group, topic)
        sock = cl.sock
        assert sock is not None
        sock.settimeout(D_RECV_TIMEOUT_S)
        decoder = FrameDecoder()
        buf = memoryview(bytearray(1 << 20))
        offsets = [0] * queues
        inflight: dict[int, int] = {}  # opaque -> queue

        def pull(q: int) -> bytes:
            req = consumer_pull(group, topic, q, offsets[q], commit=True)
            inflight[req.opaque] = q
            return req.encode()

        ctx = multiprocessing.get_context("fork")
        c0 = cpu_us(pids)
        sock.sendall(b"".join(pull(q) for q in range(queues)))  # parked at the broker
        proc = ctx.Process(target=_d_sender, args=(addr, topic, n, rate, queues), daemon=True)
        proc.start()
        try:
            deadline = time.monotonic() + n / rate + 30
            while len(lat_ns) < n and time.monotonic() < deadline:
                try:
                    k = sock.recv_into(buf)
                except TimeoutError:
                    if proc.exitcode not in (None, 0):
                        break  # the sender failed: said below
                    continue
                now = time.monotonic_ns()
                if not k:
                    raise ConnectionError("broker closed the connection")
                out = []
                for frame in decoder.feed(buf[:k]):
                    r = RemotingCommand.decode(frame)
                    if not r.is_response:
                        continue  # a broker's notice (consumer ids changed): nothing to do
                    q = inflight.pop(r.opaque)
                    if r.code == 0:
                        for m in decode_messages(bytes(r.body)):
                            lat_ns.append(now - struct.unpack_from(">q", bytes(m.body), 0)[0])
                    elif r.code not in (19, 20):  # PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY
                        raise RuntimeError(f"D pull failed at {q}:{offsets[q]}: {r.code} "
                                           f"{r.remark}")  # fmt: skip
                    if r.ext_fields and "nextBeginOffset" in r.ext_fields:
                        offsets[q] = int(r.ext_fields["nextBeginOffset"])
                    out.append(pull(q))
                if out:
                    sock.sendall(b"".join(out))
        finally:
            proc.join(n / rate + 30)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        cpu = (cpu_us(pids) - c0) / max(len(lat_ns), 1)
    if proc.exitcode != 0:
        raise RuntimeError(f"D: the sender failed (exit code {proc.exitcode})")
    if len(lat_ns) < n:
        raise RuntimeError(f"D: {len(lat_ns)} of {n} messages received")
    lat_ns.sort()
    p50 = lat_ns[len(lat_ns) // 2] / 1e6
    p99 = lat_ns[min(len(lat_ns) - 1, int(len(lat_ns) * 0.99))] / 1e6
    return p50, p99, cpu
