"""The clients' requests as values (actors.client.client_requests): what each one sends, read
back through the typed header the broker reads, and how each answer is read."""

from __future__ import annotations

import pytest

from actors.client import client_requests as rq
from actors.client.errors import MQBrokerError
from protocol.bodies import HeartbeatData, TopicRouteData
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.headers.by_code import REQUEST_HEADERS

BUILT = [
    rq.topic_route("T"),
    rq.unregister_client("cid", "pg", None),
    rq.query_consumer_offset("g", "T", 3),
    rq.update_consumer_offset("g", "T", 3, 42),
    rq.max_offset("T", 1),
    rq.min_offset("T", 1),
    rq.search_offset("T", 1, 1_700_000_000_000),
    rq.consumer_id_list("g"),
    rq.consumer_send_msg_back(4096, "ID", "T", "g", 2, 16),
]


@pytest.mark.parametrize("req", BUILT, ids=lambda r: RC(r.code).name)
def test_every_header_reads_back_through_the_brokers_typed_header(req: rq.ClientRequest) -> None:
    cmd = req.command()
    wire = RemotingCommand.decode(cmd.encode()[4:])
    assert wire.code == req.code and wire.ext_fields == req.ext
    cls = REQUEST_HEADERS.get(req.code)
    if cls is not None:
        assert cls.from_ext(wire.ext_fields or {}).to_ext() == req.ext


def test_each_command_is_a_fresh_request() -> None:
    req = rq.max_offset("T", 0)
    assert req.command().opaque != req.command().opaque


def _answer(code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code, ext_fields=ext, body=body)


def test_answers_are_read_as_the_client_reads_them() -> None:
    assert rq.query_consumer_offset("g", "T", 0).parse(_answer(ResponseCode.QUERY_NOT_FOUND),
                                                       "b") == -1
    assert rq.query_consumer_offset("g", "T", 0).parse(_answer(0, {"offset": "7"}), "b") == 7
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
