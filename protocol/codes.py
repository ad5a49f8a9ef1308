"""Request, response and language codes, serialize types, flag bits and system names.

Mirrors common/protocol/RequestCode.java, common/protocol/ResponseCode.java,
remoting/protocol/{RemotingSysResponseCode,LanguageCode,SerializeType}.java,
common/constant/PermName.java, common/sysflag/{PullSysFlag,MessageSysFlag}.java,
common/MixAll.java and common/topic/TopicValidator.java, RocketMQ 4.9.x.

Decoders keep unknown codes as plain ints (never raise on them): look codes up with
`RequestCode.name_of(code)` when logging.
"""

from __future__ import annotations

import logging
from enum import IntEnum, IntFlag
from typing import Final

log = logging.getLogger(__name__)

# RemotingCommand.flag bits (RemotingCommand.RPC_TYPE / RPC_ONEWAY).
RPC_TYPE_RESPONSE: Final = 1
RPC_ONEWAY: Final = 2

# MQVersion.Version.V4_9_8.ordinal(): the `version` we put in every command we create.
CURRENT_VERSION: Final = 409


class SerializeType(IntEnum):
    """Header serialization, the top byte of the header-length word."""

    JSON = 0
    ROCKETMQ = 1
    MSGPACK = 2  # ours: the native fast path for actormq clients


class LanguageCode(IntEnum):
    """Sender's language; JSON carries the name, binary the value."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


def language_name(code: int) -> str:
    """LanguageCode as fastjson writes the enum (its name)."""
    try:
        return LanguageCode(code).name
    except ValueError:
        return "OTHER"


class _NamedCode(IntEnum):
    """An IntEnum whose members can be looked up without raising on unknown values."""

    @classmethod
    def name_of(cls, code: int) -> str:
        """Member name for `code`, or the decimal code when unknown."""
        member = cls._value2member_map_.get(code)
        return member.name if member is not None else str(code)


class RequestCode(_NamedCode):
    """Every request code defined at RocketMQ 4.9.8."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54  # RocketMQ 4.7-4.8 (4.9 dropped it): accounts, no secrets
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329


class SparkBridgeCode(_NamedCode):
    """actormq's own request and response codes: the SparkBridge's planning protocol.

    Requests and replies carry JSON bodies (actors/spark_bridge/wire.py). RocketMQ assigns
    request codes below 2000 (4.x: 10-329, 5.x adds up to about 1020 and the 200000s, which do
    not fit the ROCKETMQ binary header's 16-bit code), so 31001-31199 collides with no
    RocketMQ code and still fits that header. A RocketMQ broker or name server answers them
    REQUEST_CODE_NOT_SUPPORTED, so a driver pointed at the wrong port gets a clear error.
    """

    # requests (driver -> bridge)
    SPARK_PLAN_BATCH = 31001  # resolve a batch read's range and plan its partitions
    SPARK_INITIAL_OFFSET = 31002  # a new streaming query's first offsets
    SPARK_LATEST_OFFSET = 31003  # the end of the next micro-batch (heads, read limit, cap)
    SPARK_PLAN_PARTITIONS = 31004  # one partition per queue and range of a micro-batch
    SPARK_COMMIT = 31005  # a micro-batch is done: progress, optional group offsets
    SPARK_LIST_QUERIES = 31006  # the registry of attached queries (actormq spark list)
    SPARK_DETACH = 31007  # a query stopped
    # response codes (besides SUCCESS, SYSTEM_ERROR and TOPIC_NOT_EXIST)
    SPARK_BAD_OPTIONS = 31101  # an option does not parse or names what does not exist
    SPARK_DATA_LOSS = 31102  # requested offsets are gone (failOnDataLoss=true)
    SPARK_UNREACHABLE = 31103  # the name server or a broker did not answer


