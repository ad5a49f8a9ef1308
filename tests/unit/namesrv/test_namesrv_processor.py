"""NamesrvProcessor driven with requests framed like the real clients and brokers."""

from __future__ import annotations

import json
import struct
import zlib

from namesrv_kit import register_body, wire_req

from actors.namesrv.processor import NamesrvProcessor
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS

REG_EXT = {
    "brokerName": "broker-a",
    "brokerAddr": "127.0.0.1:10911",
    "clusterName": "DefaultCluster",
    "haServerAddr": "127.0.0.1:10912",
    "brokerId": 0,
    "compressed": False,
}


def register(
    p: NamesrvProcessor,
    topics: dict,
    *,
    conn: int = 1,
    now: int = 0,
    counter: int = 1,
    crc: bool = True,
):
    body = register_body(topics, counter=counter)
    ext = dict(REG_EXT, bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF if crc else 0)
    return p.process(wire_req(RC.REGISTER_BROKER, ext, body, conn_id=conn), now)


def route(p: NamesrvProcessor, topic: str, **kw):
    return p.process(wire_req(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, **kw), 0)


def test_register_then_route_standard_json() -> None:
    p = NamesrvProcessor()
    resp = register(p, {"TBW102": {"perm": 7, "q": 8}, "TopicTest": {}})
    assert resp is not None and resp.code == RS.SUCCESS and resp.is_response
    r = route(p, "TopicTest")
    assert r.code == RS.SUCCESS
    assert r.opaque == 7
    assert bytes(r.body) == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":'
        b'"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,"topicSysFlag":0,'
        b'"writeQueueNums":4}]}'
    )
    assert json.loads(route(p, "TBW102").body)["queueDatas"][0]["perm"] == 7


def test_unknown_topic_17_with_remark() -> None:
    p = NamesrvProcessor()
    r = route(p, "FrameTopic", version=121)
    assert r.code == RS.TOPIC_NOT_EXIST
    assert r.remark.startswith("No topic route info in name server for the topic: FrameTopic")


def test_cpp_route_request_with_signature_keys() -> None:
    p = NamesrvProcessor()
    register(p, {"%RETRY%FrameCG": {"q": 1}})
    ext = {
        "AccessKey": "",
        "OnsChannel": "ALIYUN",
        "Signature": "1iiazlDsEADJ922hXSzCR0waDeE=",
        "topic": "%RETRY%FrameCG",
    }
    r = p.process(wire_req(RC.GET_ROUTEINFO_BY_TOPIC, ext, language="CPP", version=333), 0)
    assert r.code == RS.SUCCESS
    assert json.loads(r.body)["queueDatas"][0]["readQueueNums"] == 1


def test_bad_crc_rejected() -> None:
    p = NamesrvProcessor()
    body = register_body({"T": {}})
    ext = dict(REG_EXT, bodyCrc32=(zlib.crc32(body) + 1) & 0x7FFFFFFF)
    r = p.process(wire_req(RC.REGISTER_BROKER, ext, body), 0)
    assert r.code == RS.SYSTEM_ERROR and r.remark == "crc32 not match"
    assert route(p, "T").code == RS.TOPIC_NOT_EXIST


def test_compressed_register_body() -> None:
    dv = b'{"counter":3,"timestamp":5}'
    parts = [struct.pack(">i", len(dv)), dv, struct.pack(">i", 2)]
    for text in (b"TopicA 4 4 6 SINGLE_TAG", b"TopicB 2 2 6 SINGLE_TAG"):
        parts += [struct.pack(">i", len(text)), text]
    parts += [struct.pack(">i", 2), b"[]"]
    body = zlib.compress(b"".join(parts), 9)
    ext = dict(REG_EXT, compressed="true", bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF)
    assert p_ok(NamesrvProcessor(), ext, body)


def p_ok(p: NamesrvProcessor, ext: dict, body: bytes) -> bool:
    r = p.process(wire_req(RC.REGISTER_BROKER, ext, body), 0)
    assert r.code == RS.SUCCESS
    return json.loads(route(p, "TopicB").body)["queueDatas"][0]["writeQueueNums"] == 2


