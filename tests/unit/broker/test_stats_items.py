"""BrokerStatsManager's stats items (minute / hour / day windows) and VIEW_BROKER_STATS_DATA /
consumeTps answered from what the send and pull actors publish, RocketMQ 4.9.x semantics."""

from __future__ import annotations

import json

from actors.broker.stats_items import (
    DAY_SAMPLE_MS,
    GROUP_GET_NUMS,
    HOUR_SAMPLE_MS,
    MINUTE_SAMPLE_MS,
    TOPIC_PUT_NUMS,
    StatsItemSet,
    window,
)
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from tests.unit.broker.broker_kit import Broker, pull_ext, send_ext


def test_windows_are_first_to_last_snapshot_differences() -> None:
    s = StatsItemSet()
    s.add(TOPIC_PUT_NUMS, "T", 5)  # one call of 5 messages
    assert s.sample(0)  # every series starts
    s.add(TOPIC_PUT_NUMS, "T", 30, 3)
    assert not s.sample(MINUTE_SAMPLE_MS - 1)  # not due
    assert s.sample(MINUTE_SAMPLE_MS)
    rings = s.rings[(TOPIC_PUT_NUMS, "T")]
    # from the zero snapshot one period before the first: 35 messages in 4 calls over 20 s
    assert window(rings["m"]) == {"avgpt": 8.75, "sum": 35, "tps": 1.75}
    assert window(rings["h"]) == {"avgpt": 5.0, "sum": 5, "tps": 5 / 600}  # zero + one
    for k in range(2, 20):  # the minute ring keeps the last 7 snapshots (about a minute)
        s.add(TOPIC_PUT_NUMS, "T", 10)
        s.sample(k * MINUTE_SAMPLE_MS)
    assert len(rings["m"]) == 7 and window(rings["m"])["sum"] == 60
    assert s.sample(HOUR_SAMPLE_MS) and len(rings["h"]) == 3
    assert window(rings["h"])["sum"] == 5 + 30 + 18 * 10
    s.sample(DAY_SAMPLE_MS)
    assert len(rings["d"]) == 3
    assert window([]) == {"avgpt": 0.0, "sum": 0, "tps": 0.0}


def test_view_broker_stats_data_and_consume_tps_from_the_actors(broker: Broker) -> None:
    send, pull = broker.cores["send"], broker.cores["pull"]
    t0 = 1_000_000
    send.tick(t0)
    pull.tick(t0)
    for i in range(6):
        r = broker.call(RC.SEND_MESSAGE_V2, send_ext("StatsT", queue_id=0), b"x" * 100,
                        now_ms=t0 + i)  # fmt: skip
        assert r is not None and r.code == RS.SUCCESS
    r = broker.call(RC.PULL_MESSAGE, pull_ext("StatsT", "StatsG", sub="*", sys_flag=6),
                    now_ms=t0 + 10)  # fmt: skip
    assert r is not None and r.code == RS.SUCCESS
    t1 = t0 + MINUTE_SAMPLE_MS
    send.tick(t1)
    pull.tick(t1)
    assert send.stats._writer.flush() and pull.stats._writer.flush()

    def view(name: str, key: str) -> tuple[int, dict]:
        resp = broker.call(RC.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
        assert resp is not None
        return resp.code, json.loads(bytes(resp.body)) if resp.code == RS.SUCCESS else {}

    code, data = view(TOPIC_PUT_NUMS, "StatsT")
    assert code == RS.SUCCESS and list(data) == ["statsDay", "statsHour", "statsMinute"]
    assert data["statsMinute"] == {"avgpt": 1.0, "sum": 6, "tps": 0.6}
    code, data = view("TOPIC_PUT_SIZE", "StatsT")
    # whole stored records: these six are all the commit log holds
    assert code == RS.SUCCESS and data["statsMinute"]["sum"] == broker.store.max_phy_offset
    code, data = view(GROUP_GET_NUMS, "StatsT@StatsG")
    assert code == RS.SUCCESS and data["statsMinute"] == {"avgpt": 6.0, "sum": 6, "tps": 0.6}
    code, data = view("BROKER_PUT_NUMS", "DefaultCluster")
    assert code == RS.SUCCESS and data["statsMinute"]["sum"] == 6
    resp = broker.call(RC.VIEW_BROKER_STATS_DATA, {"statsName": TOPIC_PUT_NUMS, "statsKey": "No"})
    assert resp is not None and resp.code == RS.SYSTEM_ERROR
    assert resp.remark == "The stats <TOPIC_PUT_NUMS> <No> not exist"

    # GET_CONSUME_STATS's consumeTps is the group's minute GROUP_GET_NUMS TPS (tpsGroupGetNums)
    q = {"consumerGroup": "StatsG", "topic": "StatsT", "queueId": 0, "commitOffset": 6}
    broker.call(RC.UPDATE_CONSUMER_OFFSET, q, oneway=True)
    resp = broker.call(RC.GET_CONSUME_STATS, {"consumerGroup": "StatsG", "topic": "StatsT"})
    assert resp is not None and resp.code == RS.SUCCESS
    assert bytes(resp.body).startswith(b'{"consumeTps":0.6,')


def test_a_new_item_exists_before_its_first_sample(broker: Broker) -> None:
    """A Java StatsItem exists from its first add; its windows read zero until sampled."""
    send = broker.cores["send"]
    t0 = 2_000_000
    send.tick(t0)  # every series sampled: the next minute sample is 10 s away
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("FreshT", queue_id=0), b"x", now_ms=t0 + 1)
    assert r is not None and r.code == RS.SUCCESS
    send.tick(t0 + 2)  # not a sample: the new item alone makes it publish
    assert send.stats._writer.flush()
    ask = {"statsName": TOPIC_PUT_NUMS, "statsKey": "FreshT"}
    resp = broker.call(RC.VIEW_BROKER_STATS_DATA, ask)
    assert resp is not None and resp.code == RS.SUCCESS, resp.remark
    zero = {"avgpt": 0.0, "sum": 0, "tps": 0.0}
    body = json.loads(bytes(resp.body))
    assert body == {"statsDay": zero, "statsHour": zero, "statsMinute": zero}
