"""Codes, flags and names against the spec tables (§1.7, §2.1, §2.2, §5.3, §8)."""

from __future__ import annotations

import pytest

from protocol import codes
from protocol.codes import (
    CURRENT_VERSION,
    RPC_ONEWAY,
    RPC_TYPE_RESPONSE,
    CompressionType,
    LanguageCode,
    MessageSysFlag,
    PermName,
    PullSysFlag,
    RequestCode,
    ResponseCode,
    SerializeType,
)

# Spec §2.1, every row (name -> code), written out independently of protocol/codes.py.
SPEC_REQUEST_CODES = {
    "SEND_MESSAGE": 10, "PULL_MESSAGE": 11, "QUERY_MESSAGE": 12, "QUERY_BROKER_OFFSET": 13,
    "QUERY_CONSUMER_OFFSET": 14, "UPDATE_CONSUMER_OFFSET": 15, "UPDATE_AND_CREATE_TOPIC": 17,
    "GET_ALL_TOPIC_CONFIG": 21, "GET_TOPIC_CONFIG_LIST": 22, "GET_TOPIC_NAME_LIST": 23,
    "UPDATE_BROKER_CONFIG": 25, "GET_BROKER_CONFIG": 26, "TRIGGER_DELETE_FILES": 27,
    "GET_BROKER_RUNTIME_INFO": 28, "SEARCH_OFFSET_BY_TIMESTAMP": 29, "GET_MAX_OFFSET": 30,
    "GET_MIN_OFFSET": 31, "GET_EARLIEST_MSG_STORETIME": 32, "VIEW_MESSAGE_BY_ID": 33,
    "HEART_BEAT": 34, "UNREGISTER_CLIENT": 35, "CONSUMER_SEND_MSG_BACK": 36,
    "END_TRANSACTION": 37, "GET_CONSUMER_LIST_BY_GROUP": 38, "CHECK_TRANSACTION_STATE": 39,
    "NOTIFY_CONSUMER_IDS_CHANGED": 40, "LOCK_BATCH_MQ": 41, "UNLOCK_BATCH_MQ": 42,
    "GET_ALL_CONSUMER_OFFSET": 43, "GET_ALL_DELAY_OFFSET": 45, "CHECK_CLIENT_CONFIG": 46,
    "UPDATE_AND_CREATE_ACL_CONFIG": 50, "DELETE_ACL_CONFIG": 51,
    "GET_BROKER_CLUSTER_ACL_INFO": 52, "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG": 53,
    "GET_BROKER_CLUSTER_ACL_CONFIG": 54,  # RocketMQ 4.7-4.8 (not in §2.1: 4.9 dropped it)
    "PUT_KV_CONFIG": 100, "GET_KV_CONFIG": 101, "DELETE_KV_CONFIG": 102,
    "REGISTER_BROKER": 103, "UNREGISTER_BROKER": 104, "GET_ROUTEINFO_BY_TOPIC": 105,
    "GET_BROKER_CLUSTER_INFO": 106, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP": 200,
    "GET_ALL_SUBSCRIPTIONGROUP_CONFIG": 201, "GET_TOPIC_STATS_INFO": 202,
    "GET_CONSUMER_CONNECTION_LIST": 203, "GET_PRODUCER_CONNECTION_LIST": 204,
    "WIPE_WRITE_PERM_OF_BROKER": 205, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER": 206,
    "DELETE_SUBSCRIPTIONGROUP": 207, "GET_CONSUME_STATS": 208, "SUSPEND_CONSUMER": 209,
    "RESUME_CONSUMER": 210, "RESET_CONSUMER_OFFSET_IN_CONSUMER": 211,
    "RESET_CONSUMER_OFFSET_IN_BROKER": 212, "ADJUST_CONSUMER_THREAD_POOL": 213,
    "WHO_CONSUME_THE_MESSAGE": 214, "DELETE_TOPIC_IN_BROKER": 215,
    "DELETE_TOPIC_IN_NAMESRV": 216, "GET_KVLIST_BY_NAMESPACE": 219,
    "RESET_CONSUMER_CLIENT_OFFSET": 220, "GET_CONSUMER_STATUS_FROM_CLIENT": 221,
    "INVOKE_BROKER_TO_RESET_OFFSET": 222, "INVOKE_BROKER_TO_GET_CONSUMER_STATUS": 223,
    "GET_TOPICS_BY_CLUSTER": 224, "QUERY_TOPIC_CONSUME_BY_WHO": 300,
    "REGISTER_FILTER_SERVER": 301, "REGISTER_MESSAGE_FILTER_CLASS": 302,
    "QUERY_CONSUME_TIME_SPAN": 303, "GET_SYSTEM_TOPIC_LIST_FROM_NS": 304,
    "GET_SYSTEM_TOPIC_LIST_FROM_BROKER": 305, "CLEAN_EXPIRED_CONSUMEQUEUE": 306,
    "GET_CONSUMER_RUNNING_INFO": 307, "QUERY_CORRECTION_OFFSET": 308,
    "CONSUME_MESSAGE_DIRECTLY": 309, "SEND_MESSAGE_V2": 310, "GET_UNIT_TOPIC_LIST": 311,
    "GET_HAS_UNIT_SUB_TOPIC_LIST": 312, "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST": 313,
    "CLONE_GROUP_OFFSET": 314, "VIEW_BROKER_STATS_DATA": 315, "CLEAN_UNUSED_TOPIC": 316,
    "GET_BROKER_CONSUME_STATS": 317, "UPDATE_NAMESRV_CONFIG": 318, "GET_NAMESRV_CONFIG": 319,
    "SEND_BATCH_MESSAGE": 320, "QUERY_CONSUME_QUEUE": 321, "QUERY_DATA_VERSION": 322,
    "RESUME_CHECK_HALF_MESSAGE": 323, "SEND_REPLY_MESSAGE": 324, "SEND_REPLY_MESSAGE_V2": 325,
    "PUSH_REPLY_MESSAGE_TO_CLIENT": 326, "ADD_WRITE_PERM_OF_BROKER": 327,
    "GET_ALL_PRODUCER_INFO": 328, "DELETE_EXPIRED_COMMITLOG": 329,
}  # fmt: skip

