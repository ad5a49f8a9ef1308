"""The Spark source's option parsing and offset arithmetic (pure: no Spark, no sockets)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.spark_bridge import planner
from actors.spark_bridge.options import SourceOptionError, parse_source_options
from actors.spark_bridge.planner import DataLossError, QueueHead, QueueKey, QueueRange
from actors.spark_bridge.registry import QueryRegistry

NS = "127.0.0.1:9876"


def opts(streaming: bool = False, **kw: str) -> object:
    return parse_source_options({"nameServer": NS, "topic": "T", **kw}, streaming=streaming)


def test_defaults_and_aliases() -> None:
    o = parse_source_options({"namesrvAddr": "h:1;h:2", "SUBSCRIBE": "A, B,A"}, streaming=True)
    assert o.name_servers == ("h:1", "h:2") and o.topics == ("A", "B")
    assert o.starting == "latest" and o.tags is None and o.fail_on_data_loss
    b = parse_source_options({"nameServer": NS, "topic": "A"}, streaming=False)
    assert b.starting == "earliest" and b.ending == "latest"
    assert parse_source_options({"nameServer": NS, "topic": "A", "subExpression": "x || y"},
                                streaming=False).tags == frozenset({"x", "y"})


@pytest.mark.parametrize(("kw", "streaming", "message"), [
    ({"nameServer": ""}, False, "nameServer is required"),
    ({"topic": "bad topic"}, False, "is not a valid RocketMQ topic name"),
    ({"startingOffsets": "latest"}, False, "startingOffsets=latest is not allowed for a batch"),
    ({"endingOffsets": "earliest"}, False, "endingOffsets=earliest is not allowed"),
    ({"endingOffsets": "latest"}, True, "endingOffsets is for batch reads only"),
    ({"startingOffsets": "{"}, False, "startingOffsets is neither earliest, latest nor"),
    ({"startingOffsets": '{"Other": {"b": {"0": 1}}}'}, False, "names topic 'Other'"),
    ({"startingOffsets": '{"T": {"b": {"x": 1}}}'}, False, "queue id 'x' of T/b"),
    ({"startingOffsets": '{"T": {"b": {"0": -3}}}'}, False, "offset -3 of T/b/0 must be"),
    ({"startingOffsets": '{"T": {"b": {"0": -1}}}'}, False, "-1 (latest) is not allowed"),
    ({"endingOffsets": '{"T": {"b": {"0": -2}}}'}, False, "-2 (earliest) is not allowed"),
    ({"startingOffsets": '{"T": {"b": {"0": true}}}'}, False, "offset True of T/b/0"),
    ({"maxOffsetsPerTrigger": "0"}, True, "maxOffsetsPerTrigger must be >= 1"),
    ({"minPartitions": "many"}, False, "minPartitions 'many' is not an integer"),
    ({"failOnDataLoss": "maybe"}, False, "failOnDataLoss must be true or false"),
    ({"startingTimestamp": "5", "endingTimestamp": "5"}, False, "must be after"),
    ({"pullBatchSize": "5000"}, False, "pullBatchSize must be in 1..1024"),
    ({"bridge": "nohost"}, False, "bridge 'nohost' is not host:port"),
])  # fmt: skip
def test_bad_options_are_named(kw: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(SourceOptionError, match=None) as info:
        opts(streaming, **kw)
    assert message in str(info.value)


def _heads(spec: dict[tuple[str, int], tuple[int, int]]) -> dict[QueueKey, QueueHead]:
    return {QueueKey("T", b, q): QueueHead(QueueKey("T", b, q), f"{b}:1", lo, hi)
            for (b, q), (lo, hi) in spec.items()}  # fmt: skip


def test_resolve_names_and_defaults() -> None:
    heads = _heads({("a", 0): (5, 50), ("a", 1): (0, 10), ("b", 0): (0, 7)})
    spec = {"T": {"a": {"0": -2, "1": 4}}}
    start = planner.resolve(spec, heads, default=-2)
    assert start == {QueueKey("T", "a", 0): 5, QueueKey("T", "a", 1): 4,
                     QueueKey("T", "b", 0): 0}  # fmt: skip
    assert planner.resolve("latest", heads, default=-2)[QueueKey("T", "b", 0)] == 7
    by_time = {QueueKey("T", "b", 0): 3}
    assert planner.resolve("earliest", heads, default=-2, by_time=by_time)[
        QueueKey("T", "b", 0)] == 3
    planner.check_names(spec, heads, "startingOffsets")
    with pytest.raises(planner.PlanError, match="that queue does not exist"):
        planner.check_names({"T": {"a": {"9": 1}}}, heads, "startingOffsets")


def test_data_loss_checks() -> None:
    head = _heads({("a", 0): (5, 50)})[QueueKey("T", "a", 0)]
    with pytest.raises(DataLossError, match="5 message"):
        planner.check_start(head.key, 0, head, True, "startingOffsets")
    assert planner.check_start(head.key, 0, head, False, "startingOffsets") == 5
    with pytest.raises(DataLossError, match="beyond the queue's max offset 50"):
        planner.check_start(head.key, 51, head, True, "startingOffsets")
    assert planner.check_end(head.key, 99, head, False) == 50


def test_rate_limit_shares_by_backlog_and_never_starves() -> None:
    k = [QueueKey("T", "a", i) for i in range(3)]
    start = {k[0]: 0, k[1]: 0, k[2]: 100}
    end = {k[0]: 1000, k[1]: 1, k[2]: 100}
    got = planner.rate_limit(start, end, 100)
    assert got[k[1]] == 1  # a share below one still gets one
    assert got[k[0]] == 99 and got[k[2]] == 100
    assert planner.rate_limit(start, end, 5000) == end
    even = dict.fromkeys(k, 0)
    got = planner.rate_limit(even, dict.fromkeys(k, 3), 5)  # 5/3 each: 1 + the leftover 2
    assert sorted(got.values()) == [1, 2, 2]


@given(st.lists(st.integers(0, 500), min_size=1, max_size=6), st.integers(1, 300))
def test_rate_limit_bound(sizes: list[int], limit: int) -> None:
    keys = [QueueKey("T", "a", i) for i in range(len(sizes))]
    start = dict.fromkeys(keys, 10)
    end = {k: 10 + s for k, s in zip(keys, sizes, strict=True)}
    got = planner.rate_limit(start, end, limit)
    taken = sum(got[k] - start[k] for k in keys)
    assert all(start[k] <= got[k] <= end[k] for k in keys)
    assert taken <= max(limit, 0) + len(keys)  # Kafka's rounding up of tiny shares
    assert taken >= min(limit, sum(sizes))  # never a stray micro-batch of the rounding


@given(st.lists(st.integers(0, 40), min_size=1, max_size=5), st.integers(1, 17),
       st.one_of(st.none(), st.integers(1, 20)))
def test_split_covers_each_range_exactly(sizes: list[int], max_records: int,
                                         min_parts: int | None) -> None:
    ranges = [QueueRange(QueueKey("T", "a", i), "a:1", 3, 3 + s) for i, s in enumerate(sizes)]
    parts = planner.split_ranges(ranges, min_parts, max_records)
    for r in ranges:
        mine = sorted((p.start, p.end) for p in parts if p.key == r.key)
        covered = [o for s, e in mine for o in range(s, e)]
        assert covered == list(range(r.start, r.end))
        assert all(e - s <= max_records and e > s for s, e in mine)


def test_flatten_nest_round_trip() -> None:
    offs = {"T": {"a": {"0": 1, "10": 2}, "b": {"3": 4}}, "U": {"a": {"0": 0}}}
    assert planner.nest(planner.flatten(offs)) == json.loads(json.dumps(offs))


def test_registry_progress_lag_and_restart() -> None:
    reg = QueryRegistry(ttl_ms=1000, detached_ttl_ms=100)
    k = QueueKey("T", "a", 0)
    info = reg.touch({"id": "q1", "kind": "stream", "name": "orders"}, ("T",), "g", 0)
    reg.note_start(info, {k: 5})
    reg.note_latest(info, {k: 25})
    assert info.lag() == 20
    assert reg.note_progress(info, {k: 15}) == {k: 15}
    assert reg.note_progress(info, {k: 10}) == {}  # never backwards
    assert reg.note_commit(info, {k: 25}) == {k: 25} and info.batches == 1
    assert reg.rows(10)[0]["lag"] == 0
    reg.touch({"id": "q2", "kind": "stream", "name": "orders"}, ("T",), "g", 20)
    assert [r["id"] for r in reg.rows(20)] == ["q2"]  # the restarted query replaced it
    assert reg.expire(2000) == ["q2"]
