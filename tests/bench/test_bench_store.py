"""pytest-benchmark smoke tests of the store hot paths (numbers: tests/bench/store_bench.py)."""

from __future__ import annotations

from tests.bench import store_bench


def test_bench_put_single(benchmark, tmp_path):
    rate, disp = benchmark.pedantic(
        store_bench.bench_single, args=(str(tmp_path / "s"), 2000), rounds=1
    )
    assert rate > 0 and disp > 0


def test_bench_put_batch(benchmark, tmp_path):
    rate, disp = benchmark.pedantic(
        store_bench.bench_batch, args=(str(tmp_path / "b"), 2048), rounds=1
    )
    assert rate > 0 and disp > 0


def test_bench_put_index_process(tmp_path):
    rate, disp = store_bench.bench_batch(str(tmp_path / "p"), 2048, index="process")
    assert rate > 0 and disp > 0 and disp != float("inf")


def test_bench_get(benchmark, tmp_path):
    rate = benchmark.pedantic(store_bench.bench_get, args=(str(tmp_path / "g"), 2000), rounds=1)
    assert rate > 0


def test_bench_group_commit_small(tmp_path):
    rate, per_fsync = store_bench.bench_group_commit(str(tmp_path / "gc"), threads=8, per_thread=5)
    assert rate > 0 and per_fsync >= 1


def test_bench_recovery_small(tmp_path):
    abnormal, clean = store_bench.bench_recovery(str(tmp_path / "r"), 0.01)
    assert abnormal >= 0 and clean >= 0


def test_bench_single_writer_commit_small(tmp_path):
    rate, per_flush = store_bench.bench_single_writer_commit(
        str(tmp_path / "gw"), producers=8, rounds=5
    )
    assert rate > 0 and per_flush == 8
