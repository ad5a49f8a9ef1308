"""Producers and long-polling consumers at once against the real broker: every message is
consumed exactly once per queue offset, none is lost, and no pull ever sees a queue go backwards
(a state-page word read as 0 while the send actor published made the pull actor answer full
queues as empty: PULL_OFFSET_MOVED to 0)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from deploy.wire import BlockingClient
from protocol.command import RemotingCommand
from protocol.message import decode_messages
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    broker_addr,
    create_topic_cmd,
    heartbeat_cmd,
    msg_props,
    pull_cmd,
    send_cmd,
    start_real,
)

pytestmark = pytest.mark.integration

TOPIC = "SoakT"
QUEUES = 4
PRODUCERS = 3
PER_PRODUCER = 4000
WINDOW = 50


def _send(pid: int, j: int) -> RemotingCommand:
    return send_cmd(TOPIC, f"p{pid}-{j}|".encode() + b"x" * 300,
                    msg_props(tags=f"T{j % 3}", keys=f"k{pid}-{j}"), queue_id=j % QUEUES,
                    group="soak_pg")  # fmt: skip


def _producer(addr: tuple[str, int], pid: int, errors: list[str]) -> None:
    with BlockingClient(addr) as cl:
        for start in range(0, PER_PRODUCER, WINDOW):  # bounded: PER_PRODUCER / WINDOW rounds
            reqs = [_send(pid, j) for j in range(start, min(PER_PRODUCER, start + WINDOW))]
            for req, r in zip(reqs, cl.invoke_many(reqs, 30), strict=True):
                for _ in range(50):  # SYSTEM_BUSY (fast failure) is retried like a producer does
                    if r.code != 2:
                        break
                    r = cl.invoke(RemotingCommand.request(req.code, dict(req.ext_fields or {}),
                                                          bytes(req.body)), 30)  # fmt: skip
                if r.code != 0:
                    errors.append(f"send {r.code} {r.remark}")


def _consumer(addr: tuple[str, int], queues: list[int], want: int, got: list[Any],
              errors: list[str], stop: threading.Event) -> None:
    offs = dict.fromkeys(queues, 0)
    with BlockingClient(addr) as cl:
        cl.invoke(heartbeat_cmd("soak@c", "soak_cg", {TOPIC: "*"}), RPC_TIMEOUT_S)
        for _ in range(20_000):  # bounded; ends when every expected message came
            if len(got) >= want or stop.is_set():
                return
            for q in queues:
                r = cl.invoke(pull_cmd("soak_cg", TOPIC, q, offs[q], sys_flag=6, suspend_ms=200),
                              30)  # fmt: skip
                nxt = int(r.ext_fields.get("nextBeginOffset", offs[q]))
                if r.code == 0:
                    for m in decode_messages(r.body):
                        got.append((q, m.queue_offset, bytes(m.body).split(b"|")[0].decode()))
                elif r.code not in (19, 20):  # anything but "nothing new yet"
                    errors.append(f"pull q{q}@{offs[q]}: {r.code} {r.remark} {r.ext_fields}")
                    stop.set()
                    return
                if nxt < offs[q]:
                    errors.append(f"q{q} went back from {offs[q]} to {nxt}")
                    stop.set()
                    return
                offs[q] = nxt


def test_concurrent_producers_and_consumers_lose_and_repeat_nothing(local_cluster) -> None:
    cluster = start_real(local_cluster)
    addr = broker_addr(cluster)
    with BlockingClient(addr) as cl:
        assert cl.invoke(create_topic_cmd(TOPIC, QUEUES), RPC_TIMEOUT_S).code == 0
    errors: list[str] = []
    got: list[Any] = []
    stop = threading.Event()
    total = PRODUCERS * PER_PRODUCER
    threads = [threading.Thread(target=_consumer, args=(addr, list(range(QUEUES)), total, got,
                                                        errors, stop))]  # fmt: skip
    threads += [threading.Thread(target=_producer, args=(addr, p, errors))
                for p in range(PRODUCERS)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    stop.set()
    assert not any(t.is_alive() for t in threads), "a client thread did not finish in time"
    assert errors == []
    bodies = Counter(b for _q, _o, b in got)
    assert len(got) == total and len(bodies) == total  # all of them, none twice
    assert set(bodies) == {f"p{p}-{j}" for p in range(PRODUCERS) for j in range(PER_PRODUCER)}
    per_queue = Counter(q for q, _o, _b in got)
    for q in range(QUEUES):  # each queue's offsets 0..n-1, each once
        offsets = sorted(o for qq, o, _b in got if qq == q)
        assert offsets == list(range(per_queue[q]))
