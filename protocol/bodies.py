"""JSON request/response bodies and config-file shapes.

Mirrors common/protocol/route/TopicRouteData.java (QueueData, BrokerData),
common/protocol/body/*.java (ClusterInfo, RegisterBrokerBody, TopicConfigSerializeWrapper,
LockBatchRequestBody, ...), common/protocol/heartbeat/*.java, common/TopicConfig.java,
common/DataVersion.java and common/subscription/SubscriptionGroupConfig.java, RocketMQ 4.9.x.

Writing follows what a Java broker's fastjson writes, made standard: compact (no whitespace;
the Go client splits route text on "," and ":"), members in alphabetical order, null members
omitted, enums by name, ASCII-only (non-ASCII as \\uXXXX), numeric map keys quoted.

Reading is as lenient as fastjson: bare numeric map keys ({0:"a:1"}), enums as names or
ordinals, numbers and booleans as strings, missing members take the Java defaults, unknown
members are ignored. Anything that still does not fit raises BodyError (a ValueError).
"""

from __future__ import annotations

import enum
import json
import logging
import re
import struct
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Self, TypeVar

from protocol.record import java_string_hash

log = logging.getLogger(__name__)


class BodyError(ValueError):
    """A body that is not JSON, or whose JSON does not have the expected shape."""


# --- lenient reader / compact writer ------------------------------------------------------------
# A JSON string token, or a bare key (number or identifier) right after "{" or "," and before ":".
# Strings are matched first and given back unchanged, so text inside strings is never touched.
_BARE_KEY = re.compile(
    r'"(?:[^"\\]|\\.)*"'
    r"|([{,]\s*)(-?\d+(?:\.\d+)?|[A-Za-z_$][\w$]*)(\s*:)",
    re.DOTALL,
)


def _quote_bare_key(m: re.Match[str]) -> str:
    if m.group(2) is None:
        return m.group(0)
    return f'{m.group(1)}"{m.group(2)}"{m.group(3)}'


def loads_lenient(text: str | bytes | bytearray | memoryview) -> object:
    """Parse JSON, also accepting fastjson's unquoted map keys; raises BodyError."""
    try:
        s = text if isinstance(text, str) else bytes(text).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"body is not UTF-8: {exc}") from exc
    try:
        return json.loads(s)
    except RecursionError as exc:
        raise BodyError("body nests too deeply") from exc
    except ValueError as first:  # JSONDecodeError, or an over-long integer literal
        try:
            return json.loads(_BARE_KEY.sub(_quote_bare_key, s))
        except RecursionError as exc:
            raise BodyError("body nests too deeply") from exc
        except ValueError:
            raise BodyError(f"body is not JSON: {first}") from first


