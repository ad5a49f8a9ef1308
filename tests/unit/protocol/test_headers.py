"""Typed headers: spec §3 keys, required fields, parsing rules, and round trips for all."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import headers as h
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError, ProtocolError

ALL_HEADERS = sorted(
    {
        obj
        for obj in (getattr(h, name) for name in h.__all__)
        if isinstance(obj, type) and issubclass(obj, h.CommandCustomHeader)
        and obj is not h.CommandCustomHeader
    },
    key=lambda c: c.__name__,
)  # fmt: skip

# Spec §3: header class -> (required wire keys, optional wire keys). "+bname" adds bname.
SPEC_KEYS: dict[str, tuple[set[str], set[str]]] = {
    "SendMessageRequestHeader": (
        {"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
         "bornTimestamp", "flag"},
        {"properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch", "bname"},
    ),
    "SendMessageResponseHeader": (
        {"msgId", "queueId", "queueOffset"}, {"transactionId", "MSG_REGION", "TRACE_ON"},
    ),
    "EndTransactionRequestHeader": (
        {"producerGroup", "tranStateTableOffset", "commitLogOffset", "commitOrRollback", "msgId"},
        {"fromTransactionCheck", "transactionId", "bname"},
    ),
    "CheckTransactionStateRequestHeader": (
        {"tranStateTableOffset", "commitLogOffset"},
        {"msgId", "transactionId", "offsetMsgId", "bname"},
    ),
    "PullMessageRequestHeader": (
        {"consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
         "commitOffset", "suspendTimeoutMillis", "subVersion"},
        {"subscription", "expressionType", "bname"},
    ),
    "PullMessageResponseHeader": (
        {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}, set(),
    ),
    "QueryConsumerOffsetRequestHeader": ({"consumerGroup", "topic", "queueId"}, {"bname"}),
    "QueryConsumerOffsetResponseHeader": ({"offset"}, set()),
    "UpdateConsumerOffsetRequestHeader": (
        {"consumerGroup", "topic", "queueId", "commitOffset"}, {"bname"},
    ),
    "UpdateConsumerOffsetResponseHeader": (set(), set()),
    "GetMaxOffsetRequestHeader": ({"topic", "queueId"}, {"bname"}),
    "GetMaxOffsetResponseHeader": ({"offset"}, set()),
    "GetMinOffsetRequestHeader": ({"topic", "queueId"}, {"bname"}),
    "GetMinOffsetResponseHeader": ({"offset"}, set()),
    "SearchOffsetRequestHeader": ({"topic", "queueId", "timestamp"}, {"bname"}),
    "SearchOffsetResponseHeader": ({"offset"}, set()),
    "GetEarliestMsgStoretimeRequestHeader": ({"topic", "queueId"}, {"bname"}),
    "GetEarliestMsgStoretimeResponseHeader": ({"timestamp"}, set()),
    "UnregisterClientRequestHeader": ({"clientID"}, {"producerGroup", "consumerGroup"}),
    "GetConsumerListByGroupRequestHeader": ({"consumerGroup"}, set()),
    "NotifyConsumerIdsChangedRequestHeader": ({"consumerGroup"}, set()),
    "ConsumerSendMsgBackRequestHeader": (
        {"offset", "group", "delayLevel"},
        {"originMsgId", "originTopic", "unitMode", "maxReconsumeTimes", "bname"},
    ),
    "QueryMessageRequestHeader": (
        {"topic", "key", "maxNum", "beginTimestamp", "endTimestamp"}, {"_UNIQUE_KEY_QUERY"},
    ),
    "QueryMessageResponseHeader": (
        {"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"}, set(),
    ),
    "ViewMessageRequestHeader": ({"offset"}, set()),
    "RegisterBrokerRequestHeader": (
        {"brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId"},
        {"compressed", "bodyCrc32"},
    ),
    "RegisterBrokerResponseHeader": (set(), {"haServerAddr", "masterAddr"}),
    "UnRegisterBrokerRequestHeader": (
        {"brokerName", "brokerAddr", "clusterName", "brokerId"}, set(),
    ),
    "GetRouteInfoRequestHeader": ({"topic"}, {"acceptStandardJsonOnly"}),
    "QueryDataVersionRequestHeader": (
        {"brokerName", "brokerAddr", "clusterName", "brokerId"}, set(),
    ),
    "QueryDataVersionResponseHeader": ({"changed"}, set()),
    "PutKVConfigRequestHeader": ({"namespace", "key", "value"}, set()),
    "GetKVConfigRequestHeader": ({"namespace", "key"}, set()),
    "GetKVConfigResponseHeader": (set(), {"value"}),
    "DeleteKVConfigRequestHeader": ({"namespace", "key"}, set()),
    "GetKVListByNamespaceRequestHeader": ({"namespace"}, set()),
    "CreateTopicRequestHeader": (
        {"topic", "defaultTopic", "readQueueNums", "writeQueueNums", "perm", "topicFilterType"},
        {"topicSysFlag", "order"},
    ),
    "DeleteTopicRequestHeader": ({"topic"}, set()),
    "DeleteTopicFromNamesrvRequestHeader": ({"topic"}, {"clusterName"}),
    "DeleteSubscriptionGroupRequestHeader": ({"groupName"}, {"removeOffset"}),
    "GetConsumerConnectionListRequestHeader": ({"consumerGroup"}, set()),
    "GetConsumeStatsRequestHeader": ({"consumerGroup"}, {"topic"}),
    "WipeWritePermOfBrokerRequestHeader": ({"brokerName"}, set()),
    "WipeWritePermOfBrokerResponseHeader": ({"wipeTopicCount"}, set()),
    "AddWritePermOfBrokerRequestHeader": ({"brokerName"}, set()),
    "AddWritePermOfBrokerResponseHeader": ({"addTopicCount"}, set()),
    "GetTopicsByClusterRequestHeader": ({"cluster"}, set()),
    "ResetOffsetRequestHeader": ({"topic", "group", "timestamp", "isForce"}, set()),
    "GetConsumerStatusRequestHeader": ({"topic", "group"}, {"clientAddr"}),
    "GetConsumerRunningInfoRequestHeader": ({"consumerGroup", "clientId"}, {"jstackEnable"}),
    "ConsumeMessageDirectlyResultRequestHeader": (
        {"consumerGroup"}, {"clientId", "msgId", "brokerName"},
    ),
}  # fmt: skip

# Spec §2.1 codes whose request carries a header (HEART_BEAT, LOCK/UNLOCK_BATCH_MQ,
# GET_BROKER_CLUSTER_INFO and GET_ALL_TOPIC_CONFIG have none).
SPEC_REQUEST_HEADER_CODES = {
    "SEND_MESSAGE": "SendMessageRequestHeader", "SEND_MESSAGE_V2": "SendMessageRequestHeader",
    "SEND_BATCH_MESSAGE": "SendMessageRequestHeader", "PULL_MESSAGE": "PullMessageRequestHeader",
    "QUERY_MESSAGE": "QueryMessageRequestHeader",
    "QUERY_CONSUMER_OFFSET": "QueryConsumerOffsetRequestHeader",
    "UPDATE_CONSUMER_OFFSET": "UpdateConsumerOffsetRequestHeader",
    "UPDATE_AND_CREATE_TOPIC": "CreateTopicRequestHeader",
    "SEARCH_OFFSET_BY_TIMESTAMP": "SearchOffsetRequestHeader",
    "GET_MAX_OFFSET": "GetMaxOffsetRequestHeader", "GET_MIN_OFFSET": "GetMinOffsetRequestHeader",
    "GET_EARLIEST_MSG_STORETIME": "GetEarliestMsgStoretimeRequestHeader",
    "VIEW_MESSAGE_BY_ID": "ViewMessageRequestHeader",
    "UNREGISTER_CLIENT": "UnregisterClientRequestHeader",
    "CONSUMER_SEND_MSG_BACK": "ConsumerSendMsgBackRequestHeader",
    "END_TRANSACTION": "EndTransactionRequestHeader",
    "GET_CONSUMER_LIST_BY_GROUP": "GetConsumerListByGroupRequestHeader",
    "CHECK_TRANSACTION_STATE": "CheckTransactionStateRequestHeader",
    "NOTIFY_CONSUMER_IDS_CHANGED": "NotifyConsumerIdsChangedRequestHeader",
    "PUT_KV_CONFIG": "PutKVConfigRequestHeader", "GET_KV_CONFIG": "GetKVConfigRequestHeader",
    "DELETE_KV_CONFIG": "DeleteKVConfigRequestHeader",
    "REGISTER_BROKER": "RegisterBrokerRequestHeader",
    "UNREGISTER_BROKER": "UnRegisterBrokerRequestHeader",
    "GET_ROUTEINFO_BY_TOPIC": "GetRouteInfoRequestHeader",
    "GET_CONSUMER_CONNECTION_LIST": "GetConsumerConnectionListRequestHeader",
    "WIPE_WRITE_PERM_OF_BROKER": "WipeWritePermOfBrokerRequestHeader",
    "ADD_WRITE_PERM_OF_BROKER": "AddWritePermOfBrokerRequestHeader",
    "DELETE_SUBSCRIPTIONGROUP": "DeleteSubscriptionGroupRequestHeader",
    "GET_CONSUME_STATS": "GetConsumeStatsRequestHeader",
    "DELETE_TOPIC_IN_BROKER": "DeleteTopicRequestHeader",
    "DELETE_TOPIC_IN_NAMESRV": "DeleteTopicFromNamesrvRequestHeader",
    "GET_KVLIST_BY_NAMESPACE": "GetKVListByNamespaceRequestHeader",
    "RESET_CONSUMER_CLIENT_OFFSET": "ResetOffsetRequestHeader",
    "INVOKE_BROKER_TO_RESET_OFFSET": "ResetOffsetRequestHeader",
    "GET_CONSUMER_STATUS_FROM_CLIENT": "GetConsumerStatusRequestHeader",
    "INVOKE_BROKER_TO_GET_CONSUMER_STATUS": "GetConsumerStatusRequestHeader",
    "GET_TOPICS_BY_CLUSTER": "GetTopicsByClusterRequestHeader",
    "GET_CONSUMER_RUNNING_INFO": "GetConsumerRunningInfoRequestHeader",
    "CONSUME_MESSAGE_DIRECTLY": "ConsumeMessageDirectlyResultRequestHeader",
    "QUERY_DATA_VERSION": "QueryDataVersionRequestHeader",
}  # fmt: skip


def test_every_spec_header_exists_with_its_keys() -> None:
    for name, (required, optional) in SPEC_KEYS.items():
        cls = getattr(h, name)
        req = {f.key for f in cls.FIELDS if f.required}
        opt = {f.key for f in cls.FIELDS if not f.required}
        assert (name, req) == (name, required)
        assert (name, opt) == (name, optional)


def test_request_header_registry_covers_spec_codes() -> None:
    for code_name, cls_name in SPEC_REQUEST_HEADER_CODES.items():
        assert h.REQUEST_HEADERS[RequestCode[code_name]].__name__ == cls_name
    for code in h.REQUEST_HEADERS:
        assert code in RequestCode._value2member_map_
    for code in (34, 41, 42, 106, 21):
        assert code not in h.REQUEST_HEADERS
        assert h.decode_request_header(code, {}) is None


def test_send_v2_keys_are_a_to_n() -> None:
    assert [f.key for f in h.SEND_V2_SPECS] == list("abcdefghijklmn")


def test_headers_are_slotted() -> None:
    for cls in ALL_HEADERS:
        assert "__slots__" in cls.__dict__, cls.__name__
        assert not hasattr(_instance(cls), "__dict__"), cls.__name__


def _value(kind: str, n: int) -> object:
    return {"str": f"v{n}", "int": n, "Long": 2**40 + n, "bool": n % 2 == 0}[kind]


def _instance(cls: type[h.CommandCustomHeader]) -> h.CommandCustomHeader:
    return cls(**{f.attr: _value(f.kind, i) for i, f in enumerate(cls.FIELDS)})


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_missing_required_fields_name_the_key(cls: type[h.CommandCustomHeader]) -> None:
    full = _instance(cls).to_ext()
    for f in cls.FIELDS:
        if not f.required:
            continue
        ext = {k: v for k, v in full.items() if k != f.key}
        with pytest.raises(HeaderFieldError) as info:
            cls.from_ext(ext)
        assert info.value.code == ResponseCode.SYSTEM_ERROR
        assert info.value.remark == f"the custom field <{f.key}> is null"
        assert isinstance(info.value, ProtocolError)


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_malformed_numbers_name_the_key(cls: type[h.CommandCustomHeader]) -> None:
    full = _instance(cls).to_ext()
    for f in cls.FIELDS:
        if f.kind not in ("int", "Long"):
            continue
        for bad in ("x1", "", "1.5", str(2**63) if f.kind == "Long" else str(2**31)):
            with pytest.raises(HeaderFieldError) as info:
                cls.from_ext({**full, f.key: bad})
            assert f"<{f.key}>" in info.value.remark


def test_bool_parsing_like_java_plus_cpp_one() -> None:
    base = {"topic": "t"}
    for raw, want in [("true", True), ("TRUE", True), ("True", True), ("1", True),
                      ("false", False), ("0", False), ("yes", False), ("", False)]:  # fmt: skip
        hdr = h.GetRouteInfoRequestHeader.from_ext({**base, "acceptStandardJsonOnly": raw})
        assert hdr.accept_standard_json_only is want


def test_optional_defaults_and_none_ext() -> None:
    assert h.RegisterBrokerResponseHeader.from_ext(None) == h.RegisterBrokerResponseHeader()
    assert h.RegisterBrokerResponseHeader().to_ext() == {}
    back = h.ConsumerSendMsgBackRequestHeader.from_ext({"offset": "1", "group": "g",
                                                        "delayLevel": "0"})  # fmt: skip
    assert back.unit_mode is False and back.max_reconsume_times is None
    assert back.to_ext()["unitMode"] == "false"


def test_unknown_keys_are_ignored() -> None:
    ext = {"AccessKey": "", "Signature": "x", "OnsChannel": "ALIYUN", "consumerGroup": "g"}
    assert h.GetConsumerListByGroupRequestHeader.from_ext(ext).consumer_group == "g"


def test_response_to_ext_emits_required_fields_as_strings() -> None:
    resp = h.SendMessageResponseHeader(msg_id="AB", queue_id=1, queue_offset=2,
                                       msg_region="DefaultRegion", trace_on="true")  # fmt: skip
    assert resp.to_ext() == {"msgId": "AB", "queueId": "1", "queueOffset": "2",
                             "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}  # fmt: skip
    pull = h.PullMessageResponseHeader(0, 5, 0, 10).to_ext()
    assert pull == {"suggestWhichBrokerId": "0", "nextBeginOffset": "5", "minOffset": "0",
                    "maxOffset": "10"}  # fmt: skip
    assert h.QueryDataVersionResponseHeader(changed=False).to_ext() == {"changed": "false"}


def test_decode_send_header_picks_v1_or_v2() -> None:
    hdr = h.SendMessageRequestHeader("pg", "t", "TBW102", 4, 0, 0, 1, 0, batch=True)
    assert h.decode_send_header(310, hdr.to_ext_v2()) == hdr
    assert h.decode_send_header(320, hdr.to_ext_v2()) == hdr
    assert h.decode_send_header(10, hdr.to_ext()) == hdr
    assert h.decode_request_header(320, hdr.to_ext_v2()) == hdr
    assert hdr.to_ext_v2()["m"] == "true"
    with pytest.raises(HeaderFieldError):
        h.decode_send_header(310, hdr.to_ext())


def test_query_message_unique_key_flag() -> None:
    ext = {"topic": "t", "key": "k", "maxNum": "32", "beginTimestamp": "0",
           "endTimestamp": "9", h.UNIQUE_KEY_QUERY: "true"}  # fmt: skip
    assert h.QueryMessageRequestHeader.from_ext(ext).unique_key_query is True


# --- Hypothesis: every header round trips through to_ext/from_ext and a JSON command --------

_KIND_STRATEGY = {
    "str": st.text(max_size=20),
    "int": st.integers(-(2**31), 2**31 - 1),
    "Long": st.integers(-(2**63), 2**63 - 1),
    "bool": st.booleans(),
}


@st.composite
def header_instances(draw: st.DrawFn) -> h.CommandCustomHeader:
    """Any header class with values in its Java types' ranges."""
    cls = draw(st.sampled_from(ALL_HEADERS))
    kwargs = {}
    for f in cls.FIELDS:
        strat = _KIND_STRATEGY[f.kind]
        kwargs[f.attr] = draw(strat if f.required else st.just(f.default) | strat)
    return cls(**kwargs)


