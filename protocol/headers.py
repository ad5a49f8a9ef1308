"""Typed custom headers: the extFields of each request and response code.

Mirrors common/protocol/header/**/*.java and RemotingCommand.makeCustomHeaderToNet /
decodeCommandCustomHeader, RocketMQ 4.9.x.

Each header is a slotted dataclass declared with `@header`. Python attributes are snake_case;
the wire key is the camelCase form unless the class lists an exception in `_KEYS`. Annotation
names pick the parser (as Java's declared field type does):

    str   -> the string as sent        int  -> Integer.parseInt (32-bit, named error)
    Long  -> Long.parseLong (64-bit)   bool -> Boolean.parseBoolean, plus C++'s "1" as true

A field without a default is required (`@CFNotNull`): missing, it raises
HeaderFieldError(SYSTEM_ERROR, "the custom field <key> is null"). Optional fields default to
None (or to False for Java primitive booleans) and `to_ext()` omits None. `from_ext` and
`to_ext` are generated per class (like dataclasses generates __init__), because the send and
pull headers sit on the hot path. Unknown keys (C++'s AccessKey, Signature, ...) are ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import (
    Any,
    ClassVar,
    Final,
    NamedTuple,
    Self,
    TypeVar,
    cast,
    dataclass_transform,
)

from protocol.codes import RequestCode, ResponseCode
from protocol.errors import HeaderFieldError

log = logging.getLogger(__name__)

Long = int  # Java long / Long: a 64-bit field (the builder reads the annotation name)

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_EMPTY: Final[Mapping[str, str]] = {}


class FieldSpec(NamedTuple):
    """One header field: attribute, wire key, kind (str/int/Long/bool), required, default."""

    attr: str
    key: str
    kind: str
    required: bool
    default: Any


def _missing(key: str) -> HeaderFieldError:
    return HeaderFieldError(ResponseCode.SYSTEM_ERROR, f"the custom field <{key}> is null")


def _bad_number(key: str, value: object, java_type: str) -> HeaderFieldError:
    return HeaderFieldError(
        ResponseCode.SYSTEM_ERROR,
        f"the custom field <{key}> is not a valid {java_type}: {value!r}",
    )


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _specs(cls: type, keys: Mapping[str, str]) -> tuple[FieldSpec, ...]:
    out = []
    for f in fields(cls):
        ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        kind = ann.replace("| None", "").replace("None |", "").strip()
        if kind not in ("str", "int", "Long", "bool"):
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported header field type {ann}")
        required = f.default is MISSING and f.default_factory is MISSING
        out.append(FieldSpec(f.name, keys.get(f.name) or _camel(f.name), kind, required, f.default))
    return tuple(out)


def _build_from_ext(cls: type, specs: tuple[FieldSpec, ...]) -> Callable[..., Any]:
    """Generate `from_ext(cls, ext)` for one key set (number parsing inlined: hot path)."""
    ns: dict[str, Any] = {"_bad_number": _bad_number, "_missing": _missing, "_EMPTY": _EMPTY}
    lines = ["def from_ext(cls, ext):", "    if ext is None: ext = _EMPTY", "    g = ext.get"]
    args = []
    for i, s in enumerate(specs):
        a = f"a{i}"
        args.append(a)
        lines.append(f"    {a} = g({s.key!r})")
        if s.required:
            lines.append(f"    if {a} is None: raise _missing({s.key!r})")
            ind = "    "
        else:
            ns[f"d{i}"] = s.default
            lines.append(f"    if {a} is None: {a} = d{i}")
            lines.append("    else:")
            ind = "        "
        if s.kind in ("int", "Long"):
            lo, hi = (_INT32_MIN, _INT32_MAX) if s.kind == "int" else (_INT64_MIN, _INT64_MAX)
            java = "int" if s.kind == "int" else "long"
            lines += [
                f"{ind}try: {a} = int({a})",
                f"{ind}except (ValueError, TypeError): {a} = None",
                f"{ind}if {a} is None or not {lo} <= {a} <= {hi}:",
                f"{ind}    raise _bad_number({s.key!r}, g({s.key!r}), {java!r})",
            ]
        elif s.kind == "bool":
            # Java Boolean.parseBoolean ("true", any case); C++ sends "0"/"1" for some.
            lines.append(f'{ind}{a} = {a} == "true" or {a} == "1" or {a}.lower() == "true"')
        elif not s.required:
            lines.append(f"{ind}pass")
    lines.append(f"    return cls({', '.join(args)})")
    exec("\n".join(lines), ns)  # code generated from our own field specs
    fn: Callable[..., Any] = ns["from_ext"]
    fn.__qualname__ = f"{cls.__name__}.from_ext"
    return fn


def _build_to_ext(cls: type, specs: tuple[FieldSpec, ...]) -> Callable[..., dict[str, str]]:
    """Generate `to_ext(self)` for one key set: every non-None field as a string."""
    lines = ["def to_ext(self):", "    d = {}"]
    for s in specs:
        lines.append(f"    v = self.{s.attr}")
        if s.kind == "str":
            val = "v"
        elif s.kind == "bool":
            val = '"true" if v else "false"'
        else:
            val = "str(v)"
        lines.append(f"    if v is not None: d[{s.key!r}] = {val}")
    lines.append("    return d")
    ns: dict[str, Any] = {}
    exec("\n".join(lines), ns)  # code generated from our own field specs
    fn: Callable[..., dict[str, str]] = ns["to_ext"]
    fn.__qualname__ = f"{cls.__name__}.to_ext"
    return fn


class CommandCustomHeader:
    """Base of every header: generated `from_ext` / `to_ext`, field specs in `FIELDS`."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()
    _KEYS: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_ext(cls, ext: Mapping[str, str] | None) -> Self:
        """Parse extFields (raises HeaderFieldError on a missing/malformed field)."""
        raise NotImplementedError

    def to_ext(self) -> dict[str, str]:
        """extFields for this header: every non-None field, values as strings."""
        raise NotImplementedError