def test_old_version_bare_wrapper_body() -> None:
    p = NamesrvProcessor()
    body = json.dumps(
        {
            "dataVersion": {"counter": 1, "timestamp": 1},
            "topicConfigTable": {
                "Old": {"topicName": "Old", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
            },
        }
    ).encode()
    r = p.process(wire_req(RC.REGISTER_BROKER, dict(REG_EXT), body, version=26), 0)
    assert r.code == RS.SUCCESS
    assert route(p, "Old").code == RS.SUCCESS


def test_missing_header_field_gives_error_not_exception() -> None:
    p = NamesrvProcessor()
    ext = dict(REG_EXT)
    del ext["brokerName"]
    r = p.process(wire_req(RC.REGISTER_BROKER, ext, register_body({})), 0)
    assert r.code == RS.SYSTEM_ERROR and "brokerName" in r.remark
    r = p.process(wire_req(RC.GET_ROUTEINFO_BY_TOPIC, {}), 0)
    assert r.code == RS.SYSTEM_ERROR and "topic" in r.remark
    bad = dict(REG_EXT, brokerId="zero")
    r = p.process(wire_req(RC.REGISTER_BROKER, bad, register_body({})), 0)
    assert r.code == RS.SYSTEM_ERROR and "brokerId" in r.remark


def test_unknown_code_no_reply() -> None:
    p = NamesrvProcessor()
    assert p.process(wire_req(9999, {}), 0) is None
    assert p.process(wire_req(RC.PULL_MESSAGE, {}), 0) is None


def test_oneway_not_answered() -> None:
    p = NamesrvProcessor()
    assert (
        p.process(
            wire_req(RC.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"}, oneway=True), 0
        )
        is None
    )
    r = p.process(wire_req(RC.GET_KV_CONFIG, {"namespace": "n", "key": "k"}), 0)
    assert r.code == RS.SUCCESS and r.ext_fields == {"value": "v"}


def test_kv_config_codes() -> None:
    p = NamesrvProcessor()
    r = p.process(wire_req(RC.GET_KV_CONFIG, {"namespace": "n", "key": "k"}), 0)
    assert r.code == RS.QUERY_NOT_FOUND
    p.process(wire_req(RC.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"}), 0)
    r = p.process(wire_req(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "n"}), 0)
    assert json.loads(r.body) == {"table": {"k": "v"}}
    p.process(wire_req(RC.DELETE_KV_CONFIG, {"namespace": "n", "key": "k"}), 0)
    r = p.process(wire_req(RC.GET_KV_CONFIG, {"namespace": "n", "key": "k"}), 0)
    assert r.code == RS.QUERY_NOT_FOUND


def test_cluster_info_topic_lists_delete() -> None:
    p = NamesrvProcessor()
    register(p, {"A": {}, "B": {}})
    r = p.process(wire_req(RC.GET_BROKER_CLUSTER_INFO, {}, version=121), 0)
    assert bytes(r.body) == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{"0":"127.0.0.1:10911"},'
        b'"brokerName":"broker-a","cluster":"DefaultCluster"}},'
        b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )
    r = p.process(wire_req(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, None), 0)
    assert json.loads(r.body) == {"topicList": ["A", "B"]}
    r = p.process(wire_req(RC.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"}), 0)
    assert json.loads(r.body) == {"topicList": ["A", "B"]}
    p.process(wire_req(RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "A"}), 0)
    assert route(p, "A").code == RS.TOPIC_NOT_EXIST


def test_query_data_version() -> None:
    p = NamesrvProcessor()
    register(p, {"A": {}}, counter=4)
    ext = {k: REG_EXT[k] for k in ("brokerName", "brokerAddr", "clusterName", "brokerId")}
    same = json.dumps({"counter": 4, "timestamp": 1000}).encode()
    r = p.process(wire_req(RC.QUERY_DATA_VERSION, ext, same), 0)
    assert r.ext_fields == {"changed": "false"}
    assert json.loads(r.body) == {"counter": 4, "timestamp": 1000}
    other = json.dumps({"counter": 5, "timestamp": 1000}).encode()
    r = p.process(wire_req(RC.QUERY_DATA_VERSION, ext, other), 0)
    assert r.ext_fields == {"changed": "true"}


def test_wipe_add_write_perm_codes() -> None:
    p = NamesrvProcessor()
    register(p, {"A": {}})
    r = p.process(wire_req(RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}), 0)
    assert r.ext_fields == {"wipeTopicCount": "1"}
    assert json.loads(route(p, "A").body)["queueDatas"][0]["perm"] == 4
    r = p.process(wire_req(RC.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}), 0)
    assert r.ext_fields == {"addTopicCount": "1"}


def test_tick_scan_expires_and_reports_connection() -> None:
    p = NamesrvProcessor(broker_expired_ms=120_000)
    register(p, {"A": {}}, conn=42, now=0)
    assert p.tick(0) == 10_000
    p.tick(60_000)
    assert route(p, "A").code == RS.SUCCESS
    p.tick(130_000)
    assert route(p, "A").code == RS.TOPIC_NOT_EXIST
    assert p.expired_conns == [42]


def test_connection_closed_unregisters() -> None:
    p = NamesrvProcessor()
    register(p, {"A": {}}, conn=3)
    p.on_connection_closed(3, 0)
    assert route(p, "A").code == RS.TOPIC_NOT_EXIST


def test_slave_register_response_has_master() -> None:
    p = NamesrvProcessor()
    register(p, {"A": {}})
    ext = dict(REG_EXT, brokerId=1, brokerAddr="127.0.0.2:10911")
    body = register_body({"A": {}})
    r = p.process(wire_req(RC.REGISTER_BROKER, ext, body, conn_id=2), 0)
    assert r.ext_fields == {"masterAddr": "127.0.0.1:10911", "haServerAddr": "127.0.0.1:10912"}


def test_add_write_perm_sets_read_and_write() -> None:
    """operateWritePermOfBroker: adding gives PERM_READ | PERM_WRITE whatever was there (a
    write-only topic becomes readable, an inherited 7 becomes 6)."""
    p = NamesrvProcessor()
    register(p, {"W": {"perm": 2}, "X": {"perm": 7}})
    p.process(wire_req(RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}), 0)
    p.process(wire_req(RC.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}), 0)
    assert [json.loads(route(p, t).body)["queueDatas"][0]["perm"] for t in "WX"] == [6, 6]


