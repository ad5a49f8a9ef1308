"""Consumer offset stores: client/consumer/store/* of RocketMQ 4.9.x.

OffsetStore's in-memory table (updateOffset with increaseOnly, readOffset by ReadOffsetType,
removeOffset, cloneOffsetTable), RemoteBrokerOffsetStore (CLUSTERING: offsets live on the
broker; QUERY_CONSUMER_OFFSET to read, UPDATE_CONSUMER_OFFSET to persist) and
LocalFileOffsetStore (BROADCASTING: `<dir>/<clientId>/<group>/offsets.json`, Java's
OffsetSerializeWrapper written as MixAll.string2File does, with a `.bak`). The broker calls go
through an OffsetBroker capability, so the tables are tested without a broker.

One difference from Java: `persist(mq, sync=True)` waits for the broker's answer. A clean close
or a revoked queue persists this way before the group is unregistered (Java's oneway update can
arrive after another member already read the old offset, which is a duplicate).
"""

from __future__ import annotations

import enum
import json
import logging
import os
import threading
from collections.abc import Iterable
from typing import Protocol

from protocol.bodies import MessageQueue, dumps_object_map, loads_object_map
from store.config_files import write_text_atomic

log = logging.getLogger(__name__)


class ReadOffsetType(enum.Enum):
    """Where readOffset looks."""

    READ_FROM_MEMORY = 0
    READ_FROM_STORE = 1
    MEMORY_FIRST_THEN_STORE = 2


class OffsetNotFoundError(Exception):
    """The broker holds no offset for this group and queue (QUERY_NOT_FOUND)."""


class OffsetBroker(Protocol):
    """The broker calls RemoteBrokerOffsetStore needs (the consumer's MQClientAPI adapter)."""

    def query_offset(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET at the queue's master; OffsetNotFoundError when none."""
        ...

    def commit_offset(self, mq: MessageQueue, offset: int, *, oneway: bool) -> None:
        """UPDATE_CONSUMER_OFFSET at the queue's master (raises when sync and it fails)."""
        ...


class OffsetStore:
    """The in-memory table every store keeps (thread-safe)."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.table: dict[MessageQueue, int] = {}
        self.lock = threading.Lock()

    def load(self) -> None:
        """Read what the store keeps at start (nothing for the broker store)."""

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """Set mq's offset (never backwards when increase_only)."""
        with self.lock:
            old = self.table.get(mq)
            if old is None or not increase_only or offset > old:
                self.table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        """The in-memory offset, -1 when none."""
        return self.table.get(mq, -1)

    def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        """readOffset: >= 0 an offset, -1 none, -2 the store could not be read."""
        if how is not ReadOffsetType.READ_FROM_STORE:
            off = self.table.get(mq)
            if off is not None:
                return off
            if how is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        return self.read_from_store(mq)

    def read_from_store(self, mq: MessageQueue) -> int:
        """The stored offset (cached in memory when found)."""
        raise NotImplementedError

    def remove_offset(self, mq: MessageQueue) -> None:
        """Forget mq (a revoked queue, or a dirty offset before a queue is taken)."""
        with self.lock:
            self.table.pop(mq, None)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        """A copy of the table (one topic's queues when topic is given)."""
        with self.lock:
            return {mq: o for mq, o in self.table.items() if not topic or mq.topic == topic}

    def persist(self, mq: MessageQueue, *, sync: bool = False) -> None:
        """Store mq's offset."""
        raise NotImplementedError

    def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Store the offsets of mqs (the 5 s tick)."""
        raise NotImplementedError


class RemoteBrokerOffsetStore(OffsetStore):
    """CLUSTERING: the offsets live on the brokers."""

    def __init__(self, group: str, broker: OffsetBroker) -> None:
        super().__init__(group)
        self.broker = broker

    def read_from_store(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET; -1 when the broker has none, -2 when it cannot be asked."""
        try:
            off = self.broker.query_offset(mq)
        except OffsetNotFoundError:
            return -1
        except Exception as exc:  # Java's readOffset turns any failure into -2
            log.warning("group %s: cannot read the offset of %s: %s", self.group, mq, exc)
            return -2
        self.update_offset(mq, off, False)
        return off

    def persist(self, mq: MessageQueue, *, sync: bool = False) -> None:
        """UPDATE_CONSUMER_OFFSET for mq (sync: wait for the answer; failures are raised)."""
        off = self.table.get(mq)
        if off is not None:
            self.broker.commit_offset(mq, off, oneway=not sync)

    def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Oneway updates for mqs; offsets of queues no longer held are forgotten (as Java)."""
        keep = set(mqs)
        if not keep:
            return
        with self.lock:
            items = list(self.table.items())
            for mq, _ in items:
                if mq not in keep:
                    del self.table[mq]
        for mq, off in items:
            if mq in keep:
                try:
                    self.broker.commit_offset(mq, off, oneway=True)
                except Exception as exc:  # the next tick or pull commits it
                    log.warning("group %s: offset %d of %s not persisted: %s", self.group, off,
                                mq, exc)  # fmt: skip


def local_offset_store_dir() -> str:
    """Java's rocketmq.client.localOffsetStoreDir (env ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR)."""
    return os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR") or os.path.join(
        os.path.expanduser("~"), ".rocketmq_offsets")


