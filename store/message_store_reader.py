"""A read-only view of a store written by another process, and the store consistency check.

The read side of store/DefaultMessageStore.java (RocketMQ 4.9.x) opened read-only: a broker
processor process maps the writer's files and trusts only what the state page publishes.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from store.commitlog import (
    ROLLBACK_OR_PREPARED,
    CommitLog,
)
from store.config import StoreConfig
from store.consume_queue import (
    PRE_BLANK_SIZE,
    ConsumeQueue,
    ConsumeQueueView,
)
from store.index import IndexService
from store.message_store_read import StoreReadMixin
from store.state_page import (
    OFF_INDEX_PHY,
    StatePage,
)

if TYPE_CHECKING:
    from store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)


def check_store(store: DefaultMessageStore | MessageStoreReader) -> list[str]:
    """Problems found walking every record and every consume-queue unit."""
    problems: list[str] = []
    cl = store.commitlog
    min_phy, max_phy = store.min_phy_offset, store.max_phy_offset
    per_queue: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    count = 0
    if cl.mfq.files:
        for req in cl.walk(min_phy, True):
            if req.phy_offset >= max_phy:
                break
            count += 1
            if req.sys_flag & 0xC not in ROLLBACK_OR_PREPARED:
                per_queue.setdefault((req.topic, req.queue_id), []).append(
                    (req.queue_offset, req.phy_offset, req.size)
                )
        if cl.walk_end < max_phy:
            problems.append(
                f"commitlog: valid records end at {cl.walk_end}, max offset is {max_phy}"
            )
    for (topic, qid), recs in per_queue.items():
        cq = store._cq(topic, qid)
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
    queues = {} if isinstance(store, MessageStoreReader) else store.consume_queues
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
    if not isinstance(store, MessageStoreReader) and store.checkpoint is not None:
        cp = store.checkpoint
        last = cl.last_store_timestamp
        if last and cp.physic_msg_timestamp > last:
            problems.append(
                f"checkpoint: physic timestamp {cp.physic_msg_timestamp} after last record {last}"
            )
    if not isinstance(store, MessageStoreReader):
        for key, nxt in store.topic_queue_table.items():
            cq = store.consume_queues.get(key)
            if cq is not None and cq.get_max_offset_in_queue() != nxt:
                problems.append(
                    f"queue table {key}: next offset {nxt} != cq max {cq.get_max_offset_in_queue()}"
                )
    _ = count
    return problems


# ---- read-only view in another process --------------------------------------------------------
class MessageStoreReader(StoreReadMixin):
    """A read-only view of a store written by another process."""

    def __init__(self, cfg: StoreConfig) -> None:
        self.cfg = cfg
        self.root = cfg.storePathRootDir
        self.commitlog = CommitLog(cfg, writable=False)
        self.cq_root = os.path.join(self.root, "consumequeue")
        self.index = IndexService(self.root, cfg.maxHashSlotNum, cfg.maxIndexNum, writable=False)
        self.state = StatePage(os.path.join(self.root, "state"), writable=False)
        self._queues: dict[tuple[str, int], ConsumeQueueView] = {}
        self._generation = -1
        self._cl_generation = -1
        self.commitlog.mfq.refresh()
        self.index.refresh()

    def _sync_generation(self) -> bool:
        g = self.state.generation
        if g != self._generation:
            self._generation = g
            return True
        return False

    def _cl_data(self, phy: int, size: int) -> memoryview | None:
        data = self.commitlog.get_data(phy, size)
        if data is None:
            self.commitlog.mfq.refresh()
            data = self.commitlog.get_data(phy, size)
        return data

    def _max_phy(self) -> int:
        return self.state.max_phy

    def _min_phy(self) -> int:
        return self.state.min_phy

    @property
    def flushed_offset(self) -> int:
        """Published flushed offset."""
        return self.state.flushed_phy

    def _refresh_index(self) -> None:
        self.index.refresh()

    @property
    def indexed_offset(self) -> int:
        """What the index owner published ("tick"/"process"), else the max offset."""
        if self.cfg.index_mode in ("tick", "process"):
            return self.state.get(OFF_INDEX_PHY)
        return self.state.max_phy

    def _cq(self, topic: str, queue_id: int) -> ConsumeQueue | None:
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

    def check(self) -> list[str]:
        """check_store on this view."""
        return check_store(self)

    def close(self) -> None:
        """Unmap everything."""
        self.commitlog.close()
        for cq in self._queues.values():
            cq.close()
        self.index.close()
        self.state.close()
        if self.stats_page is not None:
            self.publish_stats()
            self.stats_page.close()
            self.stats_page = None
