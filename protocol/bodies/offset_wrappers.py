"""Offset table bodies: consumerOffset.json and delayOffset.json (and their admin codes).

Mirrors broker/offset/ConsumerOffsetManager.java's and broker/schedule/
ScheduleMessageService.java's serialized forms (common/protocol/body/
ConsumerOffsetSerializeWrapper.java, DelayOffsetSerializeWrapper.java), RocketMQ 4.9.x.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from protocol.bodies.json_body import (
    BodyError,
    JsonBody,
    JsonObj,
    dumps_pretty,
    int_keyed,
    to_int,
)


@dataclass(slots=True)
class ConsumerOffsetSerializeWrapper(JsonBody):
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
        o = JsonObj(obj, where)
        w = f"{where}.offsetTable"
        table: dict[str, dict[int, int]] = {}
        for key, inner in o.mapping("offsetTable").items():
            if inner is None:
                continue
            if not isinstance(inner, dict):
                raise BodyError(f"{w}.{key}: expected an object")
            table[key] = {q: to_int(v, w) for q, v in int_keyed(inner, w) if v is not None}
        return cls(table)


@dataclass(slots=True)
class DelayOffsetSerializeWrapper(JsonBody):
    """delayOffset.json and GET_ALL_DELAY_OFFSET body: delay level -> offset."""

    offset_table: dict[int, int] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {"offsetTable": {str(k): v for k, v in sorted(self.offset_table.items())}}

    @classmethod
    def from_obj(cls, obj: object, where: str = "DelayOffsetSerializeWrapper") -> Self:
        o = JsonObj(obj, where)
        w = f"{where}.offsetTable"
        return cls(
            {k: to_int(v, w) for k, v in int_keyed(o.mapping("offsetTable"), w) if v is not None}
        )