def test_an_emptied_kv_namespace_stays_and_goes_out_with_registrations() -> None:
    """deleteKVConfig removes the key only: the namespace lists as {"table":{}} and a broker's
    registration reply carries that empty ORDER_TOPIC_CONFIG table (its order topics end)."""
    p = NamesrvProcessor()
    ns = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}
    p.process(wire_req(RC.PUT_KV_CONFIG, dict(ns, value="broker-a:4")), 0)
    assert json.loads(register(p, {"T": {}}).body) == {"table": {"T": "broker-a:4"}}
    p.process(wire_req(RC.DELETE_KV_CONFIG, ns), 0)
    r = p.process(wire_req(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"}), 0)
    assert r.code == RS.SUCCESS and json.loads(r.body) == {"table": {}}
    assert json.loads(register(p, {"T": {}}, counter=2).body) == {"table": {}}
    r = p.process(wire_req(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "never"}), 0)
    assert r.code == RS.QUERY_NOT_FOUND


def test_a_registration_without_a_body_has_data_version_zero() -> None:
    """registerBrokerWithFilterServer: no body is an empty wrapper with DataVersion 0/0, so a
    QUERY_DATA_VERSION of 0/0 is unchanged (and keeps the broker alive)."""
    p = NamesrvProcessor()
    r = p.process(wire_req(RC.REGISTER_BROKER, dict(REG_EXT, bodyCrc32=0)), 0)
    assert r.code == RS.SUCCESS
    ext = {k: REG_EXT[k] for k in ("brokerName", "brokerAddr", "clusterName", "brokerId")}
    zero = json.dumps({"counter": 0, "timestamp": 0}).encode()
    r = p.process(wire_req(RC.QUERY_DATA_VERSION, ext, zero), 0)
    assert r.ext_fields == {"changed": "false"}