_H = TypeVar("_H", bound=type[CommandCustomHeader])


@dataclass_transform()
def header(cls: _H) -> _H:
    """Make `cls` a slotted dataclass and generate its from_ext / to_ext."""
    dc = dataclass(slots=True)(cls)
    specs = _specs(dc, dc._KEYS)
    dc.FIELDS = specs
    dc.from_ext = classmethod(_build_from_ext(dc, specs))  # type: ignore[assignment]
    dc.to_ext = _build_to_ext(dc, specs)  # type: ignore[method-assign]
    return cast(_H, dc)


# ---------------------------------------------------------------------------------------------
# 3.1 Producer
# ---------------------------------------------------------------------------------------------

# SendMessageRequestHeaderV2's one-letter keys (codes 310 and 320).
SEND_V2_KEYS: Final[dict[str, str]] = {
    "producer_group": "a",
    "topic": "b",
    "default_topic": "c",
    "default_topic_queue_nums": "d",
    "queue_id": "e",
    "sys_flag": "f",
    "born_timestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsume_times": "j",
    "unit_mode": "k",
    "max_reconsume_times": "l",
    "batch": "m",
    "bname": "n",
}


@header
class SendMessageRequestHeader(CommandCustomHeader):
    """SEND_MESSAGE (10) long keys; SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320) via _v2."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    max_reconsume_times: int | None = None
    batch: bool | None = None
    bname: str | None = None

    @classmethod
    def from_ext_v2(cls, ext: Mapping[str, str] | None) -> Self:
        """Parse the V2 one-letter keys (a..n)."""
        return _send_from_v2(cls, ext)  # type: ignore[no-any-return]

    def to_ext_v2(self) -> dict[str, str]:
        """extFields with the V2 one-letter keys."""
        return _send_to_v2(self)


_SEND_V2_SPECS: Final = _specs(SendMessageRequestHeader, SEND_V2_KEYS)
_send_from_v2 = _build_from_ext(SendMessageRequestHeader, _SEND_V2_SPECS)
_send_to_v2 = _build_to_ext(SendMessageRequestHeader, _SEND_V2_SPECS)

V2_SEND_CODES: Final = frozenset(
    {RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2}
)


# (topic, queue_id, sys_flag, born_timestamp, flag, properties, reconsume_times)
SendV2Fields = tuple[str, int, int, int, int, str | None, int]


def send_v2_fields(ext: Mapping[str, str]) -> SendV2Fields | None:
    """A plain (non-batch) SEND_MESSAGE_V2's hot fields, read straight from the one-letter keys.

    None when it is a batch or anything is missing or malformed: from_ext_v2 then gives the
    header or the HeaderFieldError (this accepts exactly what from_ext_v2 accepts).
    """
    try:
        m = ext.get("m")
        if m is not None and m != "false":
            return None
        topic = ext["b"]
        ext["a"]  # required: producerGroup, defaultTopic
        ext["c"]
        nums = int(ext["d"])
        queue_id = int(ext["e"])
        sys_flag = int(ext["f"])
        born = int(ext["g"])
        flag = int(ext["h"])
        j = ext.get("j")
        reconsume = 0 if j is None else int(j)
        lv = ext.get("l")
        max_times = 0 if lv is None else int(lv)
    except (KeyError, ValueError, TypeError):
        return None
    lo = min(nums, queue_id, sys_flag, flag, reconsume, max_times)
    hi = max(nums, queue_id, sys_flag, flag, reconsume, max_times)
    if lo < _INT32_MIN or hi > _INT32_MAX or not _INT64_MIN <= born <= _INT64_MAX:
        return None
    if type(topic) is not str:
        return None
    return topic, queue_id, sys_flag, born, flag, ext.get("i"), reconsume


def decode_send_header(code: int, ext: Mapping[str, str] | None) -> SendMessageRequestHeader:
    """The send header for `code`: V2 one-letter keys for 310/320, long keys otherwise."""
    if code in V2_SEND_CODES:
        return SendMessageRequestHeader.from_ext_v2(ext)
    return SendMessageRequestHeader.from_ext(ext)


@header
class SendMessageResponseHeader(CommandCustomHeader):
    """Send response: offset msg id(s), queue written, first queue offset."""

    _KEYS: ClassVar[dict[str, str]] = {"msg_region": "MSG_REGION", "trace_on": "TRACE_ON"}

    msg_id: str
    queue_id: int
    queue_offset: Long
    transaction_id: str | None = None
    msg_region: str | None = None  # the broker always adds MSG_REGION (default DefaultRegion)
    trace_on: str | None = None  # and TRACE_ON ("true"/"false")


@header
class ReplyMessageRequestHeader(CommandCustomHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker -> the producer waiting for a reply: the
    reply's send header plus where and when it was stored (hosts written as Java's
    InetSocketAddress.toString(), "/ip:port")."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    born_host: str
    store_host: str
    store_timestamp: Long
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False


@header
class EndTransactionRequestHeader(CommandCustomHeader):
    """END_TRANSACTION (37), oneway from producers."""

    producer_group: str
    tran_state_table_offset: Long
    commit_log_offset: Long
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool | None = None
    transaction_id: str | None = None
    bname: str | None = None


@header
class CheckTransactionStateRequestHeader(CommandCustomHeader):
    """CHECK_TRANSACTION_STATE (39), broker to producer, oneway."""

    tran_state_table_offset: Long
    commit_log_offset: Long
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    bname: str | None = None


# ---------------------------------------------------------------------------------------------
# 3.2 Consumer
# ---------------------------------------------------------------------------------------------


@header
class PullMessageRequestHeader(CommandCustomHeader):
    """PULL_MESSAGE (11)."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: Long
    max_msg_nums: int
    sys_flag: int
    commit_offset: Long
    suspend_timeout_millis: Long
    sub_version: Long
    subscription: str | None = None
    expression_type: str | None = None
    bname: str | None = None