@given(header_instances(), st.sampled_from([0, 1, 2]))
def test_every_header_round_trips(hdr: h.CommandCustomHeader, serialize_type: int) -> None:
    cls = type(hdr)
    ext = hdr.to_ext()
    assert all(isinstance(v, str) for v in ext.values())
    assert cls.from_ext(ext) == hdr
    cmd = RemotingCommand(0, ext_fields=ext, serialize_type=serialize_type, flag=1)
    back = RemotingCommand.decode(cmd.encode()[4:])
    if serialize_type == 1:  # binary reads empty strings as null (absent)
        expected = cls(**{
            f.attr: (None if getattr(hdr, f.attr) == "" else getattr(hdr, f.attr))
            for f in cls.FIELDS
        })  # fmt: skip
        if any(f.required and getattr(expected, f.attr) is None for f in cls.FIELDS):
            with pytest.raises(HeaderFieldError):
                cls.from_ext(back.ext_fields)
            return
        assert cls.from_ext(back.ext_fields) == expected
    else:
        assert cls.from_ext(back.ext_fields) == hdr


@given(
    st.builds(
        h.SendMessageRequestHeader,
        producer_group=st.text(max_size=10), topic=st.text(max_size=10),
        default_topic=st.text(max_size=10), default_topic_queue_nums=st.integers(0, 64),
        queue_id=st.integers(-1, 1024), sys_flag=st.integers(0, 0x7FF),
        born_timestamp=st.integers(0, 2**62), flag=st.integers(-(2**31), 2**31 - 1),
        properties=st.none() | st.text(max_size=40),
        reconsume_times=st.none() | st.integers(0, 32), unit_mode=st.none() | st.booleans(),
        max_reconsume_times=st.none() | st.integers(-1, 32), batch=st.none() | st.booleans(),
        bname=st.none() | st.text(max_size=10),
    )
)  # fmt: skip
def test_send_header_v2_round_trip(hdr: h.SendMessageRequestHeader) -> None:
    assert h.SendMessageRequestHeader.from_ext_v2(hdr.to_ext_v2()) == hdr
    assert h.SendMessageRequestHeader.from_ext(hdr.to_ext()) == hdr