def dumps_compact(obj: object) -> bytes:
    """Compact, key-sorted, ASCII-safe JSON bytes."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=True).encode()


def dumps_object_map(pairs: Iterable[tuple[object, object]]) -> bytes:
    """A map whose keys are objects, as fastjson writes Map<MessageQueue, V> ({{..}:v,...}).

    Not standard JSON: fastjson (every Java reader) parses it back; loads_object_map does too.
    """
    items = (dumps_compact(k) + b":" + dumps_compact(v) for k, v in pairs)
    return b"{" + b",".join(items) + b"}"


def loads_object_map(text: str, pos: int = 0) -> tuple[list[tuple[Any, Any]], int]:
    """Parse a map (object keys allowed) starting at text[pos] == "{": (pairs, end index)."""
    dec = json.JSONDecoder()
    ws = " \t\r\n"
    i = pos
    if text[i : i + 1] != "{":
        raise BodyError(f"map expected at {pos}")
    i += 1
    pairs: list[tuple[Any, Any]] = []
    try:
        while True:
            while text[i] in ws:
                i += 1
            if text[i] == "}":
                return pairs, i + 1
            key, i = dec.raw_decode(text, i)
            while text[i] in ws:
                i += 1
            if text[i] != ":":
                raise BodyError(f"':' expected at {i}")
            i += 1
            while text[i] in ws:
                i += 1
            value, i = dec.raw_decode(text, i)
            pairs.append((key, value))
            while text[i] in ws:
                i += 1
            if text[i] == ",":
                i += 1
            elif text[i] != "}":
                raise BodyError(f"',' or '}}' expected at {i}")
    except (IndexError, ValueError) as exc:
        if isinstance(exc, BodyError):
            raise
        raise BodyError(f"bad object-keyed map: {exc}") from exc


def dumps_pretty(obj: object) -> bytes:
    """Tab-indented, key-sorted JSON (the config-file form; fastjson reads it back)."""
    return json.dumps(
        obj, indent="\t", separators=(",", ":"), sort_keys=True, ensure_ascii=True
    ).encode()


# --- coercion -----------------------------------------------------------------------------------
E = TypeVar("E", bound=enum.IntEnum)
T = TypeVar("T")


def _to_int(v: object, where: str) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            try:
                f = float(v)
            except ValueError:
                pass
            else:
                if f.is_integer():
                    return int(f)
    raise BodyError(f"{where}: expected an integer, got {v!r:.60}")


def _to_str(v: object, where: str) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    raise BodyError(f"{where}: expected a string, got {type(v).__name__}")


def _to_bool(v: object, where: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("true", "false", "1", "0"):
        return v.strip().lower() in ("true", "1")
    raise BodyError(f"{where}: expected a boolean, got {v!r:.60}")


def _to_enum(v: object, cls: type[E], where: str) -> E:
    if isinstance(v, str):
        name = v.strip()
        if name in cls.__members__:
            return cls[name]
        try:
            v = int(name)
        except ValueError:
            pass
    if isinstance(v, int) and not isinstance(v, bool):
        try:
            return cls(v)
        except ValueError:
            pass
    raise BodyError(f"{where}: not a {cls.__name__} name or ordinal: {v!r:.60}")


class _Obj:
    """Typed, lenient access to one decoded JSON object."""

    __slots__ = ("d", "where")

    def __init__(self, d: object, where: str) -> None:
        if not isinstance(d, dict):
            raise BodyError(f"{where}: expected an object, got {type(d).__name__}")
        self.d: dict[str, Any] = d
        self.where = where

    def _w(self, key: str) -> str:
        return f"{self.where}.{key}"

    def string(self, key: str, default: str = "") -> str:
        v = self.d.get(key)
        return default if v is None else _to_str(v, self._w(key))

    def opt_str(self, key: str) -> str | None:
        v = self.d.get(key)
        return None if v is None else _to_str(v, self._w(key))

    def integer(self, key: str, default: int = 0) -> int:
        v = self.d.get(key)
        return default if v is None else _to_int(v, self._w(key))

    def boolean(self, key: str, default: bool = False) -> bool:
        v = self.d.get(key)
        return default if v is None else _to_bool(v, self._w(key))

    def choice(self, key: str, cls: type[E], default: E) -> E:
        v = self.d.get(key)
        return default if v is None else _to_enum(v, cls, self._w(key))

    def has(self, key: str) -> bool:
        return self.d.get(key) is not None

    def array(self, key: str) -> list[Any]:
        v = self.d.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise BodyError(f"{self._w(key)}: expected an array")
        return v

    def mapping(self, key: str) -> dict[str, Any]:
        v = self.d.get(key)
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise BodyError(f"{self._w(key)}: expected an object")
        return v

    def str_list(self, key: str) -> list[str]:
        w = self._w(key)
        return [_to_str(x, w) for x in self.array(key) if x is not None]

    def int_list(self, key: str) -> list[int]:
        w = self._w(key)
        return [_to_int(x, w) for x in self.array(key) if x is not None]

    def objs(self, key: str, make: Callable[[object, str], T]) -> list[T]:
        w = self._w(key)
        return [make(x, w) for x in self.array(key) if x is not None]


class _JsonBody:
    """to_json/from_json on top of to_obj/from_obj."""

    __slots__ = ()

    def to_obj(self) -> dict[str, Any]:
        """This body as plain JSON-ready Python values."""
        raise NotImplementedError

    @classmethod
    def from_obj(cls, obj: object, where: str = "") -> Self:
        """Build from a decoded JSON value; raises BodyError."""
        raise NotImplementedError

    def to_json(self) -> bytes:
        """Compact JSON bytes as described in the module docstring."""
        return dumps_compact(self.to_obj())

    @classmethod
    def from_json(cls, data: str | bytes | bytearray | memoryview) -> Self:
        """Parse leniently; raises BodyError (a ValueError)."""
        return cls.from_obj(loads_lenient(data), cls.__name__)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _int_keyed(m: dict[str, Any], where: str) -> Iterable[tuple[int, Any]]:
    for k, v in m.items():
        yield _to_int(k, f"{where} key"), v


# --- enums (by name on the wire, ordinals accepted) ---------------------------------------------
class ConsumeType(enum.IntEnum):
    """Pull (actively) or push (passively)."""

    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1


class MessageModel(enum.IntEnum):
    """Broadcasting or clustering consumption."""

    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.IntEnum):
    """Where a new consumer group starts."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


