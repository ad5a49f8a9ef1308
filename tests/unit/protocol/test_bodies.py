"""JSON bodies (protocol/bodies): spec vectors, real client bodies, leniency, round trips."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import bodies as B
from protocol.bodies import (
    BodyError,
    BrokerData,
    ClusterInfo,
    ConsumeFromWhere,
    ConsumerData,
    ConsumerOffsetSerializeWrapper,
    ConsumeType,
    DataVersion,
    HeartbeatData,
    LockBatchRequestBody,
    MessageModel,
    MessageQueue,
    QueueData,
    RegisterBrokerBody,
    SubscriptionData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
    TopicRouteData,
    loads_lenient,
)

ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"192.168.1.10:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
    b'"perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
CLUSTER = (
    b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{"0":"192.168.1.10:10911"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster"}},'
    b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
)
JAVA_HEARTBEAT = (
    b'{"clientID":"192.168.1.5@4242#1234567890","consumerDataSet":[{"consumeFromWhere":'
    b'"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg1",'
    b'"messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,'
    b'"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,'
    b'"tagsSet":["TagA"],"topic":"TopicTest"},{"classFilterMode":false,"codeSet":[],'
    b'"expressionType":"TAG","subString":"*","subVersion":1700000000001,"tagsSet":[],'
    b'"topic":"%RETRY%cg1"}],"unitMode":false}],"producerDataSet":[{"groupName":'
    b'"CLIENT_INNER_PRODUCER"}]}'
)
ALIONS_HEARTBEAT = (
    b'{"clientID":"192.0.2.2@28517","consumerDataSet":[{"groupName":'
    b'"CG_alions_2026112123220028465alions","consumeType":"CONSUME_PASSIVELY",'
    b'"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",'
    b'"subscriptionDataSet":[{"topic":"AccBasic_alions_2026112123220028465alions",'
    b'"subString":"*","classFilterMode":false,"tagsSet":[],"codeSet":[],'
    b'"subVersion":1795303321372}],"unitMode":false}],"producerDataSet":[]}'
)
CPP_HEARTBEAT = (
    b'{"clientID":"127.0.0.1@28626#DEFAULT","producerDataSet":[{"groupName":'
    b'"PG_cpp_2026112123220028465cpp"}]}\n'
)
CPP12_HEARTBEAT = (
    b'{"clientID":"28821-127.0.0.1@DEFAULT","producerDataSet":[{"groupName":'
    b'"PG_cpp12_2026112123220028465cpp12"}]}\n'
)
CPP_LOCK = (
    b'{"clientId":"127.0.0.1@29147#ord_29147","consumerGroup":"G_cpp_2026112123220428956fcpp_ORD",'
    b'"mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"AccFeat_cpp_2026112123220428956fcpp"}]}\n'
)
REGISTER = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,'
    b'"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"order":false,"perm":6,'
    b'"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest",'
    b'"topicSysFlag":0,"writeQueueNums":4}}}}'
)


# --- spec vectors -------------------------------------------------------------------------------
def test_route_example_byte_for_byte() -> None:
    route = TopicRouteData.from_json(ROUTE)
    assert route.broker_datas[0].broker_addrs == {0: "192.168.1.10:10911"}
    assert route.broker_datas[0].master_addr == "192.168.1.10:10911"
    assert route.queue_datas[0] == QueueData("broker-a", 4, 4, 6, 0)
    assert route.to_json(with_syn_flag=False) == ROUTE
    built = TopicRouteData(
        [QueueData("broker-a", 4, 4, 6, 0)],
        [BrokerData("DefaultCluster", "broker-a", {0: "192.168.1.10:10911"})],
    )
    assert built.to_json(with_syn_flag=False) == ROUTE


def test_route_default_also_writes_topic_syn_flag() -> None:
    out = TopicRouteData.from_json(ROUTE).to_json()
    assert out == ROUTE.replace(b'"topicSysFlag":0', b'"topicSynFlag":0,"topicSysFlag":0')
    assert b" " not in out


def test_route_legacy_unquoted_keys_and_syn_flag_spelling() -> None:
    legacy = ROUTE.replace(b'{"0":', b"{0:").replace(b"topicSysFlag", b"topicSynFlag")
    with pytest.raises(json.JSONDecodeError):
        json.loads(legacy)
    route = TopicRouteData.from_json(legacy)
    assert route == TopicRouteData.from_json(ROUTE)


def test_route_order_topic_conf_and_filter_servers() -> None:
    route = TopicRouteData.from_json(ROUTE)
    route.order_topic_conf = "broker-a:4"
    route.filter_server_table = {"1.2.3.4:10911": ["1.2.3.4:30000"]}
    again = TopicRouteData.from_json(route.to_json())
    assert again == route
    assert route.to_json().index(b'"orderTopicConf"') < route.to_json().index(b'"queueDatas"')


def test_cluster_info_example_byte_for_byte() -> None:
    info = ClusterInfo.from_json(CLUSTER)
    assert info.cluster_addr_table == {"DefaultCluster": ["broker-a"]}
    assert info.to_json() == CLUSTER
    assert ClusterInfo.from_json(CLUSTER.replace(b'{"0":', b"{0:")).to_json() == CLUSTER


def test_broker_addrs_many_ids_sorted_and_quoted() -> None:
    bd = BrokerData("c", "b", {2: "h:2", 0: "h:0", 1: "h:1"})
    assert bd.to_json().startswith(b'{"brokerAddrs":{"0":"h:0","1":"h:1","2":"h:2"}')


def test_java_heartbeat_round_trips_byte_for_byte() -> None:
    hb = HeartbeatData.from_json(JAVA_HEARTBEAT)
    c = hb.consumer_data_set[0]
    assert c.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert c.message_model is MessageModel.CLUSTERING
    assert c.subscription_data_set[0].code_set == [2598919]
    assert hb.producer_data_set[0].group_name == "CLIENT_INNER_PRODUCER"
    assert hb.to_json() == JAVA_HEARTBEAT


def test_alions_heartbeat() -> None:
    hb = HeartbeatData.from_json(ALIONS_HEARTBEAT)
    assert hb.client_id == "192.0.2.2@28517" and hb.producer_data_set == []
    c = hb.consumer_data_set[0]
    assert c.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    sub = c.subscription_data_set[0]
    assert sub.expression_type == "TAG" and sub.is_all and sub.sub_version == 1795303321372


@pytest.mark.parametrize("body", [CPP_HEARTBEAT, CPP12_HEARTBEAT])
def test_cpp_producer_heartbeats(body: bytes) -> None:
    hb = HeartbeatData.from_json(body)
    assert hb.consumer_data_set == [] and len(hb.producer_data_set) == 1
    assert hb.producer_data_set[0].group_name.startswith("PG_cpp")


def test_cpp_style_consumer_ordinals_string_numbers_missing_members() -> None:
    body = (
        b'{"clientID":"127.0.0.1@1#DEFAULT","consumerDataSet":[{"consumeFromWhere":4,'
        b'"consumeType":1,"groupName":"g","messageModel":"0","subscriptionDataSet":[{"topic":"T",'
        b'"subString":"TagA || TagB","tagsSet":["TagA","TagB"],"subVersion":"1795303321879",'
        b'"classFilterMode":false}]}],"producerDataSet":[]}'
    )
    c = HeartbeatData.from_json(body).consumer_data_set[0]
    assert c.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert c.message_model is MessageModel.BROADCASTING
    assert c.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert c.unit_mode is False
    s = c.subscription_data_set[0]
    assert s.sub_version == 1795303321879 and s.expression_type == "TAG"
    assert s.code_set == [2598919, 2598920]  # missing codeSet recomputed from tagsSet


def test_subscription_build_and_tags_from_substring() -> None:
    s = SubscriptionData.build("T", " TagA ||TagB|| ", 5)
    assert s.tags_set == ["TagA", "TagB"] and s.code_set == [2598919, 2598920]
    assert SubscriptionData.build("T", "*").is_all
    d = SubscriptionData.from_json(b'{"topic":"T","subString":"TagA||TagB"}')
    assert d.tags_set == ["TagA", "TagB"] and d.code_set == [2598919, 2598920]


def test_cpp_lock_body_with_trailing_newline() -> None:
    lock = LockBatchRequestBody.from_json(CPP_LOCK)
    assert lock.mq_set == [MessageQueue("AccFeat_cpp_2026112123220428956fcpp", "broker-a", 0)]
    assert lock.to_json() == CPP_LOCK.rstrip(b"\n")


def test_register_broker_body_example_and_compressed_form() -> None:
    body = RegisterBrokerBody.from_json(REGISTER)
    tc = body.topic_config_serialize_wrapper.topic_config_table["TopicTest"]
    assert tc == TopicConfig("TopicTest", 4, 4, 6, TopicFilterType.SINGLE_TAG, 0, False)
    assert body.topic_config_serialize_wrapper.data_version == DataVersion(3, 1700000000000)
    assert body.to_json() == REGISTER == body.encode(compress=False)
    packed = body.encode(compress=True)
    plain = zlib.decompress(packed)
    dv = b'{"counter":3,"timestamp":1700000000000}'
    text = b"TopicTest 4 4 6 SINGLE_TAG"
    want = (
        struct.pack(">i", len(dv)) + dv + struct.pack(">i", 1)
        + struct.pack(">i", len(text)) + text + struct.pack(">i", 2) + b"[]"
    )  # fmt: skip
    assert plain == want
    assert RegisterBrokerBody.decode(packed, compressed=True) == body
    assert RegisterBrokerBody.decode(REGISTER) == body


def test_compressed_register_drops_sys_flag_and_order() -> None:
    tc = TopicConfig("T", 8, 8, 7, TopicFilterType.MULTI_TAG, 3, True)
    body = RegisterBrokerBody(TopicConfigSerializeWrapper({"T": tc}, DataVersion(1, 2)), ["f:1"])
    got = RegisterBrokerBody.decode(body.encode(compress=True), compressed=True)
    assert got.topic_config_serialize_wrapper.topic_config_table["T"] == TopicConfig(
        "T", 8, 8, 7, TopicFilterType.MULTI_TAG
    )
    assert got.filter_server_list == ["f:1"]


@pytest.mark.parametrize("junk", [b"", b"xx", zlib.compress(b"\x00\x00\x00\x10{}")])
def test_compressed_register_garbage_is_body_error(junk: bytes) -> None:
    with pytest.raises(BodyError):
        RegisterBrokerBody.decode(junk, compressed=True)


def test_topics_json_pretty_form_parses_back() -> None:
    wrapper = RegisterBrokerBody.from_json(REGISTER).topic_config_serialize_wrapper
    pretty = wrapper.to_json_pretty()
    assert b"\n\t" in pretty and b'"topicConfigTable":{' in pretty
    assert json.loads(pretty) == json.loads(wrapper.to_json())
    assert TopicConfigSerializeWrapper.from_json(pretty) == wrapper


def test_offset_table_unquoted_int_keys() -> None:
    legacy = b'{"offsetTable":{"T@g":{0:5,1:7},"%RETRY%g@g":{0:0}}}'
    w = ConsumerOffsetSerializeWrapper.from_json(legacy)
    assert w.offset_table == {"T@g": {0: 5, 1: 7}, "%RETRY%g@g": {0: 0}}
    assert w.to_json() == b'{"offsetTable":{"%RETRY%g@g":{"0":0},"T@g":{"0":5,"1":7}}}'
    d = B.DelayOffsetSerializeWrapper.from_json(b'{"offsetTable":{1:100,3:"7"}}')
    assert d.offset_table == {1: 100, 3: 7}


def test_misc_small_bodies() -> None:
    assert B.LockBatchResponseBody([MessageQueue("T", "b", 1)]).to_json() == (
        b'{"lockOKMQSet":[{"brokerName":"b","queueId":1,"topic":"T"}]}'
    )
    assert B.GetConsumerListByGroupResponseBody(["a", "b"]).to_json() == (
        b'{"consumerIdList":["a","b"]}'
    )
    assert B.TopicList(["a"]).to_json() == b'{"topicList":["a"]}'
    assert B.TopicList(["a"], "h:1").to_json() == b'{"brokerAddr":"h:1","topicList":["a"]}'
    assert B.KVTable({"k": "v"}).to_json() == b'{"table":{"k":"v"}}'
    assert B.KVTable.from_json(b'{"table":{"k":1}}').table == {"k": "1"}
    sg = B.SubscriptionGroupConfig.from_json(b'{"groupName":"g","retryMaxTimes":"3"}')
    assert sg == B.SubscriptionGroupConfig("g", retry_max_times=3)
    assert MessageQueue("T", "b", 1) < MessageQueue("T", "b", 2) < MessageQueue("U", "a", 0)
    assert len({MessageQueue("T", "b", 1), MessageQueue("T", "b", 1)}) == 1


def test_output_is_ascii_safe_and_compact() -> None:
    out = B.KVTable({"clé": "値\x01"}).to_json()
    assert out == b'{"table":{"cl\\u00e9":"\\u5024\\u0001"}}'
    assert B.KVTable.from_json(out).table == {"clé": "値\x01"}


def test_lenient_reader_leaves_strings_alone() -> None:
    text = '{"a":"{0:1,2:3}","b\\"{7:":{5:"x, 9: y"}, -3 : 2, 1.5:1, ident:4}'
    assert loads_lenient(text) == {
        "a": "{0:1,2:3}",
        'b"{7:': {"5": "x, 9: y"},
        "-3": 2,
        "1.5": 1,
        "ident": 4,
    }


def test_lenient_enum_bool_and_number_forms() -> None:
    c = ConsumerData.from_json(
        b'{"consumeType":"0","messageModel":1,"consumeFromWhere":"CONSUME_FROM_TIMESTAMP",'
        b'"unitMode":"true","unknownMember":{"x":[1,2]}}'
    )
    assert c.consume_type is ConsumeType.CONSUME_ACTIVELY
    assert c.message_model is MessageModel.CLUSTERING
    assert c.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    assert c.unit_mode is True
    for bad in (
        b'{"consumeType":"NOPE"}',
        b'{"consumeType":7}',
        b'{"unitMode":"maybe"}',
        b'{"groupName":{"x":1}}',
        b'{"subscriptionDataSet":{}}',
        b"[]",
        b"not json",
        b"\xff\xfe",
        b"[" * 100000,
    ):
        with pytest.raises(BodyError):
            ConsumerData.from_json(bad)


# --- Hypothesis round trips for every body ------------------------------------------------------
_s = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_name = st.text(alphabet="abcdefXYZ0123456789_-%|", min_size=1, max_size=16)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_mq = st.builds(MessageQueue, _s, _s, _i32)
_dv = st.builds(DataVersion, _i64, _i64)
_tc = st.builds(
    TopicConfig, _name, _i32, _i32, _i32, st.sampled_from(TopicFilterType), _i32, st.booleans()
)
_sub = st.builds(
    lambda topic, expr, ver, cfm: (
        SubscriptionData.build(topic, expr, ver)
        if not cfm
        else SubscriptionData(topic, expr or "*", [], [], ver, "SQL92", True)
    ),
    _s,
    st.one_of(st.just("*"), st.lists(_name, max_size=3).map(" || ".join)),
    _i64,
    st.booleans(),
)
_qd = st.builds(QueueData, _s, _i32, _i32, _i32, _i32)
_bd = st.builds(BrokerData, _s, _s, st.dictionaries(_i64, _s, max_size=3))
_cd = st.builds(
    ConsumerData,
    _s,
    st.sampled_from(ConsumeType),
    st.sampled_from(MessageModel),
    st.sampled_from(ConsumeFromWhere),
    st.lists(_sub, max_size=3),
    st.booleans(),
)
_twrap = st.builds(TopicConfigSerializeWrapper, st.dictionaries(_s, _tc, max_size=3), _dv)
_sgc = st.builds(
    B.SubscriptionGroupConfig, _s, st.booleans(), st.booleans(), st.booleans(), _i32, _i32,
    _i64, _i64, st.booleans(),
)  # fmt: skip

BODY_STRATEGIES: dict[type[Any], st.SearchStrategy[Any]] = {
    TopicRouteData: st.builds(
        TopicRouteData,
        st.lists(_qd, max_size=3),
        st.lists(_bd, max_size=3),
        st.dictionaries(_s, st.lists(_s, max_size=2), max_size=2),
        st.none() | _s,
    ),
    QueueData: _qd,
    BrokerData: _bd,
    ClusterInfo: st.builds(
        ClusterInfo,
        st.dictionaries(_s, _bd, max_size=3),
        st.dictionaries(_s, st.lists(_s, max_size=3), max_size=3),
    ),
    HeartbeatData: st.builds(
        HeartbeatData,
        _s,
        st.lists(st.builds(B.ProducerData, _s), max_size=3),
        st.lists(_cd, max_size=2),
    ),
    ConsumerData: _cd,
    B.ProducerData: st.builds(B.ProducerData, _s),
    SubscriptionData: _sub,
    TopicConfig: _tc,
    DataVersion: _dv,
    TopicConfigSerializeWrapper: _twrap,
    RegisterBrokerBody: st.builds(RegisterBrokerBody, _twrap, st.lists(_s, max_size=3)),
    LockBatchRequestBody: st.builds(
        LockBatchRequestBody, _s, _s, st.lists(_mq, max_size=3), st.booleans()
    ),
    B.LockBatchResponseBody: st.builds(B.LockBatchResponseBody, st.lists(_mq, max_size=3)),
    B.UnlockBatchRequestBody: st.builds(
        B.UnlockBatchRequestBody, _s, _s, st.lists(_mq, max_size=3)
    ),
    B.GetConsumerListByGroupResponseBody: st.builds(
        B.GetConsumerListByGroupResponseBody, st.lists(_s, max_size=4)
    ),
    B.TopicList: st.builds(B.TopicList, st.lists(_s, max_size=4), st.none() | _s),
    B.KVTable: st.builds(B.KVTable, st.dictionaries(_s, _s, max_size=4)),
    B.SubscriptionGroupConfig: _sgc,
    B.SubscriptionGroupWrapper: st.builds(
        B.SubscriptionGroupWrapper, st.dictionaries(_s, _sgc, max_size=3), _dv
    ),
    MessageQueue: _mq,
    ConsumerOffsetSerializeWrapper: st.builds(
        ConsumerOffsetSerializeWrapper,
        st.dictionaries(_s, st.dictionaries(_i32, _i64, max_size=3), max_size=3),
    ),
    B.DelayOffsetSerializeWrapper: st.builds(
        B.DelayOffsetSerializeWrapper, st.dictionaries(_i32, _i64, max_size=4)
    ),
}


def test_every_body_class_has_a_strategy() -> None:
    assert set(B.BODY_CLASSES) == set(BODY_STRATEGIES)


@pytest.mark.parametrize("cls", B.BODY_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_body_round_trip(cls: type[Any], data: st.DataObject) -> None:
    obj = data.draw(BODY_STRATEGIES[cls])
    out = obj.to_json()
    assert out.isascii() and b"\n" not in out
    assert json.loads(out) == obj.to_obj()
    assert cls.from_json(out) == obj
    keys = list(json.loads(out))
    assert keys == sorted(keys)


@settings(max_examples=40, deadline=None)
@given(BODY_STRATEGIES[RegisterBrokerBody])
def test_register_body_compressed_round_trip(body: RegisterBrokerBody) -> None:
    # The text form keeps only name/queues/perm/filter type; names must not contain spaces.
    table = {
        k.replace(" ", "_"): TopicConfig(
            tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_filter_type
        )
        for k, tc in body.topic_config_serialize_wrapper.topic_config_table.items()
    }
    table = {tc.topic_name: tc for tc in table.values()}
    body.topic_config_serialize_wrapper.topic_config_table = table
    assert RegisterBrokerBody.decode(body.encode(compress=True), compressed=True) == body


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _s,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(_s, kids, max_size=4),
    max_leaves=20,
)
_member_names = st.sampled_from(
    ["brokerAddrs", "queueDatas", "brokerDatas", "consumerDataSet", "subscriptionDataSet",
     "topicConfigTable", "offsetTable", "table", "mqSet", "codeSet", "tagsSet", "consumeType",
     "dataVersion", "topicConfigSerializeWrapper", "filterServerTable", "brokerAddrTable",
     "clusterAddrTable", "subVersion", "perm", "unitMode", "topicList", "lockOKMQSet"]
)  # fmt: skip


@pytest.mark.parametrize("cls", B.BODY_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_from_json_arbitrary_input_decodes_or_raises_value_error(
    cls: type[Any], data: st.DataObject
) -> None:
    raw = data.draw(
        st.one_of(
            st.binary(max_size=80),
            _json.map(lambda v: json.dumps(v).encode()),
            st.dictionaries(_member_names, _json, max_size=4).map(lambda v: json.dumps(v).encode()),
        )
    )
    try:
        obj = cls.from_json(raw)
    except ValueError:
        return
    assert isinstance(obj, cls)
    cls.from_json(obj.to_json())
