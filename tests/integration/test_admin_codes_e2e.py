"""mqadmin's QUERY_CONSUME_QUEUE (queryCq), CLONE_GROUP_OFFSET (cloneGroupOffset) and
QUERY_CONSUME_TIME_SPAN against the real broker over TCP: the admin actor reads the consume
queue the send actor wrote, and a cloned offset reaches the consumer-manage actor."""

from __future__ import annotations

import json

import pytest

from deploy.wire import BlockingClient
from protocol.message import decode_offset_msg_id
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    broker_addr,
    create_topic_cmd,
    msg_props,
    pull_cmd,
    send_cmd,
    simple_cmd,
    start_real,
    wait_until,
)

pytestmark = pytest.mark.integration


def test_query_cq_clone_offset_and_time_span(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "E2EAdminCodes"
    with BlockingClient(broker_addr(cluster)) as cl:
        assert cl.invoke(create_topic_cmd(topic, 2), RPC_TIMEOUT_S).code == 0
        phys = []
        for i in range(3):
            r = cl.invoke(send_cmd(topic, b"m%d" % i, msg_props(tags="TagA")), RPC_TIMEOUT_S)
            assert r.code == 0, r.remark
            phys.append(decode_offset_msg_id(r.ext_fields["msgId"])[2])

        def units() -> list[dict[str, object]] | None:
            r = cl.invoke(simple_cmd(321, topic=topic, queueId=0, index=0, count=10),
                          RPC_TIMEOUT_S)  # fmt: skip
            if r.code != 0 or r.remark:
                return None
            data = json.loads(bytes(r.body)).get("queueData", [])
            return data if len(data) == 3 else None

        got = wait_until(units, 10.0)
        assert got is not None
        assert [u["physicOffset"] for u in got] == phys

        assert cl.invoke(simple_cmd(15, consumerGroup="SRC", topic=topic, queueId=0,
                                    commitOffset=2), RPC_TIMEOUT_S).code == 0  # fmt: skip
        r = cl.invoke(simple_cmd(314, srcGroup="SRC", destGroup="DST", topic=topic,
                                 offline="true"), RPC_TIMEOUT_S)  # fmt: skip
        assert r.code == 0, r.remark

        def dst_offset() -> str | None:
            r = cl.invoke(simple_cmd(14, consumerGroup="DST", topic=topic, queueId=0),
                          RPC_TIMEOUT_S)  # fmt: skip
            off = (r.ext_fields or {}).get("offset")
            return off if r.code == 0 and off == "2" else None

        assert wait_until(dst_offset, 10.0) == "2"

        r = cl.invoke(simple_cmd(303, topic=topic, group="SRC"), RPC_TIMEOUT_S)
        assert r.code == 0, r.remark
        spans = json.loads(bytes(r.body))["consumeTimeSpanSet"]
        assert [s["messageQueue"]["queueId"] for s in spans] == [0, 1]
        s = spans[0]
        assert 0 < s["minTimeStamp"] <= s["consumeTimeStamp"] <= s["maxTimeStamp"]
        assert s["delayTime"] >= 0


def test_stats_items_published_by_the_send_and_pull_actors(local_cluster) -> None:
    """VIEW_BROKER_STATS_DATA (statsAll, the dashboard): the send and pull actors sample their
    counters every 10 s and publish them; the admin actor answers from what they published."""
    cluster = start_real(local_cluster)
    topic = "E2EStats"
    with BlockingClient(broker_addr(cluster)) as cl:
        assert cl.invoke(create_topic_cmd(topic, 1), RPC_TIMEOUT_S).code == 0
        for i in range(5):
            r = cl.invoke(send_cmd(topic, b"s%d" % i, msg_props()), RPC_TIMEOUT_S)
            assert r.code == 0, r.remark
        r = cl.invoke(pull_cmd("E2EStatsG", topic, 0, 0), RPC_TIMEOUT_S)
        assert r.code == 0

        def minute(name: str, key: str) -> dict | None:
            r = cl.invoke(simple_cmd(315, statsName=name, statsKey=key), RPC_TIMEOUT_S)
            if r.code != 0:
                return None
            m = json.loads(bytes(r.body))["statsMinute"]
            return m if m["sum"] == 5 else None

        put = wait_until(lambda: minute("TOPIC_PUT_NUMS", topic), 30.0, 0.5)
        assert put is not None and put["tps"] > 0 and put["avgpt"] == 1.0
        got = wait_until(lambda: minute("GROUP_GET_NUMS", f"{topic}@E2EStatsG"), 30.0, 0.5)
        assert got is not None and got["avgpt"] == 5.0
