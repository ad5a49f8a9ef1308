"""The list bodies: a group's consumer ids, topic names, a KV namespace.

Mirrors common/protocol/body/GetConsumerListByGroupResponseBody.java, TopicList.java and
KVTable.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from protocol.bodies.json_body import (
    JsonBody,
    JsonObj,
    drop_none,
    to_str,
)


@dataclass(slots=True)
class GetConsumerListByGroupResponseBody(JsonBody):
    """GET_CONSUMER_LIST_BY_GROUP response body."""

    consumer_id_list: list[str] = field(default_factory=list)

    def to_obj(self) -> dict[str, Any]:
        return {"consumerIdList": list(self.consumer_id_list)}

    @classmethod
    def from_obj(cls, obj: object, where: str = "GetConsumerListByGroupResponseBody") -> Self:
        return cls(JsonObj(obj, where).str_list("consumerIdList"))


@dataclass(slots=True)
class TopicList(JsonBody):
    """A list of topic names (plus the broker address when set)."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def to_obj(self) -> dict[str, Any]:
        return drop_none({"brokerAddr": self.broker_addr, "topicList": list(self.topic_list)})

    @classmethod
    def from_obj(cls, obj: object, where: str = "TopicList") -> Self:
        o = JsonObj(obj, where)
        return cls(o.str_list("topicList"), o.opt_str("brokerAddr"))


@dataclass(slots=True)
class KVTable(JsonBody):
    """A string -> string table."""

    table: dict[str, str] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {"table": dict(self.table)}

    @classmethod
    def from_obj(cls, obj: object, where: str = "KVTable") -> Self:
        o = JsonObj(obj, where)
        w = f"{where}.table"
        return cls({k: to_str(v, w) for k, v in o.mapping("table").items() if v is not None})