# --- send_v2_fields: the send core's shortcut must accept exactly what from_ext_v2 accepts ---

_V2_VALUES = st.one_of(
    st.sampled_from(["0", "1", "-1", "4", "true", "false", "True", "1", "", " 7", "x",
                     "2147483647", "2147483648", "-2147483649", "9223372036854775808"]),
    st.text(max_size=6),
)  # fmt: skip
_V2_BASE = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0",
            "g": "1700000000000", "h": "0", "i": "WAIT\x01true\x02TAGS\x01a\x02"}  # fmt: skip


def _v2_expected(ext: dict[str, str]) -> tuple[object, ...] | None:
    try:
        hdr = h.SendMessageRequestHeader.from_ext_v2(ext)
    except HeaderFieldError:
        return None
    if hdr.batch:
        return None
    return (hdr.topic, hdr.queue_id, hdr.sys_flag, hdr.born_timestamp, hdr.flag,
            hdr.properties, hdr.reconsume_times or 0)  # fmt: skip


def test_send_v2_fields_reads_a_java_header() -> None:
    assert h.send_v2_fields(_V2_BASE) == (
        "T", 0, 0, 1700000000000, 0, "WAIT\x01true\x02TAGS\x01a\x02", 0
    )
    assert h.send_v2_fields({**_V2_BASE, "j": "3", "l": "16", "m": "false"}) == (
        "T", 0, 0, 1700000000000, 0, "WAIT\x01true\x02TAGS\x01a\x02", 3
    )


