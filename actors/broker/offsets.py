"""Consumer offsets: "<topic>@<group>" -> queueId -> next offset to consume.

Mirrors broker/offset/ConsumerOffsetManager.java, RocketMQ 4.9.x. The controller persists the
table to config/consumerOffset.json every flushConsumerOffsetInterval; processor actors hold
replicas updated by OffsetCommitted events.
"""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"


def loads_config(text: str) -> Any:
    """Parse a config file: standard JSON, else fastjson's unquoted numeric keys."""
    try:
        return json.loads(text)
    except ValueError:
        from protocol.bodies import loads_lenient  # fastjson files from a Java broker

        return loads_lenient(text)


class ConsumerOffsetManager:
    """The offset table with the 5 s persistence left to the owner."""

    def __init__(self) -> None:
        self.table: dict[str, dict[int, int]] = {}
        self.dirty = False

    @staticmethod
    def key(topic: str, group: str) -> str:
        """The table key."""
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """commitOffset."""
        self.table.setdefault(self.key(topic, group), {})[queue_id] = offset
        self.dirty = True

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """queryOffset: -1 when nothing is stored."""
        m = self.table.get(self.key(topic, group))
        if m is None:
            return -1
        return m.get(queue_id, -1)

    def remove_group(self, group: str) -> int:
        """Drop every topic of a group; the count of keys removed."""
        keys = [k for k in self.table if k.rpartition(TOPIC_GROUP_SEPARATOR)[2] == group]
        for k in keys:
            del self.table[k]
        if keys:
            self.dirty = True
        return len(keys)

    def remove_topic(self, topic: str) -> int:
        """Drop every group's offsets of a topic."""
        keys = [k for k in self.table if k.rpartition(TOPIC_GROUP_SEPARATOR)[0] == topic]
        for k in keys:
            del self.table[k]
        if keys:
            self.dirty = True
        return len(keys)

    def topics_of_group(self, group: str) -> set[str]:
        """whichTopicByConsumer."""
        return {
            t for t, _, g in (k.rpartition(TOPIC_GROUP_SEPARATOR) for k in self.table) if g == group
        }

    def to_json_obj(self) -> dict[str, Any]:
        """ConsumerOffsetSerializeWrapper member map (int keys become quoted strings)."""
        return {
            "offsetTable": {
                k: {str(q): o for q, o in sorted(v.items())} for k, v in sorted(self.table.items())
            }
        }

    def encode(self, pretty: bool = False) -> str:
        """consumerOffset.json text (also the GET_ALL_CONSUMER_OFFSET body)."""
        if pretty:
            return json.dumps(self.to_json_obj(), indent="\t", sort_keys=True)
        return json.dumps(self.to_json_obj(), separators=(",", ":"), sort_keys=True)

    def decode(self, text: str) -> None:
        """Load consumerOffset.json (ours or a Java broker's)."""
        obj = loads_config(text)
        table = obj.get("offsetTable") if isinstance(obj, dict) else None
        if not isinstance(table, dict):
            raise ValueError("consumerOffset.json: no offsetTable")
        self.table = {
            str(k): {int(q): int(o) for q, o in v.items()}
            for k, v in table.items()
            if isinstance(v, dict)
        }
        self.dirty = False
