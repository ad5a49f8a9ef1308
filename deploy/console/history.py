"""The last hour of the figures the console charts: a pure store of timed points per series,
and the sampler thread that feeds it.

Mirrors nothing in RocketMQ (rocketmq-dashboard keeps its own history in files the same way:
what the console has seen since it started). MetricsHistory is a plain class with time passed
in; ClusterSampler is its adapter, asking the cluster every `interval_s` for each broker's put and
get TPS and disk use and each group's lag per topic.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable

from deploy.admin_ext import AdminError

log = logging.getLogger(__name__)

WINDOW_S = 3600.0
DEFAULT_INTERVAL_S = 10.0


class MetricsHistory:
    """Series of (time in s, value), each kept for `window_s` back from the newest point."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._series: dict[str, deque[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def add(self, now_s: float, key: str, value: float) -> None:
        if not math.isfinite(value):
            return  # a broker's "NaN" or "Infinity": no point (JSON cannot carry it)
        with self._lock:
            points = self._series.setdefault(key, deque())
            points.append((now_s, value))
            while points and points[0][0] < now_s - self.window_s:
                points.popleft()

    def prune(self, now_s: float) -> None:
        """Points older than the window dropped from every series, and series left empty
        (a deleted group, a queue or broker gone) forgotten."""
        with self._lock:
            for key in list(self._series):
                points = self._series[key]
                while points and points[0][0] < now_s - self.window_s:
                    points.popleft()
                if not points:
                    del self._series[key]

    def points(self, key: str) -> list[tuple[float, float]]:
        with self._lock:
            return list(self._series.get(key, ()))

    def chart(self, prefix: str) -> dict[str, list[tuple[float, float]]]:
        """Every series whose key starts with `prefix`, by the rest of its key."""
        with self._lock:
            return {k[len(prefix):]: list(v) for k, v in sorted(self._series.items())
                    if k.startswith(prefix)}  # fmt: skip


Sample = Callable[[], dict[str, float]]


class ClusterSampler:
    """A daemon thread adding `sample()`'s figures to `history` every `interval_s` until
    stopped; a sample that fails is logged and skipped (the chart shows the gap)."""

    def __init__(self, history: MetricsHistory, sample: Sample, interval_s: float) -> None:
        self.history = history
        self.sample = sample
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                figures = self.sample()
            except (AdminError, ValueError, OSError) as exc:  # unreachable: this point is missing
                log.info("console sample skipped: %s", exc)
            except Exception:  # a broker's odd answer: charts only, nothing is lost by going on
                log.exception("console sample failed")
            else:
                now = time.time()
                for key, value in figures.items():
                    self.history.add(now, key, value)
                self.history.prune(now)
            self._stop.wait(self.interval_s)