class TopicFilterType(enum.IntEnum):
    """Single or multiple tags per message."""

    SINGLE_TAG = 0
    MULTI_TAG = 1


EXPRESSION_TYPE_TAG: Final = "TAG"
EXPRESSION_TYPE_SQL92: Final = "SQL92"
SUB_ALL: Final = "*"


# --- routing ------------------------------------------------------------------------------------
@dataclass(slots=True)
class QueueData(_JsonBody):
    """One broker's queues for a topic."""

    broker_name: str = ""
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 6
    topic_sys_flag: int = 0

    def to_obj(self, *, with_syn_flag: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }
        if with_syn_flag:
            d["topicSynFlag"] = self.topic_sys_flag  # the <= 4.8 spelling
        return d

    @classmethod
    def from_obj(cls, obj: object, where: str = "QueueData") -> Self:
        o = _Obj(obj, where)
        flag = o.integer("topicSysFlag", o.integer("topicSynFlag", 0))
        return cls(
            o.string("brokerName"),
            o.integer("readQueueNums"),
            o.integer("writeQueueNums"),
            o.integer("perm", 6),
            flag,
        )


MASTER_ID: Final = 0


@dataclass(slots=True)
class BrokerData(_JsonBody):
    """A broker name's addresses by broker id (0 is the master)."""

    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        """Address of broker id 0, if any."""
        return self.broker_addrs.get(MASTER_ID)

    def to_obj(self) -> dict[str, Any]:
        return {
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "BrokerData") -> Self:
        o = _Obj(obj, where)
        w = f"{where}.brokerAddrs"
        addrs = {
            k: _to_str(v, w) for k, v in _int_keyed(o.mapping("brokerAddrs"), w) if v is not None
        }
        return cls(o.string("cluster"), o.string("brokerName"), addrs)


@dataclass(slots=True)
class TopicRouteData(_JsonBody):
    """GET_ROUTEINFO_BY_TOPIC response body."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_obj(self, *, with_syn_flag: bool = True) -> dict[str, Any]:
        return _drop_none(
            {
                "brokerDatas": [b.to_obj() for b in self.broker_datas],
                "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
                "orderTopicConf": self.order_topic_conf,
                "queueDatas": [q.to_obj(with_syn_flag=with_syn_flag) for q in self.queue_datas],
            }
        )

    def to_json(self, *, with_syn_flag: bool = True) -> bytes:
        """Compact JSON; with_syn_flag=False leaves out the <= 4.8 topicSynFlag member."""
        return dumps_compact(self.to_obj(with_syn_flag=with_syn_flag))

    @classmethod
    def from_obj(cls, obj: object, where: str = "TopicRouteData") -> Self:
        o = _Obj(obj, where)
        w = f"{where}.filterServerTable"
        fst = {}
        for k, v in o.mapping("filterServerTable").items():
            fst[k] = _Obj({"v": v}, w).str_list("v")
        return cls(
            o.objs("queueDatas", QueueData.from_obj),
            o.objs("brokerDatas", BrokerData.from_obj),
            fst,
            o.opt_str("orderTopicConf"),
        )


@dataclass(slots=True)
class ClusterInfo(_JsonBody):
    """GET_BROKER_CLUSTER_INFO response body."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {k: v.to_obj() for k, v in self.broker_addr_table.items()},
            "clusterAddrTable": {k: list(v) for k, v in self.cluster_addr_table.items()},
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "ClusterInfo") -> Self:
        o = _Obj(obj, where)
        bat = {
            k: BrokerData.from_obj(v, f"{where}.brokerAddrTable")
            for k, v in o.mapping("brokerAddrTable").items()
            if v is not None
        }
        w = f"{where}.clusterAddrTable"
        cat = {k: _Obj({"v": v}, w).str_list("v") for k, v in o.mapping("clusterAddrTable").items()}
        return cls(bat, cat)


