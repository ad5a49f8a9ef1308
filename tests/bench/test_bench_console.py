"""console_bench: a small cluster's pages are timed and reported, each with a median inside
its own spread (no timed assertion: the figures are for the note and the README), and nothing
is left running."""

from __future__ import annotations

import pytest

from tests.bench import console_bench

pytestmark = pytest.mark.integration


def test_console_bench_reports_every_page(capsys: pytest.CaptureFixture[str]) -> None:
    assert console_bench.main(["--topics", "3", "--groups", "2", "--runs", "2",
                               "--per-topic", "2"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("/")]
    assert [r.split()[0] for r in rows] == [
        "/", "/topics", "/topic/BenchTopic0000", "/groups", "/group/bench_group_000",
        "/messages?topic=BenchTopic0000&by=time", "/messages?topic=BenchTopic0000&by=key&key=k1",
        "/producers", "/acl", "/dlq", "/trace"]
    for row in rows:  # median, then min-max, each a figure in ms; the goal's verdict after
        _path, median, spread, *verdict = row.split()
        low, high = (float(x) for x in spread.split("-"))
        assert 0 < low <= float(median) <= high, row
        assert " ".join(verdict) in ("< 300 ms: met", "< 300 ms: NOT met"), row


def test_console_bench_refuses_bad_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert console_bench.main(["--topics", "1", "--groups", "2"]) == 2
    assert "--topics >= --groups" in capsys.readouterr().err
