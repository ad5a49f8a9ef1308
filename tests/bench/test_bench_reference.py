"""`actormq bench --reference` runs end to end at tiny sizes (the harness works; no timing),
each scenario warmed alike on both brokers first (a short --warmup: CI stays quick)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from deploy import cli, procinfo

pytestmark = pytest.mark.integration


WARMUP = re.compile(r"(actormq|reference) ([\d.]+) s, ([\d,]+) msgs")
WARMUP_S = 0.3  # the users' default is broker_bench.WARMUP_S (>= 10 s)
CELL = re.compile(r"(?<= )(?:([\d,.]+) \([\d,.]+-[\d,.]+\)|-)(?= |$)")


def _cells(line: str) -> list[str]:
    """The medians of a table row's columns: actormq, reference, their ratio, CPU us/msg of
    actormq and of the reference ("-" where a column has nothing)."""
    return [m.group(1) or "-" for m in CELL.finditer(line[32:])][:5]


def _measured(cell: str) -> bool:
    return cell != "-" and float(cell.replace(",", "")) > 0


def test_bench_reference_runs_every_scenario_against_both_brokers(
    reference_build: Path, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    data = tmp_path / "bench"
    data.mkdir()
    monkeypatch.setenv("AMQ_BENCH_DATA", str(data))  # both brokers' stores and logs go here
    argv = ["bench", "--reference", "--runs", "1", "--a", "20", "--b", "2", "--c", "400",
            "--d", "20", "--e", "0", "--f", "0", "--warmup", str(WARMUP_S)]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    rows = {line[:32].strip(): line for line in out.splitlines()}
    assert "reference = Apache RocketMQ 4.9.8" in out
    for name in ("A send, 1 in flight", "B send, 100 in flight, JSON",
                 "C pull 32, commit on every pull", "C same, no commit flag"):  # fmt: skip
        assert all(_measured(c) for c in _cells(rows[name])), rows[name]  # all five columns
    for name in ("D long-poll + commit, p50 ms", "D same, p99 ms"):  # latencies: no ratio
        actormq, ref, _ratio, *_ = _cells(rows[name])
        assert _measured(actormq) and _measured(ref), rows[name]
    assert all(_measured(c) for c in _cells(rows["D long-poll + commit, p50 ms"])[3:])  # CPU
    assert _measured(_cells(rows["C CPU us/msg actormq / ref"])[0])
    assert _measured(_cells(rows["C commit / no commit"])[0])
    for name in ("A", "B", "C", "D"):  # each scenario was warmed on both brokers, untimed
        warm = {b: (float(s), int(m.replace(",", "")))
                for b, s, m in WARMUP.findall(rows[f"warm-up {name} (untimed)"])}
        assert set(warm) == {"actormq", "reference"}, rows[f"warm-up {name} (untimed)"]
        for secs, msgs in warm.values():
            assert secs >= WARMUP_S and msgs > 0, rows[f"warm-up {name} (untimed)"]
    # both brokers were stopped: no reference process (its command names the store under
    # `data`) and no actor process (a descendant of this one named amq-<role>) is left
    left = [p for p in procinfo.all_pids()
            if not procinfo.is_zombie(p) and _started_by_bench(p, str(data))]  # fmt: skip
    assert not left, left


def _started_by_bench(pid: int, data: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
        with open(f"/proc/{pid}/comm", "rb") as f:
            comm = f.read()
    except OSError:
        return False
    return data.encode() in cmd or (comm.startswith(b"amq-") and _descends_from_us(pid))


def _descends_from_us(pid: int) -> bool:
    me = os.getpid()
    for _ in range(64):  # bounded walk up the parent chain
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            return False
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if pid == me:
            return True
        if pid <= 1:
            return False
    return False
