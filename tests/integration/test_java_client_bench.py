"""`actormq bench --consumer --java` runs from a clean checkout: the Java 4.9.8 client
(deploy/bench/java/ClientBench.java, compiled against the reference's jars) consumes the same
backlog and the same stamped stream as our PushConsumer, and the table sets them side by side.
A short smoke run (timings are for the benchmark, not for tests)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.integration.e2e_helpers import run_driver

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_consumer_bench_runs_the_java_client_beside_ours(reference_build: Path,
                                                         tmp_path: Path) -> None:  # fmt: skip
    code, _, err = run_driver([sys.executable, "-m", "deploy.bench.consumer_bench", "--java",
                               "--runs", "1", "--c", "3000", "--d", "200", "--e", "0",
                               "--warmup", "1"], tmp_path / "bench", 600, cwd=ROOT)  # fmt: skip
    text = (tmp_path / "bench.out").read_text()
    assert code == 0, f"{err[-3000:]}\n{text}"
    java = re.search(r"C Java 4\.9\.8 DefaultMQPushConsumer\s+([\d,]+) ", text)
    assert java and int(java.group(1).replace(",", "")) > 0, text
    assert re.search(r"C ours / Java .*\s(\d+\.\d\d) ", text), text
    d = re.search(r"D the same into the Java 4\.9\.8 consumer\s+p50 (\d+\.\d+) ", text)
    assert d and float(d.group(1)) > 0, text
