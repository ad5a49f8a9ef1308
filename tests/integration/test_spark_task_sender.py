"""The Spark sink's TaskSender on the client's producer pieces, against the real broker.

A sharding key goes to the queue Java's SelectMessageQueueByHash picks (abs(hashCode % n), with
Java's remainder: keys whose hashCode is negative included), each key's rows are stored in row
order, and every row is stored once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from deploy import launch
from deploy.bench.requests import create_topic_cmd, pull_cmd
from deploy.spark.send import OutMessage, TaskSender
from deploy.wire import BlockingClient
from protocol.message import decode_messages
from protocol.record import java_string_hash
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    broker_addr,
    namesrv_addr,
    start_real,
    wait_route,
)

TOPIC = "SinkShard"
QUEUES = 8


def java_queue(key: str, n: int) -> int:
    """SelectMessageQueueByHash as Java computes it: `hashCode % n` keeps the dividend's sign
    (math.fmod), then Math.abs."""
    return abs(int(math.fmod(java_string_hash(key), n)))


def pull_queue(cl: BlockingClient, queue_id: int) -> list[Any]:
    """Every message stored in one queue of TOPIC (32 per pull)."""
    out: list[Any] = []
    offset = 0
    for _ in range(100):  # bounded: the test stores a few hundred rows
        resp = cl.invoke(pull_cmd("sink_check", TOPIC, queue_id, offset), RPC_TIMEOUT_S)
        if resp.code != 0:
            return out
        msgs = decode_messages(bytes(resp.body))
        if not msgs:
            return out
        out += msgs
        offset = int((resp.ext_fields or {})["nextBeginOffset"])
    raise AssertionError("queue never ended")


def test_keyed_rows_land_on_java_s_hash_queue_and_each_is_stored_once(
    local_cluster: Callable[..., launch.LocalCluster],
) -> None:
    cluster = start_real(local_cluster)
    ns = namesrv_addr(cluster)
    with BlockingClient(broker_addr(cluster)) as cl:
        assert cl.invoke(create_topic_cmd(TOPIC, QUEUES), RPC_TIMEOUT_S).code == 0
        assert wait_route(ns, TOPIC, True, 30.0).code == 0
        keys = [f"key-{i}" for i in range(40)]
        negative = [k for k in keys if java_string_hash(k) % QUEUES != java_queue(k, QUEUES)]
        assert negative, "no key here has a negative hashCode: the test would not tell"
        rows = [OutMessage(TOPIC, f"{k}:{n}".encode(), {"KEYS": k}, sharding_key=k)
                for n in range(5) for k in keys]  # fmt: skip
        rows += [OutMessage(TOPIC, f"free:{n}".encode(), {}) for n in range(60)]
        sender = TaskSender((f"{ns[0]}:{ns[1]}",), "sink_pg", batch_size=8)
        try:
            stats = sender.send_all(rows)
        finally:
            sender.close()
        assert stats.messages == len(rows)
        seen: dict[bytes, int] = {}  # body -> queue id
        in_queue_order: dict[str, list[int]] = {}  # key -> its rows' numbers, as stored
        for qid in range(QUEUES):
            for m in pull_queue(cl, qid):
                body = bytes(m.body)
                assert body not in seen, f"{body!r} stored twice"
                seen[body] = qid
                key, _, n = body.decode().partition(":")
                if key != "free":
                    in_queue_order.setdefault(key, []).append(int(n))
    assert len(seen) == len(rows)
    for k in keys:
        want = java_queue(k, QUEUES)
        got = {seen[f"{k}:{n}".encode()] for n in range(5)}
        assert got == {want}, f"{k}: queues {got}, Java's hash queue {want}"
        assert in_queue_order[k] == list(range(5)), f"{k} stored out of row order"