@header
class PullMessageResponseHeader(CommandCustomHeader):
    """Pull response; required on all four pull statuses (0, 19, 20, 21)."""

    suggest_which_broker_id: Long
    next_begin_offset: Long
    min_offset: Long
    max_offset: Long


@header
class QueryConsumerOffsetRequestHeader(CommandCustomHeader):
    """QUERY_CONSUMER_OFFSET (14)."""

    consumer_group: str
    topic: str
    queue_id: int
    bname: str | None = None


@header
class QueryConsumerOffsetResponseHeader(CommandCustomHeader):
    """QUERY_CONSUMER_OFFSET response."""

    offset: Long


@header
class UpdateConsumerOffsetRequestHeader(CommandCustomHeader):
    """UPDATE_CONSUMER_OFFSET (15), usually oneway."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: Long
    bname: str | None = None


@header
class UpdateConsumerOffsetResponseHeader(CommandCustomHeader):
    """UPDATE_CONSUMER_OFFSET response (no fields)."""


@header
class GetMaxOffsetRequestHeader(CommandCustomHeader):
    """GET_MAX_OFFSET (30)."""

    topic: str
    queue_id: int
    bname: str | None = None


@header
class GetMaxOffsetResponseHeader(CommandCustomHeader):
    """GET_MAX_OFFSET response: the next offset to be written."""

    offset: Long


@header
class GetMinOffsetRequestHeader(CommandCustomHeader):
    """GET_MIN_OFFSET (31)."""

    topic: str
    queue_id: int
    bname: str | None = None


@header
class GetMinOffsetResponseHeader(CommandCustomHeader):
    """GET_MIN_OFFSET response (-1 for an unknown queue)."""

    offset: Long


@header
class SearchOffsetRequestHeader(CommandCustomHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP (29)."""

    topic: str
    queue_id: int
    timestamp: Long
    bname: str | None = None


