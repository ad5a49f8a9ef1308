"""The paired consumer benchmark (tests.bench.paired_consumer) against a real cluster: each
side's passes run in processes of their own and consume all they are given (a pass that does
not fails the run), and the output names both sides and their ratio. No timing is asserted."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deploy import launch
from tests.bench import paired_consumer
from tests.integration.e2e_helpers import broker_addr, namesrv_addr, start_real

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("scenario", "messages", "unit"), [("c", 400, "msgs/s"),
                                                            ("d", 60, "p50")])
def test_paired_consumer_alternates_two_checkouts_passes(
    local_cluster: Callable[..., launch.LocalCluster], caplog: Any, scenario: str,
    messages: int, unit: str,
) -> None:
    cluster = start_real(local_cluster)
    ns, broker = namesrv_addr(cluster), broker_addr(cluster)
    caplog.set_level(logging.INFO, logger=paired_consumer.__name__)
    argv = ["--namesrv", f"{ns[0]}:{ns[1]}", "--broker", f"{broker[0]}:{broker[1]}",
            "--a", str(ROOT), "--b", str(ROOT), "--scenario", scenario, "--pairs", "2",
            "--passes", "1", "--messages", str(messages), "--warmup", "0"]  # fmt: skip
    assert paired_consumer.main(argv) == 0
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(":")[0] for line in lines if line.startswith("pair ")] == \
        ["pair 0", "pair 1"]  # fmt: skip
    assert any(line.startswith("A: ") and unit in line for line in lines)
    assert any(line.startswith("B: ") and unit in line for line in lines)
    assert any(line.startswith("A / B paired (") and "over 2 pairs" in line for line in lines)


@pytest.mark.parametrize("argv", [
    ["--namesrv", "127.0.0.1:1", "--broker", "127.0.0.1:2", "--a", "/", "--b", str(ROOT)],
    ["--namesrv", "nohost", "--broker", "127.0.0.1:2", "--a", str(ROOT), "--b", str(ROOT)],
    ["--namesrv", "127.0.0.1:1", "--broker", "127.0.0.1:2", "--a", str(ROOT), "--b", str(ROOT),
     "--pairs", "0"],
])
def test_bad_arguments_are_a_usage_error(argv: list[str], capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        paired_consumer.main(argv)
    assert exc.value.code == 2
    assert "paired_consumer" in capsys.readouterr().err