class BrokerServiceCode(_NamedCode):
    """actormq's own request codes between a broker's service actors and its store writer.

    ScheduleMessageService and TransactionalMessageCheckService read the store read-only and
    send what they store to the writer as requests on their link (actors.broker.processors.
    service_put). Never routed from a client: no processor group lists them, so the
    RemotingServer answers them REQUEST_CODE_NOT_SUPPORTED like any unknown code.
    """

    SERVICE_PUT_MESSAGES = 31201  # store these messages in order, stopping at a failure
    SERVICE_DELAY_PROGRESS = 31202  # the delay levels' offsets of what this writer stored


class ResponseCode(_NamedCode):
    """RemotingSysResponseCode (0-4) plus every ResponseCode at RocketMQ 4.9.8."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202  # spelled as upstream
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    FLOW_CONTROL = 215


# Codes a Java send treats as stored (SendStatus OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
# SLAVE_NOT_AVAILABLE), and the ones a sync send retries on another queue.
SEND_SUCCESS_CODES: Final = frozenset({0, 10, 11, 12})
SEND_RETRY_CODES: Final = frozenset({17, 14, 1, 16, 204, 205})
# Pull statuses (anything else is an exception on the client).
PULL_STATUS_CODES: Final = frozenset({0, 19, 20, 21})


class TopicSysFlag(IntFlag):
    """TopicConfig.topicSysFlag bits (TopicSysFlag.java)."""

    FLAG_UNIT = 0x1
    FLAG_UNIT_SUB = 0x2  # a unit-mode consumer's retry topic: buildSysFlag(false, true)


class PermName(IntFlag):
    """Topic / broker permission bits."""

    PERM_INHERIT = 1
    PERM_WRITE = 2
    PERM_READ = 4
    PERM_PRIORITY = 8

    @staticmethod
    def is_readable(perm: int) -> bool:
        """True when the read bit is set."""
        return bool(perm & PermName.PERM_READ)

    @staticmethod
    def is_writeable(perm: int) -> bool:
        """True when the write bit is set."""
        return bool(perm & PermName.PERM_WRITE)

    @staticmethod
    def is_inherited(perm: int) -> bool:
        """True when the topic may serve as an auto-create template."""
        return bool(perm & PermName.PERM_INHERIT)

    @staticmethod
    def to_string(perm: int) -> str:
        """Java's PermName.perm2String: "RWX" with '-' for missing bits."""
        return (
            ("R" if perm & PermName.PERM_READ else "-")
            + ("W" if perm & PermName.PERM_WRITE else "-")
            + ("X" if perm & PermName.PERM_INHERIT else "-")
        )


class PullSysFlag(IntFlag):
    """PULL_MESSAGE request sysFlag bits."""

    FLAG_COMMIT_OFFSET = 0x1
    FLAG_SUSPEND = 0x2
    FLAG_SUBSCRIPTION = 0x4
    FLAG_CLASS_FILTER = 0x8
    FLAG_LITE_PULL_MESSAGE = 0x10

    @staticmethod
    def build(
        commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False
    ) -> int:
        """Java's PullSysFlag.buildSysFlag (a plain int: every pull builds one, and an IntFlag
        operation costs about 0.5 us)."""
        return (_PULL_COMMIT if commit_offset else 0) | (_PULL_SUSPEND if suspend else 0) \
            | (_PULL_SUBSCRIPTION if subscription else 0) \
            | (_PULL_CLASS_FILTER if class_filter else 0)  # fmt: skip

    @staticmethod
    def clear_commit_offset_flag(flag: int) -> int:
        """Drop bit 0 (done for pulls served by a slave)."""
        return flag & ~PullSysFlag.FLAG_COMMIT_OFFSET


# PullSysFlag's bits as plain ints, for build()
_PULL_COMMIT: Final = int(PullSysFlag.FLAG_COMMIT_OFFSET)
_PULL_SUSPEND: Final = int(PullSysFlag.FLAG_SUSPEND)
_PULL_SUBSCRIPTION: Final = int(PullSysFlag.FLAG_SUBSCRIPTION)
_PULL_CLASS_FILTER: Final = int(PullSysFlag.FLAG_CLASS_FILTER)


