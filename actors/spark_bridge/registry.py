"""The SparkBridge's registry of attached queries: progress and lag, for `actormq spark list`.

Mirrors broker/client/ConsumerManager.java's role for Spark queries (which readers are
attached, last seen, dropped after a silence as scanNotActiveChannel drops a channel) and
tools ConsumerProgressSubCommand's lag (broker max offset minus the consumer's offset), kept
per query instead of per consumer group. Pure: time is passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from actors.spark_bridge.planner import QueueKey

log = logging.getLogger(__name__)

QUERY_TTL_MS: Final = 10 * 60 * 1000  # a query silent this long is dropped (a killed driver)
DETACHED_TTL_MS: Final = 60 * 1000  # a stopped or batch query stays listed this long
IDLE_AFTER_MS: Final = 60 * 1000  # an active query not heard of this long shows as idle


@dataclass(slots=True)
class QueryInfo:
    """One attached query (a streaming reader or a batch read)."""

    query_id: str
    name: str
    kind: str  # "stream" | "batch"
    topics: tuple[str, ...]
    group: str | None
    attached_ms: int
    last_seen_ms: int
    state: str = "active"  # "active" | "stopped" | "planned" (a batch)
    batches: int = 0  # micro-batches committed (stream) / partitions planned (batch)
    committed: dict[QueueKey, int] = field(default_factory=dict)  # next offsets to read
    latest: dict[QueueKey, int] = field(default_factory=dict)  # max offsets last seen
    unacked: dict[QueueKey, int] = field(default_factory=dict)  # progress no broker recorded

    def lag(self) -> int:
        """Messages stored but not yet processed, summed over the queues seen."""
        return sum(max(0, hi - self.committed.get(k, hi)) for k, hi in self.latest.items())

    def to_obj(self, now_ms: int) -> dict[str, object]:
        """The JSON row `actormq spark list` prints."""
        state = self.state
        if state == "active" and now_ms - self.last_seen_ms > IDLE_AFTER_MS:
            state = "idle"  # no trigger for a while: stopped without saying so, or slow
        return {
            "id": self.query_id, "name": self.name, "kind": self.kind, "state": state,
            "topics": list(self.topics), "group": self.group, "batches": self.batches,
            "committed": sum(self.committed.values()), "latest": sum(self.latest.values()),
            "lag": self.lag() if self.kind == "stream" else None,  # a batch's end is unknown
            "queues": len(self.latest or self.committed),
            "attachedMs": self.attached_ms, "idleMs": max(0, now_ms - self.last_seen_ms),
        }  # fmt: skip


class QueryRegistry:
    """Queries by id; every planning request refreshes its query."""

    def __init__(self, ttl_ms: int = QUERY_TTL_MS, detached_ttl_ms: int = DETACHED_TTL_MS
                 ) -> None:  # fmt: skip
        self.ttl_ms = ttl_ms
        self.detached_ttl_ms = detached_ttl_ms
        self.queries: dict[str, QueryInfo] = {}

    def touch(self, query: Mapping[str, object], topics: tuple[str, ...], group: str | None,
              now_ms: int) -> QueryInfo:  # fmt: skip
        """The query named in a request, attached on first sight."""
        qid = str(query.get("id") or "")
        if not qid:
            raise ValueError("the request names no query id")
        info = self.queries.get(qid)
        if info is None:
            kind = "batch" if query.get("kind") == "batch" else "stream"
            name = str(query.get("name") or group or f"{kind}-{qid[:8]}")
            if kind == "stream":  # the same named query restarted: its new reader replaces it
                for old in [q for q in self.queries.values()
                            if q.kind == "stream" and q.name == name]:  # fmt: skip
                    del self.queries[old.query_id]
            info = QueryInfo(qid, name, kind, topics, group, now_ms, now_ms)
            if kind == "batch":
                info.state = "planned"
            self.queries[qid] = info
            log.info("query attached id=%s name=%s kind=%s topics=%s", qid, name, kind,
                     ",".join(topics))  # fmt: skip
        info.last_seen_ms = now_ms
        return info

    def note_latest(self, info: QueryInfo, maxes: Mapping[QueueKey, int]) -> None:
        """The heads seen when the next micro-batch was sized."""
        info.latest.update(maxes)

    def note_start(self, info: QueryInfo, start: Mapping[QueueKey, int]) -> None:
        """Where a query starts (its progress until its first commit)."""
        for key, off in start.items():
            info.committed.setdefault(key, off)

    def note_progress(self, info: QueryInfo, done: Mapping[QueueKey, int]) -> dict[QueueKey, int]:
        """Everything before `done` is processed; the offsets that moved forward (each stays
        unacknowledged until a broker records it for the query's group)."""
        moved = {k: v for k, v in done.items() if v > info.committed.get(k, -1)}
        info.committed.update(moved)
        info.unacked.update(moved)
        return moved

    def note_recorded(self, info: QueryInfo, sent: Mapping[QueueKey, int],
                      failed: Mapping[QueueKey, str]) -> None:  # fmt: skip
        """A broker recorded the group offsets `sent` except the failed ones; the rest (and any
        offset moved on since) is sent again with the next commit."""
        for key, off in sent.items():
            if key not in failed and info.unacked.get(key) == off:
                del info.unacked[key]

    def note_commit(self, info: QueryInfo, end: Mapping[QueueKey, int]) -> dict[QueueKey, int]:
        """A micro-batch is done (Spark's commit); the offsets that moved forward."""
        info.batches += 1
        return self.note_progress(info, end)

    def detach(self, query_id: str, now_ms: int) -> None:
        """The query stopped (kept listed for a short while)."""
        info = self.queries.get(query_id)
        if info is not None:
            info.state = "stopped"
            info.last_seen_ms = now_ms

    def expire(self, now_ms: int) -> list[str]:
        """Drop queries silent past their TTL; their ids."""
        gone = [qid for qid, q in self.queries.items()
                if now_ms - q.last_seen_ms > (self.ttl_ms if q.state == "active"
                                              else self.detached_ttl_ms)]  # fmt: skip
        for qid in gone:
            log.info("query dropped id=%s name=%s", qid, self.queries[qid].name)
            del self.queries[qid]
        return gone

    def rows(self, now_ms: int) -> list[dict[str, object]]:
        """Every query's row, oldest first."""
        return [q.to_obj(now_ms) for q in sorted(self.queries.values(),
                                                  key=lambda q: (q.attached_ms, q.query_id))]