# --- heartbeat ----------------------------------------------------------------------------------
@dataclass(slots=True)
class SubscriptionData(_JsonBody):
    """One topic subscription of a consumer group."""

    topic: str = ""
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False

    @classmethod
    def build(cls, topic: str, sub_string: str | None, sub_version: int = 0) -> Self:
        """Parse a tag expression ("TagA || TagB", "*") the way FilterAPI does."""
        sub = (sub_string or "").strip()
        if not sub or sub == SUB_ALL:
            return cls(topic, SUB_ALL, [], [], sub_version)
        tags = [t.strip() for t in sub.split("||")]
        tags = [t for t in tags if t]
        return cls(topic, sub, tags, [java_string_hash(t) for t in tags], sub_version)

    @property
    def is_all(self) -> bool:
        """True for the "*" subscription (or an empty one)."""
        return self.sub_string.strip() in ("", SUB_ALL)

    def to_obj(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "SubscriptionData") -> Self:
        o = _Obj(obj, where)
        sub = o.string("subString", SUB_ALL)
        expr = o.string("expressionType", EXPRESSION_TYPE_TAG) or EXPRESSION_TYPE_TAG
        if o.has("tagsSet"):
            tags = o.str_list("tagsSet")
        elif expr == EXPRESSION_TYPE_TAG and sub.strip() not in ("", SUB_ALL):
            tags = [t.strip() for t in sub.split("||") if t.strip()]
        else:
            tags = []
        codes = o.int_list("codeSet")
        if not codes and tags:
            # Missing (or empty while tags exist): the broker's tag filter needs the hashes.
            codes = [java_string_hash(t) for t in tags]
        return cls(
            o.string("topic"),
            sub,
            tags,
            codes,
            o.integer("subVersion"),
            expr,
            o.boolean("classFilterMode"),
        )


@dataclass(slots=True)
class ConsumerData(_JsonBody):
    """One consumer group in a heartbeat."""

    group_name: str = ""
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_obj(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where.name,
            "consumeType": self.consume_type.name,
            "groupName": self.group_name,
            "messageModel": self.message_model.name,
            "subscriptionDataSet": [s.to_obj() for s in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "ConsumerData") -> Self:
        o = _Obj(obj, where)
        return cls(
            o.string("groupName"),
            o.choice("consumeType", ConsumeType, ConsumeType.CONSUME_PASSIVELY),
            o.choice("messageModel", MessageModel, MessageModel.CLUSTERING),
            o.choice(
                "consumeFromWhere", ConsumeFromWhere, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
            ),
            o.objs("subscriptionDataSet", SubscriptionData.from_obj),
            o.boolean("unitMode"),
        )


@dataclass(slots=True)
class ProducerData(_JsonBody):
    """One producer group in a heartbeat."""

    group_name: str = ""

    def to_obj(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def from_obj(cls, obj: object, where: str = "ProducerData") -> Self:
        return cls(_Obj(obj, where).string("groupName"))


@dataclass(slots=True)
class HeartbeatData(_JsonBody):
    """HEART_BEAT request body."""

    client_id: str = ""
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)

    def to_obj(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_obj() for c in self.consumer_data_set],
            "producerDataSet": [p.to_obj() for p in self.producer_data_set],
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "HeartbeatData") -> Self:
        o = _Obj(obj, where)
        return cls(
            o.string("clientID"),
            o.objs("producerDataSet", ProducerData.from_obj),
            o.objs("consumerDataSet", ConsumerData.from_obj),
        )


# --- topic config and broker registration -------------------------------------------------------
@dataclass(slots=True)
class DataVersion(_JsonBody):
    """Version stamp of a broker's topic (or group) table."""

    counter: int = 0
    timestamp: int = 0

    def next_version(self, now_ms: int) -> None:
        """Bump in place (DataVersion.nextVersion)."""
        self.counter += 1
        self.timestamp = now_ms

    def to_obj(self) -> dict[str, Any]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_obj(cls, obj: object, where: str = "DataVersion") -> Self:
        o = _Obj(obj, where)
        return cls(o.integer("counter"), o.integer("timestamp"))


