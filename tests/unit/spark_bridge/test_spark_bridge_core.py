"""SparkBridgeCore driven without sockets: its calls answered from a table of queues."""

from __future__ import annotations

import json
from typing import Any

from actors.core import Request
from actors.spark_bridge.core import KV_KEY, KV_NAMESPACE, SparkBridgeCore
from actors.spark_bridge.lookups import Call
from actors.spark_bridge.wire import loads, request
from protocol.bodies import BrokerData, QueueData, TopicRouteData
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode, SparkBridgeCode
from protocol.command import RemotingCommand

NS = "127.0.0.1:9876"
ADDR = {"broker-a": "10.0.0.1:10911", "broker-b": "10.0.0.2:10911"}


class Outbox:
    def __init__(self) -> None:
        self.sent: list[tuple[int, RemotingCommand]] = []

    def send(self, conn_id: int, cmd: RemotingCommand) -> None:
        self.sent.append((conn_id, cmd))

    def call(self, conn_id: int, cmd: RemotingCommand) -> None:
        self.sent.append((conn_id, cmd))

    def close_conn(self, conn_id: int) -> None:
        pass


class Cluster:
    """Answers the core's calls: routes, min / max offsets, offset commits, KV puts."""

    def __init__(self, queues: dict[tuple[str, int], tuple[int, int]]) -> None:
        self.queues = queues  # (broker, qid) -> (min, max)
        self.commits: dict[tuple[str, str, int], int] = {}
        # 4.9.8 ConsumerOffsetManager: (broker, topic@group) -> queueId -> offset; a commit
        # finding no map builds one and puts it, so the first commits of one key handled in
        # the same round (at once, on its 32 threads) keep only the last one's queue
        self.offset_maps: dict[tuple[str, str], dict[int, int]] = {}
        self._new_maps: list[tuple[tuple[str, str], dict[int, int]]] = []
        self.kv: dict[str, str] = {}
        self.down: set[str] = set()

    def answer(self, call: Call) -> RemotingCommand | None:
        cmd, ext = call.cmd, call.cmd.ext_fields or {}
        if call.addr in self.down:
            return None
        if cmd.code == RC.GET_ROUTEINFO_BY_TOPIC:
            if ext["topic"] != "T":
                return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, "no route")
            counts: dict[str, int] = {}
            for b, q in self.queues:
                counts[b] = max(counts.get(b, 0), q + 1)
            route = TopicRouteData(
                queue_datas=[QueueData(b, n, n, 6) for b, n in sorted(counts.items())],
                broker_datas=[BrokerData("c", b, {0: ADDR[b]}) for b in sorted(counts)])
            return cmd.make_response(ResponseCode.SUCCESS, None, None, route.to_json())
        broker = next(b for b, a in ADDR.items() if a == call.addr) if call.addr != NS else ""
        if cmd.code in (RC.GET_MIN_OFFSET, RC.GET_MAX_OFFSET):
            lo, hi = self.queues[(broker, int(ext["queueId"]))]
            value = lo if cmd.code == RC.GET_MIN_OFFSET else hi
            return cmd.make_response(ResponseCode.SUCCESS, None, {"offset": str(value)})
        if cmd.code == RC.UPDATE_CONSUMER_OFFSET:
            qid, offset = int(ext["queueId"]), int(ext["commitOffset"])
            self.commits[(ext["consumerGroup"], broker, qid)] = offset
            key = (broker, f"{ext['topic']}@{ext['consumerGroup']}")
            if key in self.offset_maps:
                self.offset_maps[key][qid] = offset
            else:
                self._new_maps.append((key, {qid: offset}))
            return cmd.make_response(ResponseCode.SUCCESS)
        if cmd.code == RC.PUT_KV_CONFIG:
            self.kv[f"{ext['namespace']}/{ext['key']}"] = ext["value"]
            return cmd.make_response(ResponseCode.SUCCESS)
        raise AssertionError(f"unexpected call {cmd.code}")


    def answer_round(self, calls: list[Call]) -> list[RemotingCommand | None]:
        """Calls sent together are handled at once: the maps they build are put in turn."""
        self._new_maps = []
        answers = [self.answer(call) for call in calls]
        for key, new in self._new_maps:
            self.offset_maps[key] = new  # the later put wins
        return answers


def run(core: SparkBridgeCore, cluster: Cluster, now: int = 0) -> None:
    """Answer calls until the core asks for nothing more (down addresses: connection lost)."""
    for _ in range(50):
        calls = core.take_calls()
        if not calls:
            return
        for call, resp in zip(calls, cluster.answer_round(calls), strict=True):
            if resp is None:
                core.on_conn_lost(call.addr, "refused", now)
            else:
                core.on_response(call.addr, resp, now)
    raise AssertionError("the core kept asking")


