"""pytest-benchmark smoke tests of the store hot paths (numbers: tests/bench/store_bench.py)."""

from __future__ import annotations

from tests.bench import store_bench


def test_bench_put_single(benchmark, tmp_path):
    rate = benchmark.pedantic(store_bench.bench_single, args=(str(tmp_path / "s"), 2000), rounds=1)
    assert rate > 0


def test_bench_put_batch(benchmark, tmp_path):
    rate = benchmark.pedantic(store_bench.bench_batch, args=(str(tmp_path / "b"), 2048), rounds=1)
    assert rate > 0


def test_bench_get(benchmark, tmp_path):
    rate = benchmark.pedantic(store_bench.bench_get, args=(str(tmp_path / "g"), 2000), rounds=1)
    assert rate > 0


def test_bench_recovery_small(tmp_path):
    abnormal, clean = store_bench.bench_recovery(str(tmp_path / "r"), 0.01)
    assert abnormal >= 0 and clean >= 0
