"""Spec conformance over TCP against the real broker and name server (spec §1.3-§1.6, §4.1,
§9.2, §13, §14.3): what a client sees on the wire, in every serialize type."""

from __future__ import annotations

import json
import re

import e2e_helpers as h

from deploy.wire import BlockingClient
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand

PULL_KEYS = {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}


def _same_envelope(resp: RemotingCommand, req: RemotingCommand) -> None:
    assert resp.opaque == req.opaque
    assert resp.version == 409
    assert resp.serialize_type == req.serialize_type
    assert resp.is_response and not resp.is_oneway
    assert all(isinstance(v, str) for v in (resp.ext_fields or {}).values())


def test_broker_answers_in_the_request_type_with_every_required_key(local_cluster) -> None:
    cluster = h.start_real(local_cluster)
    for st in h.SERIALIZE_TYPES:
        topic, group, client = f"CT{int(st)}", f"CG{int(st)}", f"127.0.0.1@conf{int(st)}"
        with BlockingClient(h.broker_addr(cluster)) as cl:
            req = h.send_cmd(topic, b"body", h.msg_props(tags="TagA"), serialize_type=st)
            resp = cl.invoke(req, h.RPC_TIMEOUT_S)
            _same_envelope(resp, req)
            assert resp.code == RS.SUCCESS
            assert {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"} <= set(
                resp.ext_fields or {}
            )
            assert resp.ext_fields["MSG_REGION"] == "DefaultRegion"
            assert resp.ext_fields["TRACE_ON"] == "true"
            # a forbidden topic: code 16, and MSG_REGION/TRACE_ON still there (§9.1)
            req = h.send_cmd("SCHEDULE_TOPIC_XXXX", b"x", h.msg_props(), serialize_type=st)
            resp = cl.invoke(req, h.RPC_TIMEOUT_S)
            _same_envelope(resp, req)
            assert resp.code == RS.NO_PERMISSION
            assert resp.remark == "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."
            assert {"MSG_REGION", "TRACE_ON"} <= set(resp.ext_fields or {})

            # HEART_BEAT (§14.3 step 2): 0 with version 409, a NOTIFY (oneway, own opaque)
            req = h.heartbeat_cmd(client, group, {topic: "*", f"%RETRY%{group}": "*"},
                                serialize_type=st)
            resp = cl.invoke(req, h.RPC_TIMEOUT_S)
            _same_envelope(resp, req)
            assert resp.code == RS.SUCCESS
            got = h.wait_until(lambda: cl.read_for(0.05) or cl.requests, 5.0, 0.0)
            assert got, "no NOTIFY_CONSUMER_IDS_CHANGED after a new consumer channel"
            note = cl.requests.pop(0)
            assert note.code == RC.NOTIFY_CONSUMER_IDS_CHANGED and note.flag == 2
            assert note.ext_fields == {"consumerGroup": group}
            # GET_CONSUMER_LIST_BY_GROUP right after: this client is listed
            req = h.simple_cmd(RC.GET_CONSUMER_LIST_BY_GROUP, st, consumerGroup=group)
            resp = cl.invoke(req, h.RPC_TIMEOUT_S)
            _same_envelope(resp, req)
            assert json.loads(bytes(resp.body)) == {"consumerIdList": [client]}

            # PULL: the four header keys on 0 and on 19 (no suspend flag => answered at once)
            for offset, want in ((0, RS.SUCCESS), (1, RS.PULL_NOT_FOUND),
                                 (7, RS.PULL_OFFSET_MOVED)):
                req = h.pull_cmd(group, topic, 0, offset, sys_flag=4, serialize_type=st)
                resp = cl.invoke(req, h.RPC_TIMEOUT_S)
                _same_envelope(resp, req)
                assert resp.code == want and set(resp.ext_fields or {}) >= PULL_KEYS
            req = h.simple_cmd(RC.QUERY_CONSUMER_OFFSET, st, consumerGroup=group, topic=topic,
                             queueId=0)
            resp = cl.invoke(req, h.RPC_TIMEOUT_S)
            _same_envelope(resp, req)
            assert (resp.code, resp.ext_fields) == (RS.SUCCESS, {"offset": "0"})

            # §1.6: an unknown code is answered 3 ... but never when it is oneway
            req = h.simple_cmd(4711, st)
            resp = cl.invoke(req, h.RPC_TIMEOUT_S)
            _same_envelope(resp, req)
            assert (resp.code, resp.remark) == (3, " request type 4711 not supported")
            silent = h.simple_cmd(4712, st, oneway=True)
            cl.invoke_oneway(silent)
            # GET_MAX_OFFSET goes to the same (admin) group, behind the oneway request
            req = h.simple_cmd(RC.GET_MAX_OFFSET, st, topic=topic, queueId=0)
            resp = cl.invoke(req, h.RPC_TIMEOUT_S)
            _same_envelope(resp, req)
            assert resp.ext_fields == {"offset": "1"}
            cl.read_for(0.2)
            assert silent.opaque not in cl.pending


def test_name_server_routes_and_dispatch(local_cluster) -> None:
    cluster = h.start_real(local_cluster)
    ns = h.namesrv_addr(cluster)
    with BlockingClient(h.broker_addr(cluster)) as cl:
        cl.invoke(h.heartbeat_cmd("127.0.0.1@r", "RG", {"RT": "*"}), h.RPC_TIMEOUT_S)
    # TBW102 (auto-create template, perm 7) and the heartbeat's %RETRY% topic are routed
    tbw = h.wait_route(ns, "TBW102", True, 10.0)
    assert tbw.code == RS.SUCCESS
    retry = h.wait_route(ns, "%RETRY%RG", True, 10.0)
    assert retry.code == RS.SUCCESS
    for resp in (tbw, retry):
        text = bytes(resp.body).decode("ascii")
        assert " " not in text and "\n" not in text  # compact (the Go client splits raw text)
        obj = json.loads(text)
        assert {"queueDatas", "brokerDatas", "filterServerTable"} <= set(obj)
        assert re.search(r'"brokerAddrs":\{"0":"[0-9.]+:\d+"\}', text)  # quoted id key
    assert json.loads(bytes(tbw.body))["queueDatas"][0]["perm"] == 7
    assert json.loads(bytes(retry.body))["queueDatas"][0]["writeQueueNums"] == 1
    for st in h.SERIALIZE_TYPES:
        with BlockingClient(ns) as cl:
            unknown = h.simple_cmd(4711, st)
            cl.send_raw(unknown.encode())  # §1.6: the name server never answers this
            req = h.simple_cmd(RC.GET_ROUTEINFO_BY_TOPIC, st, topic="NoSuchTopic")
            resp = cl.invoke(req, h.RPC_TIMEOUT_S)
            _same_envelope(resp, req)
            assert resp.code == RS.TOPIC_NOT_EXIST
            assert (resp.remark or "").startswith(
                "No topic route info in name server for the topic: NoSuchTopic"
            )
            cl.read_for(0.2)
            assert unknown.opaque not in cl.pending
