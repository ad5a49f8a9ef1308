"""Admin codes the Java 4.9.x mqadmin tools send that the broker used to answer "not supported":
QUERY_CONSUME_QUEUE (queryCq), CLONE_GROUP_OFFSET (cloneGroupOffset), QUERY_CONSUME_TIME_SPAN
(DefaultMQAdminExt.queryConsumeTimeSpan) and VIEW_BROKER_STATS_DATA (statsAll),
AdminBrokerProcessor, RocketMQ 4.9.x."""

from __future__ import annotations

import json
import struct

from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.record import java_string_hash
from tests.unit.broker.broker_kit import Broker, heartbeat_body, send_ext

PEER = ("10.0.0.5", 51000)


def _hb(broker: Broker, conn_id: int, body: bytes) -> None:
    r = broker.call(RC.HEART_BEAT, {}, body, conn_id=conn_id, peer=PEER)
    assert r is not None and r.code == RS.SUCCESS


def _send(broker: Broker, n: int, *, queue_id: int = 1, t0: int = 5000, tag: str = "") -> None:
    ext = send_ext("T", queue_id=queue_id)
    if tag:
        ext["i"] = f"TAGS\x01{tag}\x02"
    for i in range(n):
        r = broker.call(RC.SEND_MESSAGE_V2, ext, b"x", now_ms=t0 + i)
        assert r is not None and r.code == RS.SUCCESS


def _commit(broker: Broker, group: str, queue_id: int, offset: int) -> None:
    q = {"consumerGroup": group, "topic": "T", "queueId": queue_id, "commitOffset": offset}
    broker.call(RC.UPDATE_CONSUMER_OFFSET, q, oneway=True)


# --- QUERY_CONSUME_QUEUE (321) -------------------------------------------------------------


def test_query_consume_queue_reads_units_from_the_index(broker: Broker) -> None:
    _send(broker, 3)
    _send(broker, 1, t0=6000, tag="TagA")
    ext = {"topic": "T", "queueId": "1", "index": "1", "count": "2"}  # no consumerGroup: -g unset
    r = broker.call(RC.QUERY_CONSUME_QUEUE, ext)
    assert r is not None and r.code == RS.SUCCESS and r.remark is None
    body = json.loads(r.body)
    assert (body["minQueueIndex"], body["maxQueueIndex"]) == (0, 4)
    assert "subscriptionData" not in body and "filterData" not in body
    units = body["queueData"]
    assert len(units) == 2  # count limits the units read from index 1
    assert all(set(u) == {"eval", "physicOffset", "physicSize", "tagsCode"} for u in units)
    assert all(u["eval"] is False and u["tagsCode"] == 0 for u in units)
    # each unit points at its record in the commit log: the record's first word is its size
    first = broker.call(RC.QUERY_CONSUME_QUEUE, {**ext, "index": "0", "count": "1"})
    assert first is not None
    u0 = json.loads(first.body)["queueData"][0]
    assert units[0]["physicOffset"] == u0["physicOffset"] + u0["physicSize"]
    last = broker.call(RC.QUERY_CONSUME_QUEUE, {**ext, "index": "3", "count": "10"})
    assert last is not None
    assert [u["tagsCode"] for u in json.loads(last.body)["queueData"]] == [
        java_string_hash("TagA")
    ]


def test_query_consume_queue_record_matches_the_store(broker: Broker) -> None:
    _send(broker, 2)
    r = broker.call(RC.QUERY_CONSUME_QUEUE, {"topic": "T", "queueId": "1", "index": "0",
                                             "count": "2"})  # fmt: skip
    assert r is not None
    u = json.loads(r.body)["queueData"][1]
    data = broker.cores["admin"].store.select_one_message_by_offset(u["physicOffset"])
    assert data is not None
    assert struct.unpack_from(">i", data, 0)[0] == u["physicSize"]


def test_query_consume_queue_with_a_group(broker: Broker) -> None:
    _send(broker, 1)
    _hb(broker, 5, heartbeat_body("10.0.0.5@c1", "CG", "T", tags=["TagA"]))
    ext = {"topic": "T", "queueId": "1", "index": "0", "count": "1", "consumerGroup": "CG"}
    r = broker.call(RC.QUERY_CONSUME_QUEUE, ext)
    assert r is not None and r.code == RS.SUCCESS
    body = json.loads(r.body)
    assert body["subscriptionData"]["subString"] == "TagA"
    assert body["subscriptionData"]["codeSet"] == [java_string_hash("TagA")]
    assert body["filterData"] == "null"  # no ConsumerFilterData for a tag subscription
    r = broker.call(RC.QUERY_CONSUME_QUEUE, {**ext, "consumerGroup": "Offline"})
    assert r is not None and json.loads(r.body)["filterData"] == "Offline@T is not online!"


