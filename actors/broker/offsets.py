"""Consumer offsets: "<topic>@<group>" -> queueId -> next offset to consume.

Mirrors broker/offset/ConsumerOffsetManager.java, RocketMQ 4.9.x. In Java one ConcurrentHashMap
is written by the pull executor (the commit piggybacked on PULL_MESSAGE) and the consumer-manage
executor (UPDATE_CONSUMER_OFFSET), and every other part of the broker reads it in place. Here
those executors are processes, so the map is one table in shared memory (OffsetTable, a file in
the broker's private runtime directory mapped by every actor of the broker): a commit is one
8-byte store, seen by every actor before the reply that follows it leaves, whatever connection
the next request comes on; nothing is sent anywhere per commit. The controller persists the
table to config/consumerOffset.json every flushConsumerOffsetInterval (only when it changed).
"""

from __future__ import annotations

import fcntl
import json
import logging
import mmap
import os
import struct
from collections.abc import Iterator
from typing import Any, Final

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"
OFFSET_TABLE_FILE: Final = "consumerOffset.table"

# OffsetTable layout (native byte order). The header and the values are int64 words, each
# written and read through a memoryview cast to int64 (one aligned 8-byte store or load; see
# store/state_page.py for why not struct.pack_into):
#
#     0   magic
#     8   capacity       entries the table can hold
#     16  count          entries published; entry i owns value i
#     24  dir_used       directory bytes written
#     32  dir_size       directory bytes available
#     HEADER + 8 * i     value i: the offset, or ABSENT (never stored, or removed)
#     HEADER + 8 * capacity ...  the directory: one record per entry, appended
#
# A directory record is ENTRY (key length, queue id) followed by the key's UTF-8 bytes. Entries
# are only ever added (under an flock on the file); an entry is written whole, with its value,
# before `count` moves past it, so a reader that reads `count` first only parses whole entries
# (x86-64 keeps stores in order; Python has no fences). A removed offset keeps its entry and
# reads ABSENT, so a commit after a delete reuses it.
TABLE_MAGIC: Final = 0x41434D514F464654
W_MAGIC, W_CAPACITY, W_COUNT, W_DIR_USED, W_DIR_SIZE = 0, 1, 2, 3, 4
HEADER: Final = 4096
ABSENT: Final = -(1 << 63)  # Long.MIN_VALUE: no client commits it
DEFAULT_CAPACITY: Final = 1 << 20  # (group, topic, queue) entries; the file is sparse
DIR_BYTES_PER_ENTRY: Final = 64
ENTRY = struct.Struct(
    "<H"  # key length in bytes ("<topic>@<group>", UTF-8)
    "i"  # queue id
)


class OffsetTableFull(RuntimeError):
    """No room for another (group, topic, queue) entry: the commit is refused, loudly."""


def offset_table_path(runtime_dir: str) -> str:
    """Where a broker's shared offset table lives: its private runtime directory."""
    return os.path.join(runtime_dir, OFFSET_TABLE_FILE)


