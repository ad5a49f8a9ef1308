"""The writer's consume queues: DefaultMessageStore's consumeQueueTable.

Mirrors store/DefaultMessageStore.java (consumeQueueTable with findConsumeQueue,
loadConsumeQueue, recoverConsumeQueue, truncateDirtyLogicFiles, recoverTopicQueueTable and the
consume-queue part of FlushConsumeQueueService and CleanConsumeQueueService), RocketMQ 4.9.x.
The queues themselves are store.consume_queue; this table owns them: it makes, finds, loads,
truncates, flushes and drops them, and says when the set of queues changed (readers rescan).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable

from store.consume_queue import ConsumeQueue
from store.mapped_file import RangeSync

log = logging.getLogger(__name__)


class ConsumeQueueTable:
    """Every (topic, queue id) consume queue of one store directory."""

    def __init__(self, store_root: str, file_size: int, on_change: Callable[[], None]) -> None:
        """on_change: a queue was made or dropped (the writer bumps the state generation)."""
        self.root = os.path.join(store_root, "consumequeue")
        self.file_size = file_size
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._on_change = on_change

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue, or None when there is none."""
        return self.queues.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """findConsumeQueue: the queue, made (and its files loaded) when new."""
        key = (topic, queue_id)
        cq = self.queues.get(key)
        if cq is None:
            cq = ConsumeQueue(self.root, topic, queue_id, self.file_size)
            cq.load()
            self.queues[key] = cq
            self._on_change()
        return cq

    def load(self) -> None:
        """loadConsumeQueue + recoverConsumeQueue: map every queue on disk and find its end."""
        if not os.path.isdir(self.root):
            os.makedirs(self.root, exist_ok=True)
            return
        for topic in os.listdir(self.root):
            tdir = os.path.join(self.root, topic)
            if not os.path.isdir(tdir):
                continue
            for q in os.listdir(tdir):
                if not q.lstrip("-").isdigit():
                    continue
                cq = ConsumeQueue(self.root, topic, int(q), self.file_size)
                cq.load()
                cq.recover()
                self.queues[(topic, int(q))] = cq

    def max_phy_offset(self) -> int:
        """The largest commit-log end any queue's last unit points at (0 without units)."""
        return max((cq.max_phy_offset for cq in self.queues.values()), default=0)

    def truncate_dirty(self, phy_offset: int) -> None:
        """truncateDirtyLogicFiles: drop units of records at or after phy_offset."""
        for cq in self.queues.values():
            cq.truncate_dirty(phy_offset)

    def correct_min_offset(self, min_phy: int) -> None:
        """Move each queue's min offset past units below the commit log's first record."""
        for cq in self.queues.values():
            cq.correct_min_offset(min_phy)

    def queue_offsets(self) -> dict[tuple[str, int], int]:
        """recoverTopicQueueTable: each queue's next queue offset."""
        return {k: cq.get_max_offset_in_queue() for k, cq in self.queues.items()}

    def flush(self, least_pages: int, sync: RangeSync | None = None) -> bool:
        """Flush files with >= least_pages dirty pages (0: every one); True when none was left
        dirty (FlushConsumeQueueService's round over the table)."""
        complete = True
        for cq in list(self.queues.values()):
            if not cq.mfq.flush_ranges(least_pages, sync):
                complete = False
        return complete

    def delete_expired_files(self, min_phy: int) -> None:
        """CleanConsumeQueueService: each queue's files wholly below the commit log's start."""
        for cq in self.queues.values():
            cq.delete_expired_files(min_phy)

    def expired(self, min_phy: int, keep_topic: str) -> list[tuple[str, int]]:
        """cleanExpiredConsumerQueue's choice: queues whose last unit ends below min_phy (an
        empty queue stays, and so does every queue of keep_topic)."""
        return [
            key
            for key, cq in self.queues.items()
            if key[0] != keep_topic and cq.get_max_offset_in_queue() > 0
            and cq.max_phy_offset < min_phy
        ]  # fmt: skip

    def drop(self, keys: list[tuple[str, int]]) -> None:
        """Unmap, delete and forget these queues; readers rescan."""
        for key in keys:
            self.queues.pop(key).destroy()
            shutil.rmtree(os.path.join(self.root, key[0], str(key[1])), ignore_errors=True)
        if keys:
            self._on_change()

    def delete_topics(self, topics: set[str] | list[str]) -> list[tuple[str, int]]:
        """Drop every queue of these topics and their directories; the keys dropped."""
        keys = [k for k in self.queues if k[0] in topics]
        self.drop(keys)
        for t in topics:
            shutil.rmtree(os.path.join(self.root, t), ignore_errors=True)
        return keys

    def close(self) -> None:
        """Unmap every queue."""
        for cq in self.queues.values():
            cq.close()