def ask(core: SparkBridgeCore, cluster: Cluster, out: Outbox, code: int,
        **body: Any) -> RemotingCommand:
    body.setdefault("options", {"nameServer": NS, "topic": "T"})
    body.setdefault("query", {"id": "q1", "kind": "stream"})
    req = request(code, body)
    got = core.process(Request(7, ("127.0.0.1", 1), req, 0), 0)
    if got is None:
        run(core, cluster)
        got = next(c for conn, c in out.sent if c.opaque == req.opaque)
    return got


def make(queues: dict[tuple[str, int], tuple[int, int]]) -> tuple[SparkBridgeCore, Cluster,
                                                                  Outbox]:
    out = Outbox()
    core = SparkBridgeCore((NS,), "127.0.0.1:10930", out, call_timeout_ms=1000)
    cluster = Cluster(queues)
    core.tick(0)  # the first tick registers the bridge with the name server
    run(core, cluster)
    assert cluster.kv == {f"{KV_NAMESPACE}/{KV_KEY}": "127.0.0.1:10930"}
    return core, cluster, out


def test_plan_batch_partitions_per_queue_and_split() -> None:
    core, cluster, out = make({("broker-a", 0): (0, 10), ("broker-a", 1): (2, 2),
                               ("broker-b", 0): (0, 25)})
    resp = ask(core, cluster, out, SparkBridgeCode.SPARK_PLAN_BATCH, query={"id": "b",
               "kind": "batch"}, options={"nameServer": NS, "topic": "T",
                                          "maxRecordsPerPartition": "10"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    parts = loads(resp)["partitions"]
    assert [(p["broker"], p["queueId"], p["start"], p["end"]) for p in parts] == [
        ("broker-a", 0, 0, 10), ("broker-b", 0, 0, 9), ("broker-b", 0, 9, 17),
        ("broker-b", 0, 17, 25)]
    assert {p["addr"] for p in parts} == set(ADDR.values())


def test_errors_come_back_as_codes_with_remarks() -> None:
    core, cluster, out = make({("broker-a", 0): (0, 10)})
    r = ask(core, cluster, out, SparkBridgeCode.SPARK_INITIAL_OFFSET,
            options={"nameServer": NS, "topic": "Nope"})
    assert r.code == ResponseCode.TOPIC_NOT_EXIST and "'Nope' does not exist" in r.remark
    r = ask(core, cluster, out, SparkBridgeCode.SPARK_PLAN_BATCH,
            options={"nameServer": NS, "topic": "T", "startingOffsets": "{x"})
    assert r.code == SparkBridgeCode.SPARK_BAD_OPTIONS and "startingOffsets" in r.remark
    r = ask(core, cluster, out, SparkBridgeCode.SPARK_PLAN_BATCH, options={
        "nameServer": NS, "topic": "T", "startingOffsets": json.dumps(
            {"T": {"broker-a": {"0": 11}}})})
    assert r.code == SparkBridgeCode.SPARK_DATA_LOSS and "beyond" in r.remark
    cluster.down.add(ADDR["broker-a"])
    r = ask(core, cluster, out, SparkBridgeCode.SPARK_PLAN_BATCH)
    assert r.code == SparkBridgeCode.SPARK_UNREACHABLE and "broker-a" in r.remark
    cluster.down.add(NS)
    r = ask(core, cluster, out, SparkBridgeCode.SPARK_PLAN_BATCH)
    assert r.code == SparkBridgeCode.SPARK_UNREACHABLE and "no name server answered" in r.remark
    r = core.process(Request(7, ("h", 1), RemotingCommand.request(31001, None, b"[1]"), 0), 0)
    assert r is not None and r.code == ResponseCode.SYSTEM_ERROR and "bad request" in r.remark


def test_a_silent_broker_times_out() -> None:
    core, cluster, out = make({("broker-a", 0): (0, 10)})
    req = request(SparkBridgeCode.SPARK_INITIAL_OFFSET,
                  {"options": {"nameServer": NS, "topic": "T"}, "query": {"id": "q"}})
    assert core.process(Request(7, ("h", 1), req, 0), 0) is None
    route_calls = core.take_calls()
    for c, resp in zip(route_calls, cluster.answer_round(route_calls), strict=True):
        assert resp is not None
        core.on_response(c.addr, resp, 0)
    assert core.take_calls()  # asked the broker, which never answers
    assert core.tick(500) <= 500
    core.tick(1000)
    reply = next(c for _conn, c in out.sent if c.opaque == req.opaque)
    assert reply.code == SparkBridgeCode.SPARK_UNREACHABLE and "no answer within" in reply.remark


def test_stream_latest_limits_picks_up_queues_and_commits_the_group() -> None:
    core, cluster, out = make({("broker-a", 0): (0, 100), ("broker-a", 1): (0, 10)})
    opts = {"nameServer": NS, "topic": "T", "groupId": "g", "startingOffsets": "earliest"}
    first = loads(ask(core, cluster, out, SparkBridgeCode.SPARK_INITIAL_OFFSET,
                      options=opts))["offset"]
    assert first == {"T": {"broker-a": {"0": 0, "1": 0}}}
    got = loads(ask(core, cluster, out, SparkBridgeCode.SPARK_LATEST_OFFSET, options=opts,
                    start=first, maxRows=55))
    assert got["offset"] == {"T": {"broker-a": {"0": 50, "1": 5}}}
    assert got["latest"] == {"T": {"broker-a": {"0": 100, "1": 10}}}
    cluster.queues[("broker-b", 0)] = (0, 4)  # a new broker
    got = loads(ask(core, cluster, out, SparkBridgeCode.SPARK_LATEST_OFFSET, options=opts,
                    start=got["offset"], cap={"T": {"broker-a": {"0": 60, "1": 10}}}))
    assert got["offset"] == {"T": {"broker-a": {"0": 60, "1": 10}, "broker-b": {"0": 0}}}
    assert cluster.commits == {("g", "broker-a", 0): 50, ("g", "broker-a", 1): 5}
    parts = loads(ask(core, cluster, out, SparkBridgeCode.SPARK_PLAN_PARTITIONS, options=opts,
                      start={"T": {"broker-a": {"0": 50, "1": 5}}},
                      end={"T": {"broker-a": {"0": 60, "1": 10}, "broker-b": {"0": 3}}}))
    assert sorted((p["broker"], p["queueId"], p["start"], p["end"])
                  for p in parts["partitions"]) == [("broker-a", 0, 50, 60),
                                                    ("broker-a", 1, 5, 10), ("broker-b", 0, 0, 3)]
    ask(core, cluster, out, SparkBridgeCode.SPARK_COMMIT, options=opts,
        end={"T": {"broker-a": {"0": 60, "1": 10}, "broker-b": {"0": 3}}})
    assert cluster.commits[("g", "broker-b", 0)] == 3
    listed = loads(ask(core, cluster, out, SparkBridgeCode.SPARK_LIST_QUERIES))["queries"]
    assert [(q["name"], q["batches"], q["lag"]) for q in listed] == [("g", 1, 41)]


def test_the_first_commits_of_a_topic_and_group_do_not_race_on_the_broker() -> None:
    core, cluster, out = make({("broker-a", 0): (0, 9), ("broker-a", 1): (0, 9),
                               ("broker-a", 2): (0, 9), ("broker-b", 0): (0, 9)})
    opts = {"nameServer": NS, "topic": "T", "groupId": "g"}
    end = {"T": {"broker-a": {"0": 6, "1": 7, "2": 8}, "broker-b": {"0": 9}}}
    got = loads(ask(core, cluster, out, SparkBridgeCode.SPARK_COMMIT, options=opts, end=end))
    assert got == {"failed": []}
    assert cluster.offset_maps == {("broker-a", "T@g"): {0: 6, 1: 7, 2: 8},
                                   ("broker-b", "T@g"): {0: 9}}
    # later progress lands in the maps the first commits built
    got = loads(ask(core, cluster, out, SparkBridgeCode.SPARK_LATEST_OFFSET, options=opts,
                    start={"T": {"broker-a": {"0": 7, "1": 8, "2": 9}, "broker-b": {"0": 9}}}))
    assert cluster.offset_maps[("broker-a", "T@g")] == {0: 7, 1: 8, 2: 9}


def test_a_group_offset_a_broker_did_not_record_is_sent_with_the_next_commit() -> None:
    core, cluster, out = make({("broker-a", 0): (0, 10), ("broker-b", 0): (0, 10)})
    opts = {"nameServer": NS, "topic": "T", "groupId": "g", "startingOffsets": "earliest"}
    first = loads(ask(core, cluster, out, SparkBridgeCode.SPARK_INITIAL_OFFSET,
                      options=opts))["offset"]
    end = loads(ask(core, cluster, out, SparkBridgeCode.SPARK_LATEST_OFFSET, options=opts,
                    start=first))["offset"]
    assert end == {"T": {"broker-a": {"0": 10}, "broker-b": {"0": 10}}}
    cluster.down.add(ADDR["broker-b"])  # left out of this round's heads: no master known
    ask(core, cluster, out, SparkBridgeCode.SPARK_LATEST_OFFSET, options=opts, start=end)
    assert cluster.commits == {("g", "broker-a", 0): 10}
    cluster.down.clear()
    got = loads(ask(core, cluster, out, SparkBridgeCode.SPARK_COMMIT, options=opts, end=end))
    assert got == {"failed": []}
    assert cluster.commits == {("g", "broker-a", 0): 10, ("g", "broker-b", 0): 10}