@dataclass(slots=True)
class TopicConfig(_JsonBody):
    """One topic's queue counts, permission and flags."""

    topic_name: str = ""
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False

    def to_obj(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type.name,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "TopicConfig") -> Self:
        o = _Obj(obj, where)
        return cls(
            o.string("topicName"),
            o.integer("readQueueNums", 16),
            o.integer("writeQueueNums", 16),
            o.integer("perm", 6),
            o.choice("topicFilterType", TopicFilterType, TopicFilterType.SINGLE_TAG),
            o.integer("topicSysFlag"),
            o.boolean("order"),
        )

    def encode_text(self) -> str:
        """The text form "name readQ writeQ perm FILTERTYPE" used in compressed registration."""
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} "
            f"{self.perm} {self.topic_filter_type.name}"
        )

    @classmethod
    def decode_text(cls, text: str) -> Self:
        """Parse the text form; topicSysFlag and order take their defaults."""
        parts = text.split(" ")
        if len(parts) != 5:
            raise BodyError(f"topic config text needs 5 fields: {text!r:.80}")
        w = "TopicConfig text"
        return cls(
            parts[0],
            _to_int(parts[1], w),
            _to_int(parts[2], w),
            _to_int(parts[3], w),
            _to_enum(parts[4], TopicFilterType, w),
        )


def _topic_table(o: _Obj, key: str) -> dict[str, TopicConfig]:
    w = f"{o.where}.{key}"
    return {k: TopicConfig.from_obj(v, w) for k, v in o.mapping(key).items() if v is not None}


def _data_version(o: _Obj) -> DataVersion:
    v = o.d.get("dataVersion")
    return DataVersion() if v is None else DataVersion.from_obj(v, f"{o.where}.dataVersion")


@dataclass(slots=True)
class TopicConfigSerializeWrapper(_JsonBody):
    """topics.json content and GET_ALL_TOPIC_CONFIG body."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_obj(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_obj(),
            "topicConfigTable": {k: v.to_obj() for k, v in self.topic_config_table.items()},
        }

    def to_json_pretty(self) -> bytes:
        """Tab-indented form for config/topics.json."""
        return dumps_pretty(self.to_obj())

    @classmethod
    def from_obj(cls, obj: object, where: str = "TopicConfigSerializeWrapper") -> Self:
        o = _Obj(obj, where)
        return cls(_topic_table(o, "topicConfigTable"), _data_version(o))


_I32 = struct.Struct(">i")


@dataclass(slots=True)
class RegisterBrokerBody(_JsonBody):
    """REGISTER_BROKER request body (JSON, or zlib-compressed binary when compressed=true)."""

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = field(default_factory=list)

    def to_obj(self) -> dict[str, Any]:
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_obj(),
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "RegisterBrokerBody") -> Self:
        o = _Obj(obj, where)
        v = o.d.get("topicConfigSerializeWrapper")
        wrapper = (
            TopicConfigSerializeWrapper()
            if v is None
            else TopicConfigSerializeWrapper.from_obj(v, f"{where}.topicConfigSerializeWrapper")
        )
        return cls(wrapper, o.str_list("filterServerList"))

    def encode(self, compress: bool = False) -> bytes:
        """The body as sent: JSON, or the compressed form (Deflater BEST_COMPRESSION)."""
        if not compress:
            return self.to_json()
        w = self.topic_config_serialize_wrapper
        parts = [_lv(w.data_version.to_json())]
        parts.append(_I32.pack(len(w.topic_config_table)))
        parts.extend(_lv(tc.encode_text().encode()) for tc in w.topic_config_table.values())
        parts.append(_lv(dumps_compact(list(self.filter_server_list))))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, compressed: bool = False) -> Self:
        """Inverse of encode; raises BodyError."""
        if not compressed:
            return cls.from_json(data)
        try:
            plain = zlib.decompress(bytes(data))
        except zlib.error as exc:
            raise BodyError(f"compressed register body does not inflate: {exc}") from exc
        reader = _LenReader(plain)
        version = DataVersion.from_json(reader.chunk())
        count = reader.integer()
        table: dict[str, TopicConfig] = {}
        for _ in range(count):
            tc = TopicConfig.decode_text(reader.chunk().decode("utf-8", "replace"))
            table[tc.topic_name] = tc
        filters = loads_lenient(reader.chunk())
        if not isinstance(filters, list):
            raise BodyError("filterServerList must be an array")
        fl = [_to_str(x, "filterServerList") for x in filters if x is not None]
        return cls(TopicConfigSerializeWrapper(table, version), fl)


def _lv(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


class _LenReader:
    """Reads int32 and int32-length-prefixed chunks, raising BodyError on truncation."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def integer(self) -> int:
        if self.pos + 4 > len(self.buf):
            raise BodyError("truncated compressed register body")
        v: int = _I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def chunk(self) -> bytes:
        n = self.integer()
        if n < 0 or self.pos + n > len(self.buf):
            raise BodyError(f"bad chunk length {n} in compressed register body")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out