@header
class SearchOffsetResponseHeader(CommandCustomHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP response."""

    offset: Long


@header
class GetEarliestMsgStoretimeRequestHeader(CommandCustomHeader):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str
    queue_id: int
    bname: str | None = None


@header
class GetEarliestMsgStoretimeResponseHeader(CommandCustomHeader):
    """GET_EARLIEST_MSG_STORETIME response."""

    timestamp: Long


@header
class UnregisterClientRequestHeader(CommandCustomHeader):
    """UNREGISTER_CLIENT (35): one request per group on client shutdown."""

    _KEYS: ClassVar[dict[str, str]] = {"client_id": "clientID"}

    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None


@header
class UnregisterClientResponseHeader(CommandCustomHeader):
    """UNREGISTER_CLIENT response (no fields)."""


@header
class GetConsumerListByGroupRequestHeader(CommandCustomHeader):
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumer_group: str


@header
class GetConsumerListByGroupResponseHeader(CommandCustomHeader):
    """GET_CONSUMER_LIST_BY_GROUP response (no fields; the body carries the ids)."""


@header
class NotifyConsumerIdsChangedRequestHeader(CommandCustomHeader):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker to consumer, oneway."""

    consumer_group: str


@header
class ConsumerSendMsgBackRequestHeader(CommandCustomHeader):
    """CONSUMER_SEND_MSG_BACK (36): offset is the commit-log offset of the message."""

    offset: Long
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False  # Java primitive boolean: always on the wire
    max_reconsume_times: int | None = None
    bname: str | None = None


@header
class QueryMessageRequestHeader(CommandCustomHeader):
    """QUERY_MESSAGE (12); `_UNIQUE_KEY_QUERY`="true" asks for a unique-key lookup."""

    _KEYS: ClassVar[dict[str, str]] = {"unique_key_query": "_UNIQUE_KEY_QUERY"}

    topic: str
    key: str
    max_num: int
    begin_timestamp: Long
    end_timestamp: Long
    unique_key_query: bool | None = None


UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"


@header
class QueryMessageResponseHeader(CommandCustomHeader):
    """QUERY_MESSAGE response."""

    index_last_update_timestamp: Long
    index_last_update_phyoffset: Long


@header
class ViewMessageRequestHeader(CommandCustomHeader):
    """VIEW_MESSAGE_BY_ID (33): offset is a commit-log offset."""

    offset: Long


# ---------------------------------------------------------------------------------------------
# 3.3 NameServer
# ---------------------------------------------------------------------------------------------


@header
class RegisterBrokerRequestHeader(CommandCustomHeader):
    """REGISTER_BROKER (103)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Long
    compressed: bool | None = None
    body_crc32: int | None = None


@header
class RegisterBrokerResponseHeader(CommandCustomHeader):
    """REGISTER_BROKER response: filled only for a slave whose master is alive."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@header
class UnRegisterBrokerRequestHeader(CommandCustomHeader):
    """UNREGISTER_BROKER (104)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@header
class GetRouteInfoRequestHeader(CommandCustomHeader):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str
    accept_standard_json_only: bool | None = None


@header
class QueryDataVersionRequestHeader(CommandCustomHeader):
    """QUERY_DATA_VERSION (322); body is the broker's DataVersion."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@header
class QueryDataVersionResponseHeader(CommandCustomHeader):
    """QUERY_DATA_VERSION response."""

    changed: bool


@header
class PutKVConfigRequestHeader(CommandCustomHeader):
    """PUT_KV_CONFIG (100)."""

    namespace: str
    key: str
    value: str


@header
class GetKVConfigRequestHeader(CommandCustomHeader):
    """GET_KV_CONFIG (101)."""

    namespace: str
    key: str


@header
class GetKVConfigResponseHeader(CommandCustomHeader):
    """GET_KV_CONFIG response."""

    value: str | None = None


@header
class DeleteKVConfigRequestHeader(CommandCustomHeader):
    """DELETE_KV_CONFIG (102)."""

    namespace: str
    key: str


@header
class GetKVListByNamespaceRequestHeader(CommandCustomHeader):
    """GET_KVLIST_BY_NAMESPACE (219)."""

    namespace: str


@header
class WipeWritePermOfBrokerRequestHeader(CommandCustomHeader):
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    broker_name: str


@header
class WipeWritePermOfBrokerResponseHeader(CommandCustomHeader):
    """WIPE_WRITE_PERM_OF_BROKER response."""

    wipe_topic_count: int


@header
class AddWritePermOfBrokerRequestHeader(CommandCustomHeader):
    """ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str


@header
class AddWritePermOfBrokerResponseHeader(CommandCustomHeader):
    """ADD_WRITE_PERM_OF_BROKER response."""

    add_topic_count: int


@header
class GetTopicsByClusterRequestHeader(CommandCustomHeader):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str


@header
class DeleteTopicFromNamesrvRequestHeader(CommandCustomHeader):
    """DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str
    cluster_name: str | None = None


# ---------------------------------------------------------------------------------------------
# 3.4 Admin
# ---------------------------------------------------------------------------------------------


@header
class CreateTopicRequestHeader(CommandCustomHeader):
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    order: bool = False
    topic_sys_flag: int | None = None


@header
class DeleteTopicRequestHeader(CommandCustomHeader):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str


@header
class DeleteSubscriptionGroupRequestHeader(CommandCustomHeader):
    """DELETE_SUBSCRIPTIONGROUP (207)."""

    group_name: str
    remove_offset: bool = False


@header
class GetConsumerConnectionListRequestHeader(CommandCustomHeader):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str


@header
class GetProducerConnectionListRequestHeader(CommandCustomHeader):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str


@header
class GetConsumeStatsRequestHeader(CommandCustomHeader):
    """GET_CONSUME_STATS (208)."""

    consumer_group: str
    topic: str | None = None


@header
class GetTopicStatsInfoRequestHeader(CommandCustomHeader):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str


@header
class ResetOffsetRequestHeader(CommandCustomHeader):
    """RESET_CONSUMER_CLIENT_OFFSET (220) and INVOKE_BROKER_TO_RESET_OFFSET (222)."""

    _KEYS: ClassVar[dict[str, str]] = {"is_force": "isForce"}

    topic: str
    group: str
    timestamp: Long
    is_force: bool


@header
class GetConsumerStatusRequestHeader(CommandCustomHeader):
    """GET_CONSUMER_STATUS_FROM_CLIENT (221) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223)."""

    topic: str
    group: str
    client_addr: str | None = None


@header
class GetConsumerRunningInfoRequestHeader(CommandCustomHeader):
    """GET_CONSUMER_RUNNING_INFO (307)."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@header
class ConsumeMessageDirectlyResultRequestHeader(CommandCustomHeader):
    """CONSUME_MESSAGE_DIRECTLY (309)."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None


@header
class GetBrokerConfigResponseHeader(CommandCustomHeader):
    """GET_BROKER_CONFIG (26) response: the config's data version."""

    version: str


@header
class QueryTopicConsumeByWhoRequestHeader(CommandCustomHeader):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str


@header
class QueryConsumeTimeSpanRequestHeader(CommandCustomHeader):
    """QUERY_CONSUME_TIME_SPAN (303)."""

    topic: str
    group: str


@header
class QueryConsumeQueueRequestHeader(CommandCustomHeader):
    """QUERY_CONSUME_QUEUE (321): no @CFNotNull field in Java (the primitives default to 0;
    mqadmin queryCq leaves consumerGroup out unless -g is given)."""

    topic: str
    queue_id: int = 0
    index: Long = 0
    count: int = 0
    consumer_group: str | None = None


@header
class CloneGroupOffsetRequestHeader(CommandCustomHeader):
    """CLONE_GROUP_OFFSET (314)."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@header
class ViewBrokerStatsDataRequestHeader(CommandCustomHeader):
    """VIEW_BROKER_STATS_DATA (315)."""

    stats_name: str
    stats_key: str


@header
class QueryCorrectionOffsetHeader(CommandCustomHeader):
    """QUERY_CORRECTION_OFFSET (308): filterGroups is a comma-separated list."""

    compare_group: str
    topic: str
    filter_groups: str | None = None


@header
class ResumeCheckHalfMessageRequestHeader(CommandCustomHeader):
    """RESUME_CHECK_HALF_MESSAGE (323)."""

    msg_id: str | None = None


# ---------------------------------------------------------------------------------------------
# Registries
# ---------------------------------------------------------------------------------------------

# Request code -> its request header class. Codes without a header (HEART_BEAT, LOCK_BATCH_MQ,
# UNLOCK_BATCH_MQ, GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_CONFIG, ...) are absent. The send
# codes share one class: use decode_send_header (or decode_request_header) for the V2 keys.
REQUEST_HEADERS: Final[dict[int, type[CommandCustomHeader]]] = {
    RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeader,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_REPLY_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_REPLY_MESSAGE_V2: SendMessageRequestHeader,
    RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT: ReplyMessageRequestHeader,
    RequestCode.QUERY_CORRECTION_OFFSET: QueryCorrectionOffsetHeader,
    RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
    RequestCode.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RequestCode.END_TRANSACTION: EndTransactionRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    RequestCode.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
    RequestCode.PUT_KV_CONFIG: PutKVConfigRequestHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigRequestHeader,
    RequestCode.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
    RequestCode.UNREGISTER_BROKER: UnRegisterBrokerRequestHeader,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    RequestCode.GET_TOPIC_STATS_INFO: GetTopicStatsInfoRequestHeader,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: GetConsumerConnectionListRequestHeader,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: GetProducerConnectionListRequestHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
    RequestCode.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
    RequestCode.DELETE_TOPIC_IN_BROKER: DeleteTopicRequestHeader,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: DeleteTopicFromNamesrvRequestHeader,
    RequestCode.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET: ResetOffsetRequestHeader,
    RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: GetConsumerStatusRequestHeader,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
    RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GetConsumerStatusRequestHeader,
    RequestCode.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: QueryTopicConsumeByWhoRequestHeader,
    RequestCode.QUERY_CONSUME_TIME_SPAN: QueryConsumeTimeSpanRequestHeader,
    RequestCode.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
    RequestCode.QUERY_CONSUME_QUEUE: QueryConsumeQueueRequestHeader,
    RequestCode.CLONE_GROUP_OFFSET: CloneGroupOffsetRequestHeader,
    RequestCode.VIEW_BROKER_STATS_DATA: ViewBrokerStatsDataRequestHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionRequestHeader,
    RequestCode.RESUME_CHECK_HALF_MESSAGE: ResumeCheckHalfMessageRequestHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerRequestHeader,
}

# Request code -> the header class of its response (where the response has one).
RESPONSE_HEADERS: Final[dict[int, type[CommandCustomHeader]]] = {
    RequestCode.SEND_MESSAGE: SendMessageResponseHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageResponseHeader,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageResponseHeader,
    RequestCode.SEND_REPLY_MESSAGE: SendMessageResponseHeader,
    RequestCode.SEND_REPLY_MESSAGE_V2: SendMessageResponseHeader,
    RequestCode.PULL_MESSAGE: PullMessageResponseHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageResponseHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetResponseHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetResponseHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetResponseHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetResponseHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetResponseHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeResponseHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientResponseHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupResponseHeader,
    RequestCode.GET_BROKER_CONFIG: GetBrokerConfigResponseHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigResponseHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerResponseHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerResponseHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerResponseHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionResponseHeader,
}


def decode_request_header(code: int, ext: Mapping[str, str] | None) -> CommandCustomHeader | None:
    """The typed request header for `code` (None when the code has no header class)."""
    if code in V2_SEND_CODES:
        return SendMessageRequestHeader.from_ext_v2(ext)
    cls = REQUEST_HEADERS.get(code)
    return cls.from_ext(ext) if cls is not None else None