class CompressionType(IntEnum):
    """Body compression algorithm stored in MessageSysFlag bits 8-10 (0 also means ZLIB)."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3


class MessageSysFlag(IntFlag):
    """Message sysFlag bits (send header `f`/sysFlag and the stored SYSFLAG)."""

    COMPRESSED_FLAG = 0x1
    MULTI_TAGS_FLAG = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    BORNHOST_V6_FLAG = 0x10
    STOREHOSTADDRESS_V6_FLAG = 0x20
    NEED_UNWRAP_FLAG = 0x40
    INNER_BATCH_FLAG = 0x80
    COMPRESSION_LZ4_TYPE = 0x100
    COMPRESSION_ZSTD_TYPE = 0x200
    COMPRESSION_ZLIB_TYPE = 0x300

    @staticmethod
    def get_transaction_value(flag: int) -> int:
        """The transaction type bits (flag & 0xC)."""
        return flag & TRANSACTION_TYPE_MASK

    @staticmethod
    def reset_transaction_value(flag: int, tx_type: int) -> int:
        """Replace the transaction type bits with `tx_type`."""
        return (flag & ~TRANSACTION_TYPE_MASK) | (tx_type & TRANSACTION_TYPE_MASK)

    @staticmethod
    def clear_compressed_flag(flag: int) -> int:
        """Drop the compressed bit (Java clearCompressedFlag)."""
        return flag & ~MessageSysFlag.COMPRESSED_FLAG

    @staticmethod
    def get_compression_type(flag: int) -> CompressionType:
        """Algorithm from bits 8-10; 0 (older clients set only bit 0) means ZLIB."""
        value = (flag & COMPRESSION_TYPE_MASK) >> 8
        if value in (1, 2):
            return CompressionType(value)
        return CompressionType.ZLIB

    @staticmethod
    def set_compression_type(flag: int, ctype: CompressionType) -> int:
        """Set bits 8-10 to `ctype` and the compressed bit."""
        return (flag & ~COMPRESSION_TYPE_MASK) | (int(ctype) << 8) | MessageSysFlag.COMPRESSED_FLAG


TRANSACTION_TYPE_MASK: Final = 0xC
COMPRESSION_TYPE_MASK: Final = 0x700


# --- System topics, groups and prefixes (MixAll, TopicValidator, spec §8) ---
AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
DEFAULT_TOPIC: Final = AUTO_CREATE_TOPIC_KEY_TOPIC
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC: Final = "BenchmarkTest"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"  # "<cluster>_REPLY_TOPIC"
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
LMQ_PREFIX: Final = "%LMQ%"

CID_RMQ_SYS_TRANS: Final = "CID_RMQ_SYS_TRANS"
SYS_CONSUMER_GROUP_PREFIX: Final = "CID_RMQ_SYS_"  # MixAll.isSysConsumerGroup
SCHEDULE_CONSUMER_GROUP: Final = "SCHEDULE_CONSUMER"
CLIENT_INNER_PRODUCER_GROUP: Final = "CLIENT_INNER_PRODUCER"
DEFAULT_PRODUCER_GROUP: Final = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP: Final = "DEFAULT_CONSUMER"
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"

MASTER_ID: Final = 0
DEFAULT_REGION: Final = "DefaultRegion"
DEFAULT_CLUSTER: Final = "DefaultCluster"
DLQ_NUMS_PER_GROUP: Final = 1
SCHEDULE_QUEUE_NUMS: Final = 18

# Sending to these is refused with NO_PERMISSION (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {
        SCHEDULE_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
# Built-in system topics (TopicValidator.SYSTEM_TOPIC_SET); any "rmq_sys_" name is one too.
SYSTEM_TOPICS: Final = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)


def is_system_topic(topic: str) -> bool:
    """TopicValidator.isSystemTopic: a built-in name or any `rmq_sys_` prefix."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def retry_topic(group: str) -> str:
    """MixAll.getRetryTopic."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """MixAll.getDLQTopic."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def reply_topic(cluster: str) -> str:
    """MixAll.getReplyTopic: "<cluster>_REPLY_TOPIC"."""
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"
