"""GET_SYSTEM_TOPIC_LIST_FROM_NS (304) as the Java 4.9.x admin reads it: the TopicList names
a broker address, which MQClientAPIImpl.getSystemTopicList then asks with code 305."""

from __future__ import annotations

import json

from namesrv_kit import wire_req
from test_namesrv_processor import register

from actors.namesrv.processor import NamesrvProcessor
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS


def test_system_topic_list_names_a_broker_address() -> None:
    p = NamesrvProcessor()
    r = p.process(wire_req(RC.GET_SYSTEM_TOPIC_LIST_FROM_NS, None), 0)
    assert r is not None and json.loads(r.body) == {"topicList": []}  # no broker: no address
    register(p, {"A": {}})
    r = p.process(wire_req(RC.GET_SYSTEM_TOPIC_LIST_FROM_NS, None), 0)
    assert r is not None and r.code == RS.SUCCESS
    assert json.loads(r.body) == {
        "brokerAddr": "127.0.0.1:10911",
        "topicList": ["DefaultCluster", "broker-a"],
    }
