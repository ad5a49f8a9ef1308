"""Topic config bodies: topics.json, GET_ALL_TOPIC_CONFIG and REGISTER_BROKER.

Mirrors common/TopicConfig.java, common/TopicFilterType.java, common/DataVersion.java,
common/protocol/body/TopicConfigSerializeWrapper.java and RegisterBrokerBody.java (JSON or its
compressed binary form), RocketMQ 4.9.x.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Self

from protocol.bodies.json_body import (
    BodyError,
    JsonBody,
    JsonObj,
    dumps_compact,
    dumps_pretty,
    loads_lenient,
    to_enum,
    to_int,
    to_str,
)


class TopicFilterType(enum.IntEnum):
    """Single or multiple tags per message."""

    SINGLE_TAG = 0
    MULTI_TAG = 1


@dataclass(slots=True)
class DataVersion(JsonBody):
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
        o = JsonObj(obj, where)
        return cls(o.integer("counter"), o.integer("timestamp"))


@dataclass(slots=True)
class TopicConfig(JsonBody):
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
        o = JsonObj(obj, where)
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
            to_int(parts[1], w),
            to_int(parts[2], w),
            to_int(parts[3], w),
            to_enum(parts[4], TopicFilterType, w),
        )


def _topic_table(o: JsonObj, key: str) -> dict[str, TopicConfig]:
    w = f"{o.where}.{key}"
    return {k: TopicConfig.from_obj(v, w) for k, v in o.mapping(key).items() if v is not None}


def data_version_of(o: JsonObj) -> DataVersion:
    v = o.d.get("dataVersion")
    return DataVersion() if v is None else DataVersion.from_obj(v, f"{o.where}.dataVersion")


@dataclass(slots=True)
class TopicConfigSerializeWrapper(JsonBody):
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
        o = JsonObj(obj, where)
        return cls(_topic_table(o, "topicConfigTable"), data_version_of(o))


_I32 = struct.Struct(">i")


@dataclass(slots=True)
class RegisterBrokerBody(JsonBody):
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
        o = JsonObj(obj, where)
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
        fl = [to_str(x, "filterServerList") for x in filters if x is not None]
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
