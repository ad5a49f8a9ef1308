"""Consumer offsets committed the way real consumers commit them (issue #13).

`actormq up` as a user runs it (its own process tree, stopped or SIGKILLed by PID): offsets
piggybacked on PULL_MESSAGE (PullSysFlag bit 0 + commitOffset) are what QUERY_CONSUMER_OFFSET
answers on another connection right after each pull's answer; after a commit-only burst
consumerProgress shows the exact lag; a clean restart keeps every offset; after kill -9 of the
whole broker the offsets are at most the 5 s persistence interval behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from deploy import admin
from deploy.wire import BlockingClient
from tests.integration.conftest import UpProcess, wait_gone
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    create_topic_cmd,
    msg_props,
    pull_cmd,
    send_cmd,
    simple_cmd,
    wait_until,
)

pytestmark = pytest.mark.integration

TOPIC = "OffsetTopic"
GROUP = "offset_cg"
QUEUES = 4
PER_QUEUE = 40
COMMIT = 1 | 4  # PullSysFlag: commit offset, subscription in the request
PERSIST_S = 5.0  # flushConsumerOffsetInterval's default
TIMER_SLACK_S = 1.5  # how late the persistence timer may fire on a loaded host
KILL_LOAD_S = 6.5  # commits before the kill: at least one persistence falls inside


def _query(cl: BlockingClient, queue_id: int, group: str = GROUP) -> int:
    resp = cl.invoke(simple_cmd(14, consumerGroup=group, topic=TOPIC, queueId=queue_id),
                     RPC_TIMEOUT_S)  # fmt: skip
    assert resp.code == 0, (resp.code, resp.remark)
    return int(resp.ext_fields["offset"])


def _commit_pull(cl: BlockingClient, queue_id: int, offset: int, commit: int) -> None:
    resp = cl.invoke(pull_cmd(GROUP, TOPIC, queue_id, offset, max_nums=4, sys_flag=COMMIT,
                              commit_offset=commit), RPC_TIMEOUT_S)  # fmt: skip
    assert resp.code in (0, 19), (resp.code, resp.remark)


def _start(up_process: Callable[..., UpProcess]) -> tuple[UpProcess, tuple[str, int]]:
    up = up_process(echo=False)
    up.wait_ready()
    return up, ("127.0.0.1", up.broker_port)


def _progress(up: UpProcess, capsys: Any) -> dict[int, tuple[int, int, int]]:
    """consumerProgress through the CLI: queue id -> (broker offset, consumer offset, diff)."""
    capsys.readouterr()
    assert admin.main(["consumerProgress", "-n", f"127.0.0.1:{up.ns_port}", "-g", GROUP]) == 0
    rows = {}
    for line in capsys.readouterr().out.splitlines():
        parts = line.split()
        if len(parts) == 6 and parts[0] == TOPIC:
            rows[int(parts[2])] = (int(parts[3]), int(parts[4]), int(parts[5]))
    return rows


def test_piggybacked_offsets_are_read_at_once_survive_restarts_and_kill9(
    up_process: Callable[..., UpProcess], capsys: Any
) -> None:
    up, addr = _start(up_process)
    with BlockingClient(addr) as producer:
        assert producer.invoke(create_topic_cmd(TOPIC, QUEUES), RPC_TIMEOUT_S).code == 0
        reqs = [send_cmd(TOPIC, b"m%d" % i, msg_props(), queue_id=i % QUEUES)
                for i in range(QUEUES * PER_QUEUE)]  # fmt: skip
        assert all(r.code == 0 for r in producer.invoke_many(reqs, RPC_TIMEOUT_S))
        # the topic reaches the pull actor's replica one hop after the creation's answer
        assert wait_until(lambda: producer.invoke(pull_cmd(GROUP, TOPIC, 0, 0),
                                                  RPC_TIMEOUT_S).code == 0, 10.0)  # fmt: skip

    # 1. every piggybacked commit is what another connection reads right after the answer
    committed = {}
    with BlockingClient(addr) as consumer, BlockingClient(addr) as other:
        for step in range(1, PER_QUEUE + 1):
            for qid in range(QUEUES):
                commit = step - qid if step > qid else step  # moves at every step
                _commit_pull(consumer, qid, step % PER_QUEUE, commit)
                assert _query(other, qid) == commit, (step, qid)
                committed[qid] = commit
        # a commit-only burst (UPDATE_CONSUMER_OFFSET, oneway as Java's persistConsumerOffset
        # sends it, the last one awaited) on a third connection
        with BlockingClient(addr) as updater:
            for off in range(PER_QUEUE + 1):
                updater.invoke_oneway(simple_cmd(15, consumerGroup=GROUP, topic=TOPIC,
                                                 queueId=3, commitOffset=off))  # fmt: skip
            last = simple_cmd(15, consumerGroup=GROUP, topic=TOPIC, queueId=3, commitOffset=7)
            assert updater.invoke(last, RPC_TIMEOUT_S).code == 0
        committed[3] = 7
        assert _query(other, 3) == 7
    rows = _progress(up, capsys)
    assert rows == {q: (PER_QUEUE, committed[q], PER_QUEUE - committed[q]) for q in range(QUEUES)}

    # 2. a clean restart keeps every offset
    assert up.stop() == 0
    up, addr = _start(up_process)
    with BlockingClient(addr) as cl:
        assert {q: _query(cl, q) for q in range(QUEUES)} == committed

    # 3. kill -9 of the whole broker: at most the persistence interval behind
    answered: list[tuple[float, int]] = []
    with BlockingClient(addr) as consumer:
        start = time.monotonic()
        commit = 1000
        while time.monotonic() - start < KILL_LOAD_S:
            commit += 1
            _commit_pull(consumer, 0, 0, commit)
            answered.append((time.monotonic(), commit))
    killed_at = time.monotonic()
    killed = up.kill9()
    assert killed and wait_gone(killed, 15.0) == []
    up.proc.wait(10)
    up, addr = _start(up_process)
    with BlockingClient(addr) as cl:
        recovered = _query(cl, 0)
    assert recovered > 1000, "no commit of the last 6.5 s was persisted"
    at = next(t for t, c in answered if c == recovered)
    assert killed_at - at <= PERSIST_S + TIMER_SLACK_S, (killed_at - at, recovered, commit)
    assert up.stop() == 0