# Spec §2.2, every row.
SPEC_RESPONSE_CODES = {
    "SUCCESS": 0, "SYSTEM_ERROR": 1, "SYSTEM_BUSY": 2, "REQUEST_CODE_NOT_SUPPORTED": 3,
    "TRANSACTION_FAILED": 4, "FLUSH_DISK_TIMEOUT": 10, "SLAVE_NOT_AVAILABLE": 11,
    "FLUSH_SLAVE_TIMEOUT": 12, "MESSAGE_ILLEGAL": 13, "SERVICE_NOT_AVAILABLE": 14,
    "VERSION_NOT_SUPPORTED": 15, "NO_PERMISSION": 16, "TOPIC_NOT_EXIST": 17,
    "TOPIC_EXIST_ALREADY": 18, "PULL_NOT_FOUND": 19, "PULL_RETRY_IMMEDIATELY": 20,
    "PULL_OFFSET_MOVED": 21, "QUERY_NOT_FOUND": 22, "SUBSCRIPTION_PARSE_FAILED": 23,
    "SUBSCRIPTION_NOT_EXIST": 24, "SUBSCRIPTION_NOT_LATEST": 25,
    "SUBSCRIPTION_GROUP_NOT_EXIST": 26, "FILTER_DATA_NOT_EXIST": 27,
    "FILTER_DATA_NOT_LATEST": 28, "TRANSACTION_SHOULD_COMMIT": 200,
    "TRANSACTION_SHOULD_ROLLBACK": 201, "TRANSACTION_STATE_UNKNOW": 202,
    "TRANSACTION_STATE_GROUP_WRONG": 203, "NO_BUYER_ID": 204, "NOT_IN_CURRENT_UNIT": 205,
    "CONSUMER_NOT_ONLINE": 206, "CONSUME_MSG_TIMEOUT": 207, "NO_MESSAGE": 208,
    "UPDATE_AND_CREATE_ACL_CONFIG_FAILED": 209, "DELETE_ACL_CONFIG_FAILED": 210,
    "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED": 211, "FLOW_CONTROL": 215,
}  # fmt: skip

SPEC_LANGUAGES = {
    "JAVA": 0, "CPP": 1, "DOTNET": 2, "PYTHON": 3, "DELPHI": 4, "ERLANG": 5, "RUBY": 6,
    "OTHER": 7, "HTTP": 8, "GO": 9, "PHP": 10, "OMS": 11, "RUST": 12,
}  # fmt: skip


