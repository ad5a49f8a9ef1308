"""The clients' requests as values (actors.client.client_requests): what each one sends, read
back through the typed header the broker reads, and how each answer is read."""

from __future__ import annotations

import pytest

from actors.client import client_requests as rq
from actors.client.errors import MQBrokerError
from actors.client.records import PullStatus
from protocol.bodies import HeartbeatData, TopicRouteData
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.headers import PullMessageRequestHeader

# each request's header fields as Java 4.9.8's MQClientAPIImpl puts them on the wire (its
# header classes' field names; null fields left out, Java's primitive unitMode always there)
WIRE = [
    (rq.topic_route("T"), RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}),
    (rq.unregister_client("cid", "pg", None), RC.UNREGISTER_CLIENT,
     {"clientID": "cid", "producerGroup": "pg"}),
    (rq.query_consumer_offset("g", "T", 3), RC.QUERY_CONSUMER_OFFSET,
     {"consumerGroup": "g", "topic": "T", "queueId": "3"}),
    (rq.update_consumer_offset("g", "T", 3, 1 << 40), RC.UPDATE_CONSUMER_OFFSET,
     {"consumerGroup": "g", "topic": "T", "queueId": "3", "commitOffset": str(1 << 40)}),
    (rq.max_offset("T", 1), RC.GET_MAX_OFFSET, {"topic": "T", "queueId": "1"}),
    (rq.min_offset("T", 1), RC.GET_MIN_OFFSET, {"topic": "T", "queueId": "1"}),
    (rq.search_offset("T", 1, 1_700_000_000_000), RC.SEARCH_OFFSET_BY_TIMESTAMP,
     {"topic": "T", "queueId": "1", "timestamp": "1700000000000"}),
    (rq.consumer_id_list("g"), RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g"}),
    (rq.consumer_send_msg_back(4096, "ID", "T", "g", 2, 16), RC.CONSUMER_SEND_MSG_BACK,
     {"offset": "4096", "group": "g", "delayLevel": "2", "originMsgId": "ID",
      "originTopic": "T", "unitMode": "false", "maxReconsumeTimes": "16"}),
    (rq.pull_message(PullMessageRequestHeader("g", "T", 2, 5, 32, 4, 0, 0, 0, "*", "TAG")),
     RC.PULL_MESSAGE,
     {"consumerGroup": "g", "topic": "T", "queueId": "2", "queueOffset": "5",
      "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
      "subVersion": "0", "subscription": "*", "expressionType": "TAG"}),
]


@pytest.mark.parametrize(("req", "code", "ext"), WIRE, ids=lambda v: getattr(v, "name", ""))
def test_every_request_carries_javas_header_fields(req: rq.ClientRequest, code: int,
                                                   ext: dict[str, str]) -> None:  # fmt: skip
    wire = RemotingCommand.decode(req.command().encode()[4:])
    assert (wire.code, wire.ext_fields) == (code, ext)


def test_each_command_is_a_fresh_request() -> None:
    req = rq.max_offset("T", 0)
    assert req.command().opaque != req.command().opaque


def _answer(code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code, ext_fields=ext, body=body)


def test_answers_are_read_as_the_client_reads_them() -> None:
    assert rq.query_consumer_offset("g", "T", 0).parse(_answer(ResponseCode.QUERY_NOT_FOUND),
                                                       "b") == -1
    assert rq.query_consumer_offset("g", "T", 0).parse(_answer(0, {"offset": "7"}), "b") == 7
    assert rq.search_offset("T", 0, 1).parse(_answer(0, {"offset": str(1 << 40)}), "b") == 1 << 40
    assert rq.topic_route("T").parse(_answer(ResponseCode.TOPIC_NOT_EXIST), "ns") is None
    route = TopicRouteData.from_json(b'{"brokerDatas":[],"queueDatas":[]}')
    got = rq.topic_route("T").parse(_answer(0, None, route.to_json()), "ns")
    assert isinstance(got, TopicRouteData)
    assert rq.consumer_id_list("g").parse(_answer(0), "b") == []
    assert rq.heartbeat(HeartbeatData("c")).code == RC.HEART_BEAT


@pytest.mark.parametrize("resp", [_answer(0), _answer(0, {"offset": "x"}),
                                  _answer(ResponseCode.SYSTEM_ERROR, {"offset": "1"})])
def test_a_bad_answer_is_a_broker_error(resp: RemotingCommand) -> None:
    with pytest.raises(MQBrokerError):
        rq.max_offset("T", 0).parse(resp, "b")


def test_a_pull_answer_is_read_with_its_status_and_offsets() -> None:
    head = PullMessageRequestHeader("g", "T", 0, 5, 32, 4, 0, 0, 0)
    offsets = {"nextBeginOffset": "9", "minOffset": "0", "maxOffset": "9",
               "suggestWhichBrokerId": "0"}
    found = rq.pull_message(head).parse(_answer(0, offsets, b"records"), "b")
    assert (found.status, found.next_begin_offset, found.body) == (PullStatus.FOUND, 9,
                                                                   b"records")
    # as a client receives it: the body is read where it lies in the frame, not copied
    frame = memoryview(_answer(0, offsets, b"records").encode())[4:]
    got = rq.pull_message(head).parse(RemotingCommand.decode(frame), "b")
    assert isinstance(got.body, memoryview) and got.body.obj is frame.obj
    assert bytes(got.body) == b"records"
    moved = rq.pull_message(head).parse(_answer(ResponseCode.PULL_OFFSET_MOVED, offsets), "b")
    assert (moved.status, moved.body) == (PullStatus.OFFSET_ILLEGAL, b"")
    with pytest.raises(MQBrokerError):  # no pull status: the group is unknown
        rq.pull_message(head).parse(_answer(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST), "b")
    with pytest.raises(MQBrokerError):  # a FOUND without its offsets
        rq.pull_message(head).parse(_answer(0, None, b"records"), "b")
