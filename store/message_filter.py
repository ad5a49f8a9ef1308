"""Consume-queue level filtering on the read path: store/MessageFilter.java and the tag-code
check of broker/filter/ExpressionMessageFilter.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

log = logging.getLogger(__name__)


class MessageFilter(Protocol):
    """Consume-queue level filter (MessageFilter.isMatchedByConsumeQueue)."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """True when a unit with this tags code should be returned."""
        ...


@runtime_checkable
class CommitLogMessageFilter(Protocol):
    """A filter that also reads each stored record that passed the consume queue
    (MessageFilter.isMatchedByCommitLog: a SQL92 subscription's properties check); a record it
    refuses is skipped like a tag mismatch, within the same scan."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """True when a unit with this tags code should be returned."""
        ...

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        """True when the stored record should be returned."""
        ...


class TagFilter:
    """Tag-hash filter: None or an empty set means '*'."""

    __slots__ = ("code_set",)

    def __init__(self, code_set: set[int] | None) -> None:
        self.code_set = code_set or None

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """(int) tagsCode must be in the code set."""
        cs = self.code_set
        if cs is None:
            return True
        tc = tags_code & 0xFFFFFFFF
        return (tc - 0x100000000 if tc & 0x80000000 else tc) in cs
