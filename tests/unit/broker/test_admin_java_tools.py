"""What the Java 4.9.x admin tools read from the broker: GET_TOPIC_STATS_INFO (mqadmin
topicStatus, DefaultMQAdminExt.examineTopicStats) and GET_BROKER_RUNTIME_INFO (mqadmin
clusterList / brokerStatus), AdminBrokerProcessor, RocketMQ 4.9.x."""

from __future__ import annotations

import json
from typing import Any

from protocol.bodies import loads_object_map
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from tests.unit.broker.broker_kit import Broker, send_ext


def _queue_map(body: bytes) -> dict[int, Any]:
    text = body.decode()
    start = text.index('"offsetTable":') + len('"offsetTable":')
    pairs, _ = loads_object_map(text, start)
    assert all(k["topic"] == "T" and k["brokerName"] == "broker-a" for k, _ in pairs)
    return {k["queueId"]: v for k, v in pairs}


def test_topic_stats_lists_every_write_queue(broker: Broker) -> None:
    for i in range(3):
        r = broker.call(RC.SEND_MESSAGE_V2, send_ext("T", queue_id=2), b"x", now_ms=7000 + i)
        assert r is not None and r.code == RS.SUCCESS
    r = broker.call(RC.GET_TOPIC_STATS_INFO, {"topic": "T"})
    assert r is not None and r.code == RS.SUCCESS
    table = _queue_map(r.body)
    assert sorted(table) == [0, 1, 2, 3]  # the auto-created topic's 4 write queues
    assert table[2] == {"lastUpdateTimestamp": 7002, "maxOffset": 3, "minOffset": 0}
    assert table[0] == {"lastUpdateTimestamp": 0, "maxOffset": 0, "minOffset": 0}


def test_topic_stats_of_an_unknown_topic_is_topic_not_exist(broker: Broker) -> None:
    r = broker.call(RC.GET_TOPIC_STATS_INFO, {"topic": "Nope"})
    assert r is not None and r.code == RS.TOPIC_NOT_EXIST
    assert r.remark == "topic[Nope] not exist"


def test_runtime_info_has_the_keys_cluster_list_parses(broker: Broker) -> None:
    r = broker.call(RC.GET_BROKER_RUNTIME_INFO)
    assert r is not None and r.code == RS.SUCCESS
    table = json.loads(r.body)["table"]
    # ClusterListSubCommand: putTps / getTransferedTps are split on " " and the first token, if
    # any (Java's split drops trailing empty tokens), parsed as a double; a window without
    # enough one-second samples yet is an empty token, as StoreStatsService writes it
    for key in ("putTps", "getTransferedTps", "getFoundTps", "getMissTps"):
        tokens = table[key].split(" ")
        assert len(tokens) == 3
        assert all(t == "" or float(t) >= 0.0 for t in tokens), table[key]
    assert all(float(t) >= 0.0 for t in table["getTotalTps"].split(" "))
    # clusterList -m: Long.parseLong of each of these
    for key in ("msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning", "msgPutTotalTodayNow",
                "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning", "msgGetTotalTodayNow",
                "earliestMessageTimeStamp"):  # fmt: skip
        int(table[key])
    float(table["commitLogDiskRatio"])
    for key in ("sendThreadPoolQueueSize", "sendThreadPoolQueueHeadWaitTimeMills",
                "pullThreadPoolQueueSize", "pullThreadPoolQueueHeadWaitTimeMills",
                "pageCacheLockTimeMills", "brokerVersionDesc"):  # fmt: skip
        assert table[key] != ""


def test_runtime_info_earliest_message_time(broker: Broker) -> None:
    def earliest() -> str:
        r = broker.call(RC.GET_BROKER_RUNTIME_INFO)
        assert r is not None
        return str(json.loads(r.body)["table"]["earliestMessageTimeStamp"])

    assert earliest() == "-1"  # empty store, as getEarliestMessageTime answers
    for i in range(2):
        broker.call(RC.SEND_MESSAGE_V2, send_ext("T"), b"x", now_ms=9000 + i)
    assert earliest() == "9000"


def test_min_offset_of_a_queue_never_written_is_zero(broker: Broker) -> None:
    # the Java store creates the consume queue on lookup: minOffset 0, never -1
    # (DefaultLitePullConsumer.seekToBegin / mqadmin printMsg start from it)
    r = broker.call(RC.GET_MIN_OFFSET, {"topic": "Nobody", "queueId": 3})
    assert r is not None and r.code == RS.SUCCESS
    assert r.ext_fields == {"offset": "0"}
    r = broker.call(RC.GET_MAX_OFFSET, {"topic": "Nobody", "queueId": 3})
    assert r is not None and r.ext_fields == {"offset": "0"}


def test_broker_consume_stats_lists_each_group_and_topic(broker: Broker) -> None:
    for i in range(3):
        broker.call(RC.SEND_MESSAGE_V2, send_ext("T", queue_id=1), b"x", now_ms=5000 + i)
    r = broker.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, b'{"groupName":"CG"}')
    assert r is not None and r.code == RS.SUCCESS
    q = {"consumerGroup": "CG", "topic": "T", "queueId": 1, "commitOffset": 1}
    broker.call(RC.UPDATE_CONSUMER_OFFSET, q, oneway=True)
    r = broker.call(RC.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    assert r is not None and r.code == RS.SUCCESS
    text = r.body.decode()
    assert text.startswith('{"brokerAddr":"127.0.0.1:10911","consumeStatsList":[')
    assert text.endswith('],"totalDiff":2}')
    # ConsumeStatsList.consumeStatsList: [{group: [ConsumeStats, ...]}, ...]
    start = text.index('{"CG":[') + len('{"CG":[')
    assert text[start:].startswith('{"consumeTps":0.0,"offsetTable":')
    table = _queue_map(text[start:].encode())  # CG's first (only) ConsumeStats
    assert table[1] == {"brokerOffset": 3, "consumerOffset": 1, "lastTimestamp": 5000}
    assert sorted(table) == [0, 1, 2, 3]
    # isOrder=true: only order topics (T is not one)
    r = broker.call(RC.GET_BROKER_CONSUME_STATS, {"isOrder": "true"})
    assert r is not None and '{"CG":[]}' in r.body.decode()


def test_system_topic_list_from_broker(broker: Broker) -> None:
    r = broker.call(RC.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    assert r is not None and r.code == RS.SUCCESS
    topics = json.loads(r.body)["topicList"]
    want = {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "OFFSET_MOVED_EVENT"}
    assert want <= set(topics)
