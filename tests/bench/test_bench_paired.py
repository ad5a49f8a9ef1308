"""The paired B benchmark (tests.bench.paired_b) against two real brokers: every slot's sends
reach the broker it was timed on, and the output names both sides and their ratio. No timing
is asserted."""

from __future__ import annotations

import logging
import secrets
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from deploy import launch, procinfo
from deploy.wire import BlockingClient
from protocol.codes import RequestCode
from protocol.command import RemotingCommand
from tests.bench import paired_b
from tests.integration.e2e_helpers import broker_addr, start_real, wait_until

pytestmark = pytest.mark.integration


def _stored(addr: tuple[str, int]) -> int:
    """Messages in BenchB's four queues."""
    total = 0
    with BlockingClient(addr) as cl:
        for q in range(4):
            r = cl.invoke(RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": paired_b.TOPIC, "queueId": str(q)}), 10)
            assert r.code == 0, (q, r.code, r.remark)
            total += int((r.ext_fields or {})["offset"])
    return total


def test_paired_b_alternates_slots_between_two_brokers(
    local_cluster: Callable[..., launch.LocalCluster], caplog: Any
) -> None:
    a = broker_addr(start_real(local_cluster))
    b = broker_addr(start_real(local_cluster))
    caplog.set_level(logging.INFO, logger=paired_b.__name__)
    argv = ["--a", f"{a[0]}:{a[1]}", "--b", f"{b[0]}:{b[1]}", "--slots", "3", "--rounds", "2",
            "--warmup", "0"]  # fmt: skip
    assert paired_b.main(argv) == 0
    per_broker = (1 + 3 * 2) * paired_b.IN_FLIGHT  # the topic's first round, then 3 slots of 2
    assert _stored(a) == per_broker
    assert _stored(b) == per_broker
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("A: ") for line in lines)
    assert any(line.startswith("B: ") for line in lines)
    assert any(line.startswith("A / B paired: ") and "over 3 pairs" in line for line in lines)


@pytest.mark.parametrize("argv", [
    ["--a", "127.0.0.1:1", "--b", "nohost"],
    ["--a", "127.0.0.1:1", "--b", "127.0.0.1:2", "--slots", "0"],
    ["--b", "127.0.0.1:2"],
])
def test_bad_arguments_are_a_usage_error(argv: list[str], capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        paired_b.main(argv)
    assert exc.value.code == 2
    assert "paired_b" in capsys.readouterr().err


def test_a_sides_processes_are_found_by_their_command_line() -> None:
    """--a-match / --b-match: procinfo.pids_with_arg finds exactly the processes whose command
    line holds the text (here one started with a marker argument, stopped by its PID)."""
    marker = f"paired-b-{secrets.token_hex(8)}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        # the exec may still be laying out the new command line when Popen returns
        found = wait_until(lambda: procinfo.pids_with_arg(marker), 5.0, 0.01)
        assert found == [proc.pid]
    finally:
        proc.kill()
        proc.wait(10)
    assert procinfo.pids_with_arg(marker) == []