class OffsetTable:
    """(key, queue id) -> int64 value slots shared by the processes that map the same file
    (or private to this process when made without a path)."""

    def __init__(self, path: str = "", *, create: bool = False,
                 capacity: int = DEFAULT_CAPACITY) -> None:  # fmt: skip
        self.path = path
        if not path:  # private: anonymous memory, this process only
            size = HEADER + capacity * (8 + DIR_BYTES_PER_ENTRY)
            self.mm = mmap.mmap(-1, size)
            self.words = memoryview(self.mm).cast("q")
            self._init_header(capacity)
        else:
            flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
            fd = os.open(path, flags, 0o600)
            try:
                if create:
                    os.ftruncate(fd, HEADER + capacity * (8 + DIR_BYTES_PER_ENTRY))
                size = os.fstat(fd).st_size
                if size < HEADER:
                    raise OSError(f"{path}: not an offset table ({size} bytes)")
                self.mm = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            self.words = memoryview(self.mm).cast("q")
            if create:
                self._init_header(capacity)
            elif self.words[W_MAGIC] != TABLE_MAGIC:
                raise OSError(f"{path}: not an offset table (bad magic)")
        self.capacity = int(self.words[W_CAPACITY])
        self.dir_base = HEADER + 8 * self.capacity
        self.values = memoryview(self.mm)[HEADER : self.dir_base].cast("q")
        # this process's copy of the directory: key -> queue id -> entry
        self.slots: dict[str, dict[int, int]] = {}
        self._seen = 0
        self._dir_pos = 0
        self.refresh()

    def _init_header(self, capacity: int) -> None:
        w = self.words
        w[W_CAPACITY] = capacity
        w[W_COUNT] = 0
        w[W_DIR_USED] = 0
        w[W_DIR_SIZE] = capacity * DIR_BYTES_PER_ENTRY
        w[W_MAGIC] = TABLE_MAGIC

    def close(self) -> None:
        """Unmap (the file stays for the other processes)."""
        self.values.release()
        self.words.release()
        self.mm.close()

    def refresh(self) -> None:
        """Learn the entries other processes added since the last look."""
        count = int(self.words[W_COUNT])
        if count == self._seen:
            return
        mm, slots, pos, base = self.mm, self.slots, self._dir_pos, self.dir_base
        for i in range(self._seen, count):
            klen, qid = ENTRY.unpack_from(mm, base + pos)
            start = base + pos + ENTRY.size
            key = mm[start : start + klen].decode("utf-8")
            slots.setdefault(key, {})[qid] = i
            pos += ENTRY.size + klen
        self._seen, self._dir_pos = count, pos

    def add(self, key: str, queue_id: int, value: int) -> int:
        """The entry of (key, queue id), made with `value` when no process has it yet."""
        self.refresh()
        have = self.slots.get(key, {}).get(queue_id)
        if have is not None:
            return have
        if not self.path:
            return self._append(key, queue_id, value)
        fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by close, or by this process's death
            return self._append(key, queue_id, value)
        finally:
            os.close(fd)

    def _append(self, key: str, queue_id: int, value: int) -> int:
        self.refresh()
        have = self.slots.get(key, {}).get(queue_id)
        if have is not None:
            return have
        raw = key.encode("utf-8")
        w = self.words
        count, used = int(w[W_COUNT]), int(w[W_DIR_USED])
        need = ENTRY.size + len(raw)
        if count >= self.capacity or used + need > int(w[W_DIR_SIZE]) or len(raw) > 0xFFFF:
            raise OffsetTableFull(
                f"consumer offset table full ({count} entries): cannot keep {key}:{queue_id}")
        at = self.dir_base + used
        ENTRY.pack_into(self.mm, at, len(raw), queue_id)
        self.mm[at + ENTRY.size : at + need] = raw
        self.values[count] = value
        w[W_DIR_USED] = used + need
        w[W_COUNT] = count + 1  # published: the entry and its value are in place
        self.refresh()
        return count

    def entries(self) -> Iterator[tuple[str, int, int]]:
        """(key, queue id, entry) of every entry, after a refresh."""
        self.refresh()
        for key, queues in self.slots.items():
            for qid, slot in queues.items():
                yield key, qid, slot

    def fingerprint(self) -> bytes:
        """The values of every entry as bytes: equal fingerprints, equal tables."""
        count = int(self.words[W_COUNT])
        return count.to_bytes(8, "little") + self.values[:count].tobytes()


def parse_offsets(text: str) -> dict[str, dict[int, int]]:
    """consumerOffset.json's offsetTable (ours or a Java broker's; also the body of
    GET_ALL_CONSUMER_OFFSET)."""
    obj = loads_config(text)
    table = obj.get("offsetTable") if isinstance(obj, dict) else None
    if not isinstance(table, dict):
        raise ValueError("consumerOffset.json: no offsetTable")
    return {
        str(k): {int(q): int(o) for q, o in v.items()}
        for k, v in table.items()
        if isinstance(v, dict)
    }


