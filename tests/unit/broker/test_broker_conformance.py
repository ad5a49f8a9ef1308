"""Spec §1.3/§1.6/§13: every broker answer, error paths included, in all serialize types."""

from __future__ import annotations

import json
from typing import Any

import pytest
from broker_kit import Broker, heartbeat_body, pull_ext, send_ext, wire_cmd

from actors.broker.processors import group_for_code
from actors.core import Request
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.codes import SerializeType
from protocol.command import RemotingCommand

_MQ = (
    b'{"clientId":"c1","consumerGroup":"CG",'
    b'"mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T1"}]}'
)
_TOPIC = {
    "defaultTopic": "TBW102",
    "readQueueNums": 4,
    "writeQueueNums": 4,
    "perm": 6,
    "topicFilterType": "SINGLE_TAG",
    "order": False,
}
_SEND_KEYS = {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
_PULL_KEYS = {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}

# (request code, ext, body, expected response code, required response ext keys)
CASES: list[tuple[int, dict[str, Any] | None, bytes, int, set[str]]] = [
    (RC.SEND_MESSAGE_V2, send_ext("T1"), b"hello", RS.SUCCESS, _SEND_KEYS),
    (RC.SEND_MESSAGE_V2, send_ext("SCHEDULE_TOPIC_XXXX"), b"x", RS.NO_PERMISSION,
     {"MSG_REGION", "TRACE_ON"}),
    (RC.SEND_MESSAGE_V2, send_ext("bad topic"), b"x", RS.SYSTEM_ERROR, {"MSG_REGION", "TRACE_ON"}),
    (RC.SEND_MESSAGE_V2, send_ext("T1", queue_id=99), b"x", RS.SYSTEM_ERROR,
     {"MSG_REGION", "TRACE_ON"}),
    (RC.SEND_MESSAGE_V2, {"a": "PG"}, b"x", RS.SYSTEM_ERROR, set()),
    (RC.HEART_BEAT, None, heartbeat_body("c1", "CG", "T1"), RS.SUCCESS, set()),
    (RC.HEART_BEAT, None, b"{bad", RS.SYSTEM_ERROR, set()),
    (RC.PULL_MESSAGE, pull_ext("T1", sys_flag=0), b"", RS.SUCCESS, _PULL_KEYS),
    (RC.PULL_MESSAGE, pull_ext("T1", sys_flag=0, offset=1), b"", RS.PULL_NOT_FOUND, _PULL_KEYS),
    (RC.PULL_MESSAGE, pull_ext("T1", sys_flag=0, offset=9), b"", RS.PULL_OFFSET_MOVED, _PULL_KEYS),
    (RC.PULL_MESSAGE, pull_ext("T1", "CG", sys_flag=4, sub="TagZ"), b"", RS.PULL_RETRY_IMMEDIATELY,
     _PULL_KEYS),
    (RC.PULL_MESSAGE, pull_ext("NOPE", sys_flag=0), b"", RS.TOPIC_NOT_EXIST, set()),
    (RC.PULL_MESSAGE, {"topic": "T1"}, b"", RS.SYSTEM_ERROR, set()),
    (RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": "CG", "topic": "T1", "queueId": 0}, b"",
     RS.SUCCESS, {"offset"}),
    (RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": "CG"}, b"", RS.SYSTEM_ERROR, set()),
    (RC.UPDATE_CONSUMER_OFFSET,
     {"consumerGroup": "CG", "topic": "T1", "queueId": 0, "commitOffset": 1}, b"", RS.SUCCESS,
     set()),
    (RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"}, b"", RS.SUCCESS, set()),
    (RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "NOPE"}, b"", RS.SYSTEM_ERROR, set()),
    (RC.GET_MAX_OFFSET, {"topic": "T1", "queueId": 0}, b"", RS.SUCCESS, {"offset"}),
    (RC.GET_MIN_OFFSET, {"topic": "NOPE", "queueId": 0}, b"", RS.SUCCESS, {"offset"}),
    (RC.GET_EARLIEST_MSG_STORETIME, {"topic": "T1", "queueId": 0}, b"", RS.SUCCESS, {"timestamp"}),
    (RC.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "T1", "queueId": 0, "timestamp": 0}, b"",
     RS.SUCCESS, {"offset"}),
    (RC.QUERY_MESSAGE,
     {"topic": "T1", "key": "nokey", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**62},
     b"", RS.QUERY_NOT_FOUND, {"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"}),
    (RC.VIEW_MESSAGE_BY_ID, {"offset": 0}, b"", RS.SUCCESS, set()),
    (RC.VIEW_MESSAGE_BY_ID, {"offset": 99999}, b"", RS.SYSTEM_ERROR, set()),
    (RC.UPDATE_AND_CREATE_TOPIC, dict(_TOPIC, topic="NT"), b"", RS.SUCCESS, set()),
    (RC.UPDATE_AND_CREATE_TOPIC, dict(_TOPIC, topic="a" * 128), b"", RS.SYSTEM_ERROR, set()),
    (RC.UPDATE_AND_CREATE_TOPIC, dict(_TOPIC, topic="RMQ_SYS_TRANS_HALF_TOPIC"), b"",
     RS.SYSTEM_ERROR, set()),
    (RC.GET_ALL_TOPIC_CONFIG, None, b"", RS.SUCCESS, set()),
    (RC.LOCK_BATCH_MQ, None, _MQ, RS.SUCCESS, set()),
    (RC.LOCK_BATCH_MQ, None, b"{bad", RS.SYSTEM_ERROR, set()),
    (RC.UNLOCK_BATCH_MQ, None, _MQ, RS.SUCCESS, set()),
    (RC.CONSUMER_SEND_MSG_BACK, {"offset": 0}, b"", RS.SYSTEM_ERROR, set()),
    (RC.UNREGISTER_CLIENT, {"clientID": "c1", "consumerGroup": "CG"}, b"", RS.SUCCESS, set()),
    (4242, None, b"", RS.REQUEST_CODE_NOT_SUPPORTED, set()),
]


def _reframe(cmd: RemotingCommand, st: int) -> RemotingCommand:
    cmd.serialize_type = st
    return RemotingCommand.decode(memoryview(cmd.encode())[4:])


@pytest.mark.parametrize("st", [SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK])
def test_every_answer_carries_opaque_version_type_and_required_keys(
    broker: Broker, st: int
) -> None:
    opaque = -5  # negative opaques must come back unchanged too (§1.3)
    for code, ext, body, want_code, keys in CASES:
        opaque -= 7
        cmd = _reframe(wire_cmd(code, ext, body, opaque=opaque), st)
        resp = broker.cores[group_for_code(code)].process(Request(1, ("127.0.0.1", 4), cmd, 0), 0)
        broker.pump(0)
        if resp is None:  # held for the registration barrier: released through the outbox
            resp = next(c for _, c in broker.outbox.take() if c.is_response)
        broker.outbox.take()
        frame = resp.encode()
        back = RemotingCommand.decode(memoryview(frame)[4:])
        where = f"code {code} ext {ext!r:.60}"
        assert (back.code, back.opaque, back.version) == (want_code, opaque, 409), where
        assert back.is_response and not back.is_oneway, where
        assert back.serialize_type == st, where
        assert keys <= set(back.ext_fields or {}), where
        if st == SerializeType.JSON:
            hlen = int.from_bytes(frame[5:8], "big")  # top byte of header_meta: type 0
            header = json.loads(frame[8 : 8 + hlen])
            assert isinstance(header["extFields"], dict), where  # always present (§1.4 rule 2)
            assert all(isinstance(v, str) for v in header["extFields"].values()), where


def test_oneway_requests_are_never_answered(broker: Broker) -> None:
    for code, ext, body, _, _ in CASES:
        if code in (RC.UPDATE_AND_CREATE_TOPIC,):
            continue
        resp = broker.call(code, ext, body, oneway=True)
        assert resp is None, f"code {code} answered a oneway request"
        assert [c for _, c in broker.outbox.take() if c.is_response] == []


def test_illegal_queue_id_remark_names_the_topic_config_like_java(broker: Broker) -> None:
    broker.call(RC.SEND_MESSAGE_V2, send_ext("T1"), b"x")
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("T1", queue_id=4), b"x", peer=("10.0.0.1", 5))
    assert r.code == RS.SYSTEM_ERROR
    assert r.remark == (
        "request queueId[4] is illegal, TopicConfig [topicName=T1, readQueueNums=4, "
        "writeQueueNums=4, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]"
        " Producer: 10.0.0.1:5"
    )