def test_query_consume_queue_missing_queue_and_index(broker: Broker) -> None:
    r = broker.call(RC.QUERY_CONSUME_QUEUE, {"topic": "Nope", "queueId": "2", "index": "0",
                                             "count": "1"})  # fmt: skip
    assert r is not None and r.code == RS.SYSTEM_ERROR and r.remark == "2@Nope is not exist!"
    _send(broker, 2)
    r = broker.call(RC.QUERY_CONSUME_QUEUE, {"topic": "T", "queueId": "1", "index": "5",
                                             "count": "1"})  # fmt: skip
    assert r is not None and r.code == RS.SUCCESS
    assert r.remark == "Index 5 of 1@T is not exist!"
    body = json.loads(r.body)
    assert body == {"maxQueueIndex": 2, "minQueueIndex": 0}


# --- CLONE_GROUP_OFFSET (314) --------------------------------------------------------------


def _offset(broker: Broker, group: str, queue_id: int) -> int:
    r = broker.call(RC.QUERY_CONSUMER_OFFSET,
                    {"consumerGroup": group, "topic": "T", "queueId": str(queue_id)})  # fmt: skip
    assert r is not None
    return int((r.ext_fields or {}).get("offset", -1)) if r.code == RS.SUCCESS else -1


def test_clone_group_offset_copies_the_topic_offsets(broker: Broker) -> None:
    _send(broker, 3, queue_id=0)
    _send(broker, 3, queue_id=2)
    _commit(broker, "SRC", 0, 2)
    _commit(broker, "SRC", 2, 3)
    ext = {"srcGroup": "SRC", "destGroup": "DST", "topic": "T", "offline": "false"}
    r = broker.call(RC.CLONE_GROUP_OFFSET, ext)
    assert r is not None and r.code == RS.SUCCESS
    broker.pump(0)
    assert (_offset(broker, "DST", 0), _offset(broker, "DST", 2)) == (2, 3)
    # the consume stats (another path, the admin replica) see DST's offsets too
    r = broker.call(RC.GET_CONSUME_STATS, {"consumerGroup": "DST", "topic": "T"})
    assert r is not None and b'"consumerOffset":3' in r.body


def test_clone_group_offset_skips_a_topic_the_online_group_left(broker: Broker) -> None:
    _send(broker, 2, queue_id=0)
    _commit(broker, "SRC", 0, 2)
    _hb(broker, 5, heartbeat_body("10.0.0.5@c1", "SRC", "Other"))  # online, not on T
    ext = {"srcGroup": "SRC", "destGroup": "DST", "topic": "T", "offline": "false"}
    r = broker.call(RC.CLONE_GROUP_OFFSET, ext)
    assert r is not None and r.code == RS.SUCCESS
    broker.pump(0)
    assert broker.ctxs["consumer_manage"].offsets.query_offset("DST", "T", 0) == -1
    r = broker.call(RC.CLONE_GROUP_OFFSET, {**ext, "offline": "true"})  # offline: copy anyway
    assert r is not None and r.code == RS.SUCCESS
    broker.pump(0)
    assert _offset(broker, "DST", 0) == 2


def test_clone_group_offset_requires_both_groups(broker: Broker) -> None:
    r = broker.call(RC.CLONE_GROUP_OFFSET, {"srcGroup": "SRC"})
    assert r is not None and r.code == RS.SYSTEM_ERROR
    assert r.remark == "the custom field <destGroup> is null"


# --- QUERY_CONSUME_TIME_SPAN (303) ---------------------------------------------------------


