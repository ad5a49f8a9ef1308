"""The pull filter of a subscription: tag hash codes, or a SQL92 expression on the properties.

Mirrors broker/filter/ExpressionMessageFilter.java, RocketMQ 4.9.x: isMatchedByConsumeQueue
checks the tags hash code a consume-queue unit carries ('*' passes everything), and
isMatchedByCommitLog evaluates a SQL92 expression on the stored record's properties. The pull
processor resolves a pull's filter; the hold service rebuilds it from what HoldPull carries.
"""

from __future__ import annotations

from typing import Final

from actors.broker.consumer_manager import matches_all
from actors.broker.sql92 import Sql92Filter
from protocol.bodies import SubscriptionData
from protocol.message import parse_properties
from protocol.record import RecordError, decode_record_fields


def _int32(v: int) -> int:
    return ((v + 0x80000000) & 0xFFFFFFFF) - 0x80000000


class SubscriptionFilter:
    """ExpressionMessageFilter: TAG subscriptions by (int) tagsCode in codeSet ('*' passes);
    SQL92 ones pass the consume queue and are evaluated on each record's properties."""

    __slots__ = ("code_set", "sql")

    def __init__(self, code_set: frozenset[int] | None, sql: Sql92Filter | None = None) -> None:
        self.code_set = code_set or None
        self.sql = sql

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        """Consume-queue level check on the tag hash."""
        if self.code_set is None or tags_code is None:
            return True
        return _int32(tags_code) in self.code_set


class SqlSubscriptionFilter(SubscriptionFilter):
    """A SQL92 subscription in the store's scan: every unit passes the consume queue and each
    record is kept only when its properties match (isMatchedByCommitLog), so only matching
    records count towards maxMsgNums, as in DefaultMessageStore.getMessage."""

    __slots__ = ()

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        """Evaluate the expression on the stored record's properties."""
        assert self.sql is not None
        return self.sql.matches(record_properties(record))


def record_properties(record: memoryview) -> dict[str, str]:
    """The properties of one stored record ({} when it does not decode)."""
    try:
        raw = decode_record_fields(record, 0).properties
        return parse_properties(bytes(raw).decode("utf-8", "replace")) if raw else {}
    except (RecordError, ValueError):
        return {}


MATCH_ALL: Final = SubscriptionFilter(None)


def filter_for(sub: SubscriptionData) -> SubscriptionFilter:
    """The consume-queue filter of a TAG subscription."""
    if matches_all(sub):
        return MATCH_ALL
    return SubscriptionFilter(frozenset(_int32(c) for c in sub.code_set))


def filter_of(tag_codes: tuple[int, ...] | None, sql: Sql92Filter | None) -> SubscriptionFilter:
    """The filter a HoldPull describes (MATCH_ALL for no codes and no SQL)."""
    if sql is not None:
        return SqlSubscriptionFilter(None, sql)
    if not tag_codes:
        return MATCH_ALL
    return SubscriptionFilter(frozenset(tag_codes))


def describe(flt: SubscriptionFilter) -> tuple[tuple[int, ...] | None, str | None]:
    """(tag codes, SQL92 text) of a filter, as HoldPull carries them."""
    if flt.sql is not None:
        return None, flt.sql.expression
    return (tuple(sorted(flt.code_set)) if flt.code_set else None), None
