"""A read-only view of a store written by another process, and the store consistency check.

The read side of store/DefaultMessageStore.java (RocketMQ 4.9.x) opened read-only: a broker
processor process maps the writer's files and trusts only what the state page publishes.
"""

from __future__ import annotations

import logging
import os
from typing import Protocol

from store.checkpoint import StoreCheckpoint
from store.commitlog import CommitLog
from store.config import StoreConfig
from store.consume_queue import (
    PRE_BLANK_SIZE,
    ConsumeQueue,
    ConsumeQueueView,
)
from store.index import IndexService
from store.message_store_read import MessageStoreRead, MessageStoreReadSide
from store.state_page import (
    OFF_INDEX_PHY,
    StatePage,
)
from store.stats_page import StatsPage
from store.store_stats_service import StoreStatsService

log = logging.getLogger(__name__)


class CheckedStore(Protocol):
    """What check_store reads: a writer (its queues, queue table and checkpoint too) or a
    read-only view (writer_state() None)."""

    commitlog: CommitLog

    @property
    def index(self) -> IndexService: ...

    @property
    def max_phy_offset(self) -> int: ...

    @property
    def min_phy_offset(self) -> int: ...

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None: ...

    def writer_state(
        self,
    ) -> tuple[dict[tuple[str, int], ConsumeQueue], dict[tuple[str, int], int],
               StoreCheckpoint | None] | None: ...  # fmt: skip


def check_store(store: CheckedStore) -> list[str]:
    """Problems found walking every record and every consume-queue unit."""
    problems: list[str] = []
    cl = store.commitlog
    min_phy, max_phy = store.min_phy_offset, store.max_phy_offset
    per_queue: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    if cl.mfq.files:
        walk = cl.walk(min_phy, True)
        for req in walk:
            if req.phy_offset >= max_phy:
                break
            if req.sys_flag & 0xC not in (0x4, 0xC):  # prepared / rolled back: no unit
                per_queue.setdefault((req.topic, req.queue_id), []).append(
                    (req.queue_offset, req.phy_offset, req.size)
                )
        if walk.end < max_phy:
            problems.append(f"commitlog: valid records end at {walk.end}, max offset is {max_phy}")
    writer = store.writer_state()
    for (topic, qid), recs in per_queue.items():
        cq = store.consume_queue(topic, qid)
        if cq is None:
            problems.append(f"consumequeue {topic}/{qid}: missing ({len(recs)} records)")
            continue
        prev = -1
        for qoff, phy, size in recs:
            if prev >= 0 and qoff != prev + 1:
                problems.append(f"commitlog {topic}/{qid}: queue offset {qoff} follows {prev}")
            prev = qoff
            if qoff < cq.get_min_offset_in_queue():
                continue
            u = cq.get_unit(qoff)
            if u is None or u[0] != phy or u[1] != size:
                problems.append(
                    f"consumequeue {topic}/{qid}: unit {qoff} is {u}, record at {phy} size {size}"
                )
                break
        if recs and cq.get_max_offset_in_queue() != recs[-1][0] + 1:
            problems.append(
                f"consumequeue {topic}/{qid}: max offset {cq.get_max_offset_in_queue()}, "
                f"commitlog says {recs[-1][0] + 1}"
            )
    queues = writer[0] if writer is not None else {}
    for (topic, qid), cq in queues.items():
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        for off in range(lo, hi):
            u = cq.get_unit(off)
            if u is None:
                problems.append(f"consumequeue {topic}/{qid}: unit {off} unreadable")
                break
            if u[1] == PRE_BLANK_SIZE:
                continue
            if u[0] + u[1] > max_phy:
                problems.append(
                    f"consumequeue {topic}/{qid}: unit {off} points past the commitlog ({u[0]})"
                )
                break
            if u[0] >= min_phy and cl.record_size_at(u[0]) != u[1]:
                problems.append(
                    f"consumequeue {topic}/{qid}: unit {off} does not point at a record"
                )
                break
    for f in store.index.files:
        if f.index_count > 1 and f.end_phy >= max_phy:
            problems.append(
                f"index {f.file_name}: end phy {f.end_phy} beyond commitlog max {max_phy}"
            )
        if f.index_count > f.index_num:
            problems.append(f"index {f.file_name}: count {f.index_count} beyond capacity")
    if writer is not None:
        queues, queue_table, cp = writer
        last = cl.last_store_timestamp
        if cp is not None and last and cp.physic_msg_timestamp > last:
            problems.append(
                f"checkpoint: physic timestamp {cp.physic_msg_timestamp} after last record {last}"
            )
        for key, nxt in queue_table.items():
            cq = queues.get(key)
            if cq is not None and cq.get_max_offset_in_queue() != nxt:
                problems.append(
                    f"queue table {key}: next offset {nxt} != cq max {cq.get_max_offset_in_queue()}"
                )
    return problems


