"""`actormq bench --floor` (deploy.bench.send_floor): the floor rungs answer every B send, the
ladder names each rung with its ratio to the reference, bad arguments exit 2, and nothing is
left running. No timing is asserted."""

from __future__ import annotations

import subprocess
import sys

import pytest

from deploy.bench import send_floor
from deploy.procinfo import is_zombie


@pytest.mark.parametrize("hop", [False, True])
def test_floor_server_answers_b_then_stops(hop: bool) -> None:
    with send_floor.floor_server(hop) as (addr, pids):
        assert len(pids) == (2 if hop else 1)
        got = send_floor.timed_b(addr, 3, pids)  # BSender checks each answer: code 0, opaque
        assert got["rate"] > 0 and got["cpu"] > 0
        assert got["user"] >= 0 and got["sys"] >= 0
    assert not [p for p in pids if not is_zombie(p)]  # is_zombie: or gone


def test_floor_answers_count_offsets_per_queue_and_refuse_other_requests() -> None:
    from deploy.bench.requests import send_request
    from protocol.command import RemotingCommand

    answers = send_floor.FloorAnswers()
    offsets = []
    for qid in (0, 1, 0):
        frame = memoryview(send_request("BenchB", qid, 0).encode())[4:]
        reply = RemotingCommand.decode(memoryview(answers.answer(frame))[4:])
        assert reply.code == 0 and reply.ext_fields is not None
        assert reply.ext_fields["queueId"] == str(qid)
        offsets.append(int(reply.ext_fields["queueOffset"]))
    assert offsets == [0, 0, 1]
    heartbeat = RemotingCommand.request(34, {})
    with pytest.raises(ValueError):
        answers.answer(memoryview(heartbeat.encode())[4:])


def test_run_gives_each_rung_every_run() -> None:
    got = send_floor.run(("floor", "floor+hop"), runs=2, rounds=2, warmup_s=0)
    assert [len(got["floor"]), len(got["floor+hop"])] == [2, 2]
    table = send_floor.format_ladder(got)
    assert "floor+hop" in table and "2 run(s)" in table


def test_ladder_ratio_is_per_run_against_the_reference() -> None:
    def row(rate: float) -> dict[str, float]:
        return {"rate": rate, "cpu": 10.0, "user": 8.0, "sys": 2.0}

    table = send_floor.format_ladder({"reference": [row(100.0), row(50.0)],
                                      "floor": [row(150.0), row(100.0)]})  # fmt: skip
    floor_line = next(line for line in table.splitlines() if line.startswith("floor "))
    assert "1.75 (1.50-2.00)" in floor_line  # per run: 1.5 and 2.0


@pytest.mark.parametrize("argv", [["--rungs", "nope"], ["--runs", "0"], ["--b", "0"],
                                  ["--warmup", "-1"], ["--rungs", ","]])
def test_bad_arguments_exit_2(argv: list[str]) -> None:
    r = subprocess.run([sys.executable, "-m", "deploy", "bench", "--floor", *argv],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 2, r
    assert "--" in r.stderr