def test_request_codes_match_spec_exactly() -> None:
    assert {m.name: m.value for m in RequestCode} == SPEC_REQUEST_CODES


def test_response_codes_match_spec_exactly() -> None:
    assert {m.name: m.value for m in ResponseCode} == SPEC_RESPONSE_CODES


def test_language_codes_match_spec_exactly() -> None:
    assert {m.name: m.value for m in LanguageCode} == SPEC_LANGUAGES


def test_serialize_types_flags_and_version() -> None:
    assert (SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK) == (0, 1, 2)
    assert (RPC_TYPE_RESPONSE, RPC_ONEWAY, CURRENT_VERSION) == (1, 2, 409)


def test_name_of_keeps_unknown_codes() -> None:
    assert RequestCode.name_of(105) == "GET_ROUTEINFO_BY_TOPIC"
    assert RequestCode.name_of(217) == "217"
    assert ResponseCode.name_of(215) == "FLOW_CONTROL"


def test_perm_name() -> None:
    assert (PermName.PERM_PRIORITY, PermName.PERM_READ, PermName.PERM_WRITE) == (8, 4, 2)
    assert PermName.PERM_INHERIT == 1
    assert PermName.to_string(7) == "RWX"
    assert PermName.to_string(6) == "RW-"
    assert PermName.is_writeable(6) and not PermName.is_writeable(4)
    assert PermName.is_readable(4) and PermName.is_inherited(7)


def test_pull_sys_flag() -> None:
    assert PullSysFlag.build(True, True, False) == 3
    assert PullSysFlag.build(False, True, True) == 6
    assert PullSysFlag.clear_commit_offset_flag(7) == 6
    assert PullSysFlag.FLAG_LITE_PULL_MESSAGE == 0x10
    bits = (PullSysFlag.FLAG_COMMIT_OFFSET, PullSysFlag.FLAG_SUSPEND,
            PullSysFlag.FLAG_SUBSCRIPTION, PullSysFlag.FLAG_CLASS_FILTER)  # fmt: skip
    for n in range(16):
        on = [bool(n >> i & 1) for i in range(4)]
        want = sum(int(b) for b, o in zip(bits, on, strict=True) if o)
        got = PullSysFlag.build(*on)
        assert got == want and type(got) is int


@pytest.mark.parametrize(
    ("flag", "ctype"),
    [(0x1, CompressionType.ZLIB), (0x301, CompressionType.ZLIB), (0x101, CompressionType.LZ4),
     (0x201, CompressionType.ZSTD)],
)  # fmt: skip
def test_compression_type(flag: int, ctype: CompressionType) -> None:
    assert MessageSysFlag.get_compression_type(flag) is ctype


def test_message_sys_flag_transaction_helpers() -> None:
    f = MessageSysFlag.TRANSACTION_PREPARED_TYPE | MessageSysFlag.MULTI_TAGS_FLAG
    assert MessageSysFlag.get_transaction_value(f) == 0x4
    g = MessageSysFlag.reset_transaction_value(f, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
    assert g == 0x8 | 0x2
    assert MessageSysFlag.get_transaction_value(0xC | 0x1) == 0xC
    assert MessageSysFlag.set_compression_type(0, CompressionType.ZLIB) == 0x301
    assert MessageSysFlag.clear_compressed_flag(0x301) == 0x300
    assert MessageSysFlag.BORNHOST_V6_FLAG == 0x10
    assert MessageSysFlag.STOREHOSTADDRESS_V6_FLAG == 0x20


def test_system_names() -> None:
    assert codes.AUTO_CREATE_TOPIC_KEY_TOPIC == "TBW102"
    assert codes.SCHEDULE_TOPIC == "SCHEDULE_TOPIC_XXXX"
    assert codes.retry_topic("g") == "%RETRY%g"
    assert codes.dlq_topic("g") == "%DLQ%g"
    assert codes.reply_topic("DefaultCluster") == "DefaultCluster_REPLY_TOPIC"
    assert codes.is_system_topic("rmq_sys_x") and codes.is_system_topic("TBW102")
    assert not codes.is_system_topic("TopicTest")
    assert "OFFSET_MOVED_EVENT" in codes.NOT_ALLOWED_SEND_TOPICS
    assert codes.CID_RMQ_SYS_TRANS == "CID_RMQ_SYS_TRANS"
    assert (codes.MASTER_ID, codes.DEFAULT_REGION) == (0, "DefaultRegion")