# ---- read-only view in another process --------------------------------------------------------
class MessageStoreReader(MessageStoreReadSide):
    """A read-only view of a store written by another process."""

    def __init__(self, cfg: StoreConfig) -> None:
        self.cfg = cfg
        self.root = cfg.storePathRootDir
        self.commitlog = CommitLog(cfg, writable=False)
        self.cq_root = os.path.join(self.root, "consumequeue")
        self._index = IndexService(self.root, cfg.maxHashSlotNum, cfg.maxIndexNum, writable=False)
        self.state = StatePage(os.path.join(self.root, "state"), writable=False)
        self.stats = StoreStatsService()  # this view's gets
        self.stats_page: StatsPage | None = None  # where they are published (set by its owner)
        self.read = MessageStoreRead(self, self.stats)
        self._queues: dict[tuple[str, int], ConsumeQueueView] = {}
        self._generation = -1
        self.commitlog.mfq.refresh()
        self._index.refresh()

    # ---- the view (StoreView) ----------------------------------------------------------------
    @property
    def index(self) -> IndexService:
        """The index files, read-only."""
        return self._index

    def _sync_generation(self) -> bool:
        g = self.state.generation
        if g != self._generation:
            self._generation = g
            return True
        return False

    def commit_log_data(self, phy: int, size: int) -> memoryview | None:
        """size bytes at phy (a file made since the last look is mapped now)."""
        data = self.commitlog.get_data(phy, size)
        if data is None:
            self.commitlog.mfq.refresh()
            data = self.commitlog.get_data(phy, size)
        return data

    @property
    def max_phy_offset(self) -> int:
        """What the writer published as usable."""
        return self.state.max_phy

    @property
    def min_phy_offset(self) -> int:
        """The commit log's first offset, as published."""
        return self.state.min_phy

    @property
    def flushed_offset(self) -> int:
        """Published flushed offset."""
        return self.state.flushed_phy

    def refresh_index(self) -> None:
        """See the index files the owner wrote since."""
        self._index.refresh()

    @property
    def indexed_offset(self) -> int:
        """What the index owner published ("tick"/"process"), else the max offset."""
        if self.cfg.index_mode in ("tick", "process"):
            return self.state.get(OFF_INDEX_PHY)
        return self.state.max_phy

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue's view, brought up to what the writer published (None: there is none)."""
        # max_phy before the generation: the writer bumps the generation before it publishes
        # any record of a file it creates, so every file holding a record below this max_phy
        # is on disk by the generation read next. The other order let a roll fall between the
        # two loads: units into a file this view had not mapped were visible, and the get
        # skipped them (a FOUND batch whose next offset jumped past their records).
        max_phy = self.state.max_phy
        changed = self._sync_generation()
        if changed:
            self.commitlog.mfq.refresh()
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            if not os.path.isdir(os.path.join(self.cq_root, topic, str(queue_id))):
                return None
            cq = ConsumeQueueView(
                self.cq_root, topic, queue_id, self.cfg.mappedFileSizeConsumeQueue
            )
            self._queues[(topic, queue_id)] = cq
            changed = True
        cq.sync(max_phy, self.state.min_phy, changed)
        return cq

    @property
    def consume_queues(self) -> dict[tuple[str, int], ConsumeQueueView]:
        """Queues opened so far."""
        return self._queues

    def writer_state(self) -> None:
        """A view has no queue table nor checkpoint of its own (check_store)."""
        return None

    def publish_stats(self) -> None:
        """Write this view's get counters into the stats page (when it owns one)."""
        if self.stats_page is not None:
            self.stats.publish_gets(self.stats_page)

    def check(self) -> list[str]:
        """check_store on this view."""
        return check_store(self)

    def close(self) -> None:
        """Unmap everything."""
        self.commitlog.close()
        for cq in self._queues.values():
            cq.close()
        self._index.close()
        self.state.close()
        if self.stats_page is not None:
            self.publish_stats()
            self.stats_page.close()
            self.stats_page = None