def test_consume_time_span_per_write_queue(broker: Broker) -> None:
    _send(broker, 3, queue_id=1, t0=5000)
    _commit(broker, "CG", 1, 1)
    r = broker.call(RC.QUERY_CONSUME_TIME_SPAN, {"topic": "T", "group": "CG"}, now_ms=9000)
    assert r is not None and r.code == RS.SUCCESS
    spans = json.loads(r.body)["consumeTimeSpanSet"]
    assert [s["messageQueue"]["queueId"] for s in spans] == [0, 1, 2, 3]
    s = spans[1]
    assert s["messageQueue"] == {"brokerName": "broker-a", "queueId": 1, "topic": "T"}
    assert (s["minTimeStamp"], s["maxTimeStamp"], s["consumeTimeStamp"]) == (5000, 5002, 5000)
    assert s["delayTime"] == 9000 - 5001  # now - store time of the next message to consume
    assert s["minTimeStampStr"].endswith(":000") and "#" in s["minTimeStampStr"]
    # a queue never written and without an offset: -1 store times, and (as Java computes it,
    # offset -1 < max 0) a delay of now minus the -1 store time of offset -1
    empty = spans[0]
    assert (empty["minTimeStamp"], empty["maxTimeStamp"], empty["delayTime"]) == (-1, -1, 9001)


def test_consume_time_span_caught_up_and_unknown_topic(broker: Broker) -> None:
    _send(broker, 2, queue_id=1, t0=7000)
    _commit(broker, "CG", 1, 2)
    r = broker.call(RC.QUERY_CONSUME_TIME_SPAN, {"topic": "T", "group": "CG"}, now_ms=9000)
    assert r is not None
    s = json.loads(r.body)["consumeTimeSpanSet"][1]
    assert (s["consumeTimeStamp"], s["delayTime"]) == (7001, 0)
    r = broker.call(RC.QUERY_CONSUME_TIME_SPAN, {"topic": "Nope", "group": "CG"})
    assert r is not None and r.code == RS.TOPIC_NOT_EXIST and r.remark == "topic[Nope] not exist"


# --- VIEW_BROKER_STATS_DATA (315) ----------------------------------------------------------