class LocalFileOffsetStore(OffsetStore):
    """BROADCASTING: offsets in a local file per client id and group."""

    def __init__(self, group: str, client_id: str, base_dir: str | None = None) -> None:
        super().__init__(group)
        self.path = os.path.join(base_dir or local_offset_store_dir(), client_id, group,
                                 "offsets.json")  # fmt: skip
        self.file_lock = threading.Lock()

    def _read_file(self) -> dict[MessageQueue, int]:
        for path in (self.path, self.path + ".bak"):
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                continue
            if not text.strip():
                continue
            try:
                return parse_offset_wrapper(text)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("unreadable offset file %s (%s); trying its .bak", path, exc)
        return {}

    def load(self) -> None:
        """Read the file into memory."""
        with self.file_lock:
            found = self._read_file()
        with self.lock:
            self.table.update(found)

    def read_from_store(self, mq: MessageQueue) -> int:
        """The file's offset for mq, -1 when none."""
        with self.file_lock:
            off = self._read_file().get(mq)
        if off is None:
            return -1
        self.update_offset(mq, off, False)
        return off

    def _write(self, offsets: dict[MessageQueue, int]) -> None:
        with self.file_lock:
            merged = self._read_file()
            merged.update(offsets)
            write_text_atomic(self.path, format_offset_wrapper(merged))

    def persist(self, mq: MessageQueue, *, sync: bool = False) -> None:
        """Write mq's offset into the file (always synchronous)."""
        off = self.table.get(mq)
        if off is not None:
            self._write({mq: off})

    def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the offsets of mqs into the file."""
        keep = set(mqs)
        if keep:
            with self.lock:
                offsets = {mq: o for mq, o in self.table.items() if mq in keep}
            self._write(offsets)


def format_offset_wrapper(offsets: dict[MessageQueue, int]) -> str:
    """OffsetSerializeWrapper JSON: {"offsetTable":{{"brokerName":..}:offset,...}}."""
    table = dumps_object_map((mq.to_obj(), off) for mq, off in sorted(offsets.items()))
    return '{"offsetTable":' + table.decode() + "}"


def parse_offset_wrapper(text: str) -> dict[MessageQueue, int]:
    """Read OffsetSerializeWrapper JSON as written by this module or by Java's fastjson."""
    i = text.index('"offsetTable"')
    i = text.index(":", i) + 1
    while text[i] in " \t\r\n":
        i += 1
    pairs, _ = loads_object_map(text, i)
    out: dict[MessageQueue, int] = {}
    for key, value in pairs:
        if isinstance(key, str):  # a key fastjson wrote as a JSON string
            key = json.loads(key)
        out[MessageQueue.from_obj(key)] = int(value)
    return out
