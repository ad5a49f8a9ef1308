"""broker_bench --bound: the one-process send bound answers A and B and leaves nothing running."""

from __future__ import annotations

import argparse

from deploy.bench import send_bound
from deploy.bench.broker_bench import bench_a, bench_b, run_bound
from deploy.procinfo import is_zombie


def test_bound_server_serves_a_and_b_then_stops() -> None:
    small = {"mappedFileSizeCommitLog": str(16 << 20)}  # the test's tmp space, not 2 GiB
    with send_bound.inline_server(("BenchA", "BenchB"), small) as (addr, pids):
        assert len(pids) == 2  # the server and the IndexService process its store spawned
        rate, cpu = bench_a(addr, 30, pids)  # every reply is checked: code 0, its opaque
        assert rate > 0 and cpu > 0
        rate, cpu = bench_b(addr, 2, pids, 2)  # msgpack headers through the same core
        assert rate > 0 and cpu > 0
    assert not [p for p in pids if not is_zombie(p)]  # is_zombie: or gone


def test_run_bound_reports_every_row() -> None:
    small = {"mappedFileSizeCommitLog": str(16 << 20)}
    got = run_bound(argparse.Namespace(runs=1, a=20, b=1), small)
    for key in ("raw", "A", "A_ratio", "A_cpu", "B", "B_cpu", "Bm", "Bm_cpu"):
        assert len(got[key]) == 1 and got[key][0] > 0, key
    assert "B_cpu:bound" in got


def test_a_count_of_zero_skips_a_and_keeps_the_raw_echo() -> None:
    small = {"mappedFileSizeCommitLog": str(16 << 20)}
    got = run_bound(argparse.Namespace(runs=1, a=0, b=1), small)
    assert not {"A", "A_ratio", "A_cpu"} & set(got)  # "--a 0 = skip" (it once ran 1,000)
    assert got["raw"][0] > 0 and got["B"][0] > 0
