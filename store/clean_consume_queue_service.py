"""Consume queues and index below the commit log's start: CleanConsumeQueueService.

Mirrors store/DefaultMessageStore.java CleanConsumeQueueService (deleteExpiredFiles: the
consume-queue files and index files wholly below the commit log's new min offset) and
cleanExpiredConsumerQueue, RocketMQ 4.9.x.
"""

from __future__ import annotations

import logging

from protocol.codes import SCHEDULE_TOPIC
from store.build_index_dispatcher import CommitLogDispatcherBuildIndex
from store.consume_queue_table import ConsumeQueueTable

log = logging.getLogger(__name__)


class CleanConsumeQueueService:
    """Follow the commit log's min offset with the consume queues and the index."""

    def __init__(self, cq_table: ConsumeQueueTable, index: CommitLogDispatcherBuildIndex) -> None:
        self.cq_table = cq_table
        self.index = index
        self.last_physical_min_offset = 0

    def run(self, min_phy: int) -> bool:
        """deleteExpiredFiles when the commit log's min offset moved; True when it did."""
        if min_phy <= self.last_physical_min_offset:
            return False
        self.last_physical_min_offset = min_phy
        self.cq_table.delete_expired_files(min_phy)
        self.index.delete_expired(min_phy)  # ("process": the index process deletes its own)
        return True

    def expired_queues(self, min_phy: int) -> list[tuple[str, int]]:
        """cleanExpiredConsumerQueue: drop consume queues whose last unit ends below the commit
        log's min offset; an empty queue stays, and so do the delay levels' queues (as in Java:
        ScheduleMessageService's offsets number them, and a level restarting at 0 below its
        saved offset would never deliver what it parks next). The keys dropped."""
        expired = self.cq_table.expired(min_phy, SCHEDULE_TOPIC)
        self.cq_table.drop(expired)
        return expired