@pytest.mark.parametrize("key", ["b", "e", "f", "g", "h"])
def test_send_v2_fields_leaves_a_missing_required_key_to_the_header(key: str) -> None:
    ext = {k: v for k, v in _V2_BASE.items() if k != key}
    assert h.send_v2_fields(ext) is None
    with pytest.raises(HeaderFieldError) as info:
        h.SendMessageRequestHeader.from_ext_v2(ext)
    assert info.value.remark == f"the custom field <{key}> is null"


@pytest.mark.parametrize("key", ["a", "c", "d"])
def test_a_v2_send_without_producer_group_or_default_topic_reads_them_null(key: str) -> None:
    """SendMessageRequestHeaderV2.decode (4.9.8's fast decode of 310/320/325) leaves a missing
    field null: the send goes on, as on the reference; SEND_MESSAGE's long keys stay required."""
    ext = {k: v for k, v in _V2_BASE.items() if k != key}
    hdr = h.SendMessageRequestHeader.from_ext_v2(ext)
    attr = {"a": "producer_group", "c": "default_topic", "d": "default_topic_queue_nums"}[key]
    assert getattr(hdr, attr) is None
    assert hdr.to_ext_v2() == ext  # nothing written for the null field (writeIfNotNull)
    assert h.send_v2_fields(ext) == (
        "T", 0, 0, 1700000000000, 0, "WAIT\x01true\x02TAGS\x01a\x02", 0
    )
    v1 = h.SendMessageRequestHeader.from_ext_v2(_V2_BASE).to_ext()  # SEND_MESSAGE's long keys
    del v1[{"a": "producerGroup", "c": "defaultTopic", "d": "defaultTopicQueueNums"}[key]]
    with pytest.raises(HeaderFieldError):
        h.SendMessageRequestHeader.from_ext(v1)


def test_send_v2_fields_leaves_batches_to_the_header() -> None:
    assert h.send_v2_fields({**_V2_BASE, "m": "true"}) is None


@given(st.dictionaries(st.sampled_from(list("abcdefghijklmn")), _V2_VALUES, max_size=6))
def test_send_v2_fields_agrees_with_from_ext_v2(changes: dict[str, str]) -> None:
    ext = {**_V2_BASE, **changes}
    got = h.send_v2_fields(ext)
    expected = _v2_expected(ext)
    if got is not None:  # whatever the shortcut reads, the typed header reads the same
        assert got == expected
    elif expected is not None:  # a shortcut miss is only allowed for non-"false" batch flags
        assert ext.get("m") not in (None, "false")