# --- queues, locks, lists -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True, order=True)
class MessageQueue(_JsonBody):
    """A (topic, brokerName, queueId) triple; hashable and ordered like Java's compareTo."""

    topic: str = ""
    broker_name: str = ""
    queue_id: int = 0

    def to_obj(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_obj(cls, obj: object, where: str = "MessageQueue") -> Self:
        o = _Obj(obj, where)
        return cls(o.string("topic"), o.string("brokerName"), o.integer("queueId"))


@dataclass(slots=True)
class LockBatchRequestBody(_JsonBody):
    """LOCK_BATCH_MQ request body."""

    consumer_group: str = ""
    client_id: str = ""
    mq_set: list[MessageQueue] = field(default_factory=list)
    only_this_broker: bool = False

    def to_obj(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": [q.to_obj() for q in self.mq_set],
        }
        if self.only_this_broker:
            d["onlyThisBroker"] = True
        return d

    @classmethod
    def from_obj(cls, obj: object, where: str = "LockBatchRequestBody") -> Self:
        o = _Obj(obj, where)
        return cls(
            o.string("consumerGroup"),
            o.string("clientId"),
            o.objs("mqSet", MessageQueue.from_obj),
            o.boolean("onlyThisBroker"),
        )


@dataclass(slots=True)
class UnlockBatchRequestBody(_JsonBody):
    """UNLOCK_BATCH_MQ request body."""

    consumer_group: str = ""
    client_id: str = ""
    mq_set: list[MessageQueue] = field(default_factory=list)

    def to_obj(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": [q.to_obj() for q in self.mq_set],
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "UnlockBatchRequestBody") -> Self:
        o = _Obj(obj, where)
        return cls(
            o.string("consumerGroup"), o.string("clientId"), o.objs("mqSet", MessageQueue.from_obj)
        )


@dataclass(slots=True)
class LockBatchResponseBody(_JsonBody):
    """LOCK_BATCH_MQ response body: the queues now locked by the client."""

    lock_ok_mq_set: list[MessageQueue] = field(default_factory=list)

    def to_obj(self) -> dict[str, Any]:
        return {"lockOKMQSet": [q.to_obj() for q in self.lock_ok_mq_set]}

    @classmethod
    def from_obj(cls, obj: object, where: str = "LockBatchResponseBody") -> Self:
        return cls(_Obj(obj, where).objs("lockOKMQSet", MessageQueue.from_obj))


@dataclass(slots=True)
class GetConsumerListByGroupResponseBody(_JsonBody):
    """GET_CONSUMER_LIST_BY_GROUP response body."""

    consumer_id_list: list[str] = field(default_factory=list)

    def to_obj(self) -> dict[str, Any]:
        return {"consumerIdList": list(self.consumer_id_list)}

    @classmethod
    def from_obj(cls, obj: object, where: str = "GetConsumerListByGroupResponseBody") -> Self:
        return cls(_Obj(obj, where).str_list("consumerIdList"))


@dataclass(slots=True)
class TopicList(_JsonBody):
    """A list of topic names (plus the broker address when set)."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def to_obj(self) -> dict[str, Any]:
        return _drop_none({"brokerAddr": self.broker_addr, "topicList": list(self.topic_list)})

    @classmethod
    def from_obj(cls, obj: object, where: str = "TopicList") -> Self:
        o = _Obj(obj, where)
        return cls(o.str_list("topicList"), o.opt_str("brokerAddr"))


@dataclass(slots=True)
class KVTable(_JsonBody):
    """A string -> string table."""

    table: dict[str, str] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {"table": dict(self.table)}

    @classmethod
    def from_obj(cls, obj: object, where: str = "KVTable") -> Self:
        o = _Obj(obj, where)
        w = f"{where}.table"
        return cls({k: _to_str(v, w) for k, v in o.mapping("table").items() if v is not None})


# --- subscription groups and offsets ------------------------------------------------------------
@dataclass(slots=True)
class SubscriptionGroupConfig(_JsonBody):
    """One consumer group's broker-side settings."""

    group_name: str = ""
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_obj(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "SubscriptionGroupConfig") -> Self:
        o = _Obj(obj, where)
        return cls(
            o.string("groupName"),
            o.boolean("consumeEnable", True),
            o.boolean("consumeFromMinEnable", True),
            o.boolean("consumeBroadcastEnable", True),
            o.integer("retryQueueNums", 1),
            o.integer("retryMaxTimes", 16),
            o.integer("brokerId", 0),
            o.integer("whichBrokerWhenConsumeSlowly", 1),
            o.boolean("notifyConsumerIdsChangedEnable", True),
        )


@dataclass(slots=True)
class SubscriptionGroupWrapper(_JsonBody):
    """subscriptionGroup.json content and GET_ALL_SUBSCRIPTIONGROUP_CONFIG body."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_obj(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_obj(),
            "subscriptionGroupTable": {
                k: v.to_obj() for k, v in self.subscription_group_table.items()
            },
        }

    def to_json_pretty(self) -> bytes:
        """Tab-indented form for config/subscriptionGroup.json."""
        return dumps_pretty(self.to_obj())

    @classmethod
    def from_obj(cls, obj: object, where: str = "SubscriptionGroupWrapper") -> Self:
        o = _Obj(obj, where)
        w = f"{where}.subscriptionGroupTable"
        table = {
            k: SubscriptionGroupConfig.from_obj(v, w)
            for k, v in o.mapping("subscriptionGroupTable").items()
            if v is not None
        }
        return cls(table, _data_version(o))


@dataclass(slots=True)
class ConsumerOffsetSerializeWrapper(_JsonBody):
    """consumerOffset.json and GET_ALL_CONSUMER_OFFSET body: "topic@group" -> qid -> offset."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {
            "offsetTable": {
                k: {str(q): off for q, off in sorted(v.items())}
                for k, v in self.offset_table.items()
            }
        }

    def to_json_pretty(self) -> bytes:
        """Tab-indented form for config/consumerOffset.json."""
        return dumps_pretty(self.to_obj())

    @classmethod
    def from_obj(cls, obj: object, where: str = "ConsumerOffsetSerializeWrapper") -> Self:
        o = _Obj(obj, where)
        w = f"{where}.offsetTable"
        table: dict[str, dict[int, int]] = {}
        for key, inner in o.mapping("offsetTable").items():
            if inner is None:
                continue
            if not isinstance(inner, dict):
                raise BodyError(f"{w}.{key}: expected an object")
            table[key] = {q: _to_int(v, w) for q, v in _int_keyed(inner, w) if v is not None}
        return cls(table)


@dataclass(slots=True)
class DelayOffsetSerializeWrapper(_JsonBody):
    """delayOffset.json and GET_ALL_DELAY_OFFSET body: delay level -> offset."""

    offset_table: dict[int, int] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {"offsetTable": {str(k): v for k, v in sorted(self.offset_table.items())}}

    @classmethod
    def from_obj(cls, obj: object, where: str = "DelayOffsetSerializeWrapper") -> Self:
        o = _Obj(obj, where)
        w = f"{where}.offsetTable"
        return cls(
            {k: _to_int(v, w) for k, v in _int_keyed(o.mapping("offsetTable"), w) if v is not None}
        )


BODY_CLASSES: Final[tuple[type[_JsonBody], ...]] = (
    TopicRouteData,
    QueueData,
    BrokerData,
    ClusterInfo,
    HeartbeatData,
    ConsumerData,
    ProducerData,
    SubscriptionData,
    TopicConfig,
    DataVersion,
    TopicConfigSerializeWrapper,
    RegisterBrokerBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
    GetConsumerListByGroupResponseBody,
    TopicList,
    KVTable,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    MessageQueue,
    ConsumerOffsetSerializeWrapper,
    DelayOffsetSerializeWrapper,
)