def loads_config(text: str) -> Any:
    """Parse a config file: standard JSON, else fastjson's unquoted numeric keys."""
    try:
        return json.loads(text)
    except ValueError:
        from protocol.bodies import loads_lenient  # fastjson files from a Java broker

        return loads_lenient(text)


class ConsumerOffsetManager:
    """The offset table (private until shared with share() or attach()); the 5 s persistence
    is left to the owner."""

    def __init__(self) -> None:
        self._t = OffsetTable()

    @property
    def shared_path(self) -> str:
        """The shared table's file ("" while private)."""
        return self._t.path

    def share(self, path: str) -> bool:
        """Use the shared table at `path`: this run's when it is already there (a restarted
        controller), else a new one holding what this table holds. True when made."""
        if os.path.exists(path):
            try:
                self._use(OffsetTable(path))
                return False
            except OSError as exc:
                log.warning("offset table %s unusable (%s): making a new one", path, exc)
        held = self.table
        self._use(OffsetTable(path, create=True))
        self.load_table(held)
        return True

    def attach(self, path: str) -> None:
        """Use the shared table another actor made (a processor at start)."""
        self._use(OffsetTable(path))

    def _use(self, table: OffsetTable) -> None:
        self._t.close()
        self._t = table

    @staticmethod
    def key(topic: str, group: str) -> str:
        """The table key."""
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """commitOffset: one store into the shared table."""
        t = self._t
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        queues = t.slots.get(key)
        slot = queues.get(queue_id) if queues is not None else None
        if slot is None:
            slot = t.add(key, queue_id, offset)  # or the entry another process made
        t.values[slot] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """queryOffset: -1 when nothing is stored."""
        t = self._t
        t.refresh()
        queues = t.slots.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}")
        slot = queues.get(queue_id) if queues is not None else None
        if slot is None:
            return -1
        value = int(t.values[slot])
        return -1 if value == ABSENT else value

    @property
    def table(self) -> dict[str, dict[int, int]]:
        """A copy of the table: key -> queue id -> offset."""
        t = self._t
        values = t.values
        out: dict[str, dict[int, int]] = {}
        for key, qid, slot in t.entries():
            value = int(values[slot])
            if value != ABSENT:
                out.setdefault(key, {})[qid] = value
        return out

    def load_table(self, table: dict[str, dict[int, int]]) -> None:
        """Commit every offset of `table`."""
        for key, queues in table.items():
            topic, _, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
            for qid, off in queues.items():
                self.commit_offset(group, topic, qid, off)

    def _remove(self, match: Any) -> int:
        t = self._t
        values = t.values
        removed: set[str] = set()
        for key, _qid, slot in list(t.entries()):
            if match(key) and values[slot] != ABSENT:
                values[slot] = ABSENT
                removed.add(key)
        return len(removed)

    def remove_group(self, group: str) -> int:
        """Drop every topic of a group; the count of keys removed."""
        return self._remove(lambda k: k.rpartition(TOPIC_GROUP_SEPARATOR)[2] == group)

    def remove_topic(self, topic: str) -> int:
        """Drop every group's offsets of a topic."""
        return self._remove(lambda k: k.rpartition(TOPIC_GROUP_SEPARATOR)[0] == topic)

    def topics_of_group(self, group: str) -> set[str]:
        """whichTopicByConsumer."""
        return {
            t for t, _, g in (k.rpartition(TOPIC_GROUP_SEPARATOR) for k in self.table) if g == group
        }

    def fingerprint(self) -> bytes:
        """Changes whenever an offset changes (the persistence writes only then)."""
        return self._t.fingerprint()

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
        """Load consumerOffset.json (ours or a Java broker's) into the table."""
        self.load_table(parse_offsets(text))
