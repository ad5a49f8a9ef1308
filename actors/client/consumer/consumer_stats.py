"""ConsumerStatsManager: client/stat/ConsumerStatsManager.java of RocketMQ 4.9.x.

Per topic: messages pulled, consumed OK / failed and the handlers' time, as running totals and
as rates over the window since the previous snapshot (Java's StatsItem minute sampling; here a
snapshot is taken whenever the running info is asked for, at most once a second). What
GET_CONSUMER_RUNNING_INFO reports in its statusTable (ConsumeStatus).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass(slots=True)
class TopicStats:
    """Running totals for one topic."""

    pulled: int = 0
    pulls: int = 0
    pull_rt_ms: int = 0
    ok: int = 0
    failed: int = 0
    consume_calls: int = 0
    consume_rt_ms: int = 0


@dataclass(frozen=True, slots=True)
class ConsumeStatus:
    """ConsumeStatus of a running info's statusTable."""

    pull_rt: float
    pull_tps: float
    consume_rt: float
    consume_ok_tps: float
    consume_failed_tps: float
    consume_failed_msgs: int

    def to_wire(self) -> dict[str, float | int]:
        """Java's JSON field names."""
        return {"pullRT": self.pull_rt, "pullTPS": self.pull_tps, "consumeRT": self.consume_rt,
                "consumeOKTPS": self.consume_ok_tps, "consumeFailedTPS": self.consume_failed_tps,
                "consumeFailedMsgs": self.consume_failed_msgs}


@dataclass
class ConsumerStats:
    """The consumer's counters (thread-safe)."""

    topics: dict[str, TopicStats] = field(default_factory=dict)
    flow_controlled: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    _snap: dict[str, TopicStats] = field(default_factory=dict)
    _snap_at: float = field(default_factory=time.monotonic)

    def _topic(self, topic: str) -> TopicStats:
        t = self.topics.get(topic)
        if t is None:
            t = self.topics[topic] = TopicStats()
        return t

    def pulled(self, topic: str, n: int, rt_ms: int = 0) -> None:
        """A pull brought n messages."""
        with self.lock:
            t = self._topic(topic)
            t.pulled += n
            t.pulls += 1
            t.pull_rt_ms += rt_ms

    def consumed(self, topic: str, ok: int, failed: int, rt_ms: int, calls: int = 1) -> None:
        """`calls` handler calls finished."""
        with self.lock:
            t = self._topic(topic)
            t.ok += ok
            t.failed += failed
            t.consume_calls += calls
            t.consume_rt_ms += rt_ms

    def totals(self) -> TopicStats:
        """Every topic added up."""
        with self.lock:
            out = TopicStats()
            for t in self.topics.values():
                out.pulled += t.pulled
                out.pulls += t.pulls
                out.ok += t.ok
                out.failed += t.failed
                out.consume_calls += t.consume_calls
                out.consume_rt_ms += t.consume_rt_ms
            return out

    def status_table(self) -> dict[str, ConsumeStatus]:
        """Per topic rates since the previous call (and the failed total)."""
        now = time.monotonic()
        with self.lock:
            dt = max(now - self._snap_at, 1e-3)
            out = {}
            for name, t in self.topics.items():
                p = self._snap.get(name, TopicStats())
                calls = t.consume_calls - p.consume_calls
                pulls = t.pulls - p.pulls
                out[name] = ConsumeStatus(
                    pull_rt=(t.pull_rt_ms - p.pull_rt_ms) / pulls if pulls else 0.0,
                    pull_tps=(t.pulled - p.pulled) / dt,
                    consume_rt=(t.consume_rt_ms - p.consume_rt_ms) / calls if calls else 0.0,
                    consume_ok_tps=(t.ok - p.ok) / dt,
                    consume_failed_tps=(t.failed - p.failed) / dt,
                    consume_failed_msgs=t.failed,
                )
            if dt >= 1.0:
                self._snap = {k: TopicStats(**{f: getattr(v, f) for f in TopicStats.__slots__})
                              for k, v in self.topics.items()}  # fmt: skip
                self._snap_at = now
            return out