def test_view_broker_stats_data_answers_an_item_it_does_not_keep_as_java_does(
    broker: Broker,
) -> None:
    _send(broker, 1)
    r = broker.call(RC.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "T"})
    assert r is not None and r.code == RS.SYSTEM_ERROR
    assert r.remark == "The stats <TOPIC_PUT_NUMS> <T> not exist"
    r = broker.call(RC.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS"})
    assert r is not None and r.remark == "the custom field <statsKey> is null"


# --- INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) --------------------------------------------


def _status_reply(fwd: RemotingCommand, offsets: dict[int, int]) -> RemotingCommand:
    mqs = ",".join(
        f'{{"brokerName":"broker-a","queueId":{q},"topic":"T"}}:{o}' for q, o in offsets.items()
    )
    body = ('{"consumerTable":{},"messageQueueTable":{' + mqs + "}}").encode()
    return fwd.make_response(RS.SUCCESS, None, None, body)


def test_consumer_status_asks_every_client_and_gathers_their_tables(broker: Broker) -> None:
    _hb(broker, 5, heartbeat_body("10.0.0.5@c1", "CG", "T"))
    _hb(broker, 6, heartbeat_body("10.0.0.6@c2", "CG", "T"))
    broker.outbox.take()
    ext = {"topic": "T", "group": "CG"}
    assert broker.call(RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, ext, conn_id=9) is None
    sent = broker.outbox.take()
    assert sorted(c for c, _ in sent) == [5, 6]
    assert all(f.code == RC.GET_CONSUMER_STATUS_FROM_CLIENT for _, f in sent)
    assert all(f.ext_fields == {"topic": "T", "group": "CG"} for _, f in sent)
    admin = broker.cores["admin"]
    by_conn = dict(sent)
    admin.on_client_response(_status_reply(by_conn[5], {0: 3, 1: 4}), 10)
    assert broker.outbox.take() == []  # still waiting for c2
    admin.on_client_response(_status_reply(by_conn[6], {2: 7}), 10)
    [(conn, resp)] = broker.outbox.take()
    assert conn == 9 and resp.code == RS.SUCCESS
    text = bytes(resp.body).decode()
    assert text.startswith('{"consumerTable":{"10.0.0.5@c1":{{"brokerName":"broker-a"')
    assert '"10.0.0.6@c2":{{"brokerName":"broker-a","queueId":2,"topic":"T"}:7}' in text
    assert text.endswith('},"messageQueueTable":{}}')


def test_consumer_status_one_client_timeout_and_offline_group(broker: Broker) -> None:
    r = broker.call(RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": "T", "group": "CG"})
    assert r is not None and r.code == RS.SYSTEM_ERROR
    assert r.remark == "No Any Consumer online in the consumer group: [CG]"
    _hb(broker, 5, heartbeat_body("10.0.0.5@c1", "CG", "T"))
    _hb(broker, 6, heartbeat_body("10.0.0.6@c2", "CG", "T"))
    broker.outbox.take()
    ext = {"topic": "T", "group": "CG", "clientAddr": "10.0.0.6@c2"}
    assert broker.call(RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, ext, conn_id=9,
                       now_ms=1000) is None  # fmt: skip
    [(conn, _fwd)] = broker.outbox.take()
    assert conn == 6  # only the named client
    admin = broker.cores["admin"]
    admin.tick(5999)
    assert broker.outbox.take() == []
    admin.tick(6000)  # no answer in 5 s: that client is left out, still SUCCESS
    [(conn, resp)] = broker.outbox.take()
    assert conn == 9 and resp.code == RS.SUCCESS
    assert bytes(resp.body) == b'{"consumerTable":{},"messageQueueTable":{}}'


# --- GET_ALL_PRODUCER_INFO (328, mqadmin producer) ---------------------------------------------


def test_get_all_producer_info_lists_every_group_with_its_channels(broker: Broker) -> None:
    for conn_id, cid in ((3, "10.0.0.5@a"), (4, "10.0.0.5@b")):
        body = json.dumps({"clientID": cid, "consumerDataSet": [],
                           "producerDataSet": [{"groupName": "PG1"},
                                               {"groupName": "CLIENT_INNER_PRODUCER"}]}).encode()
        r = broker.call(RC.HEART_BEAT, {}, body, conn_id=conn_id, peer=PEER, now_ms=77,
                        language="CPP", version=333)  # fmt: skip
        assert r is not None and r.code == RS.SUCCESS
    r = broker.call(RC.GET_ALL_PRODUCER_INFO, {})
    assert r is not None and r.code == RS.SUCCESS
    data = json.loads(bytes(r.body))["data"]
    assert sorted(data) == ["CLIENT_INNER_PRODUCER", "PG1"]
    assert data["PG1"] == [
        {"clientId": "10.0.0.5@a", "language": "CPP", "lastUpdateTimestamp": 77,
         "remoteIP": "/10.0.0.5:51000", "version": 333},
        {"clientId": "10.0.0.5@b", "language": "CPP", "lastUpdateTimestamp": 77,
         "remoteIP": "/10.0.0.5:51000", "version": 333},
    ]  # fmt: skip
    assert list(json.loads(bytes(r.body))["data"]["PG1"][0]) == sorted(data["PG1"][0])


# --- QUERY_CORRECTION_OFFSET (308) -------------------------------------------------------------


def test_query_correction_offset(broker: Broker) -> None:
    _send(broker, 6, queue_id=0)
    _send(broker, 6, queue_id=1)
    for group, q0, q1 in (("A", 4, 2), ("B", 3, 5), ("SKIP", 1, 1), ("CMP", 5, -1)):
        _commit(broker, group, 0, q0)
        _commit(broker, group, 1, q1)
    ext = {"topic": "T", "compareGroup": "CMP", "filterGroups": "SKIP"}
    r = broker.call(RC.QUERY_CORRECTION_OFFSET, ext)
    assert r is not None and r.code == RS.SUCCESS
    # least of A, B and CMP's valid offsets: q0 3, q1 2; CMP's q1 lies below the queue's min
    # (left out of the least), so it is behind it: Long.MAX_VALUE
    assert bytes(r.body) == b'{"correctionOffsets":{0:3,1:9223372036854775807}}'
    # a filtered compareGroup compares nothing (Java removed its offsets before looking)
    r = broker.call(RC.QUERY_CORRECTION_OFFSET, {**ext, "filterGroups": "SKIP,CMP"})
    assert r is not None and bytes(r.body) == b'{"correctionOffsets":{0:3,1:2}}'
    r = broker.call(RC.QUERY_CORRECTION_OFFSET, {**ext, "filterGroups": ""})  # SKIP counts
    assert r is not None and bytes(r.body) == b'{"correctionOffsets":{0:1,1:9223372036854775807}}'
    # the query changed nothing (Java's deletes filterGroups' offsets as a side effect)
    r = broker.call(RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": "SKIP", "topic": "T",
                                                "queueId": 0})  # fmt: skip
    assert r is not None and r.ext_fields["offset"] == "1"
