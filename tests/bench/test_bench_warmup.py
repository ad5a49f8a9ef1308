"""The broker benchmark's untimed warm-up and its D workload, against the real broker.

Both brokers of `bench --reference` get the same warm-up (a cold JVM flatters us); the
reference's own run is in test_bench_reference.py. No timing is asserted: only that the warm-up
ran the scenario's workload (the broker stored what it says it moved) until its time was up.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import pytest

from deploy import cli, launch
from deploy.bench.broker_bench import WARMUP_S, build_parser, warm_up
from deploy.bench.consume_bench import QUEUES, bench_d
from deploy.launch import cluster_pids
from deploy.wire import BlockingClient
from protocol.codes import RequestCode
from protocol.command import RemotingCommand
from tests.integration.e2e_helpers import broker_addr, start_real

pytestmark = pytest.mark.integration


def _max_offsets(addr: tuple[str, int], topic: str) -> list[int]:
    """GET_MAX_OFFSET of each of the topic's QUEUES queues."""
    with BlockingClient(addr) as cl:
        out = []
        for q in range(QUEUES):
            r = cl.invoke(RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)}), 10)
            assert r.code == 0, (q, r.code, r.remark)
            out.append(int((r.ext_fields or {})["offset"]))
        return out


def _real(local_cluster: Callable[..., launch.LocalCluster]) -> tuple[tuple[str, int], list[int]]:
    cluster = start_real(local_cluster)
    return broker_addr(cluster), [p for p in cluster_pids(cluster) if p != os.getpid()]


def test_default_warmup_is_at_least_ten_seconds() -> None:
    assert WARMUP_S >= 10.0
    assert build_parser().parse_args([]).warmup == WARMUP_S
    assert build_parser().parse_args(["--warmup", "2"]).warmup == 2.0


@pytest.mark.parametrize("bad", ["-1", "nan", "inf", "ten"])
def test_bad_warmup_is_a_usage_error(bad: str, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "--reference", "--warmup", bad])
    assert exc.value.code == 2
    assert "--warmup" in capsys.readouterr().err


def test_warm_up_runs_the_workload_until_its_time_is_up(
    local_cluster: Callable[..., launch.LocalCluster],
) -> None:
    addr, pids = _real(local_cluster)
    args = argparse.Namespace(a=20, b=1, c=0, d=0)
    spent, moved = warm_up("A", addr, pids, args, 0.3, msgpack=True)
    assert spent >= 0.3  # the loop's own stop condition, not a speed
    assert moved >= 21 and moved % 21 == 0  # whole passes: 20 sends + the topic's first
    assert sum(_max_offsets(addr, "BenchA")) == moved  # the broker stored every one
    spent, moved = warm_up("B", addr, pids, args, 0.0, msgpack=True)
    assert moved == 2 * 2 * 100  # once, JSON and msgpack, 1 round + the topic's first each
    assert sum(_max_offsets(addr, "BenchB")) == moved
    assert warm_up("C", addr, pids, args, 5.0, msgpack=True) == (0.0, 0)  # skipped: --c 0


def test_bench_d_producer_round_robins_the_queues(
    local_cluster: Callable[..., launch.LocalCluster],
) -> None:
    addr, pids = _real(local_cluster)
    p50, p99, cpu = bench_d(addr, 2 * QUEUES, pids, "rr")
    assert 0 < p50 <= p99 and cpu > 0
    assert _max_offsets(addr, "BenchDrr") == [2, 2, 2, 2]  # created empty: 2 sends to each
