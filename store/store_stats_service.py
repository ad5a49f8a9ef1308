"""The store's counters: StoreStatsService (store/StoreStatsService.java, RocketMQ 4.9.x).

The writer counts messages and record bytes put (its own puts, a slave's reput); a store's
read side counts gets found, missed and messages transferred. Whoever owns the broker's stats
page publishes them there (store.stats_page) for GET_BROKER_RUNTIME_INFO. A plain core.
"""

from __future__ import annotations

from store.stats_page import OFF_GET_FOUND, OFF_GET_TRANSFERRED, OFF_PUT_TIMES, StatsPage


class StoreStatsService:
    """Put and get counters since start."""

    __slots__ = (
        "get_found_total",
        "get_miss_total",
        "get_transferred_total",
        "put_size_total",
        "put_times_total",
    )

    def __init__(self) -> None:
        self.put_times_total = 0  # messages put (a slave: dispatched by its reput)
        self.put_size_total = 0  # their record bytes
        self.get_found_total = 0  # getMessage answers FOUND
        self.get_miss_total = 0  # ... not FOUND
        self.get_transferred_total = 0  # messages those FOUND answers carried

    def publish_puts(self, page: StatsPage) -> None:
        """Write the put counters (the writer owns them)."""
        page.set_pair(OFF_PUT_TIMES, self.put_times_total, self.put_size_total)

    def publish_gets(self, page: StatsPage) -> None:
        """Write the get counters (the process that serves pulls owns them)."""
        page.set_pair(OFF_GET_FOUND, self.get_found_total, self.get_miss_total)
        page.set(OFF_GET_TRANSFERRED, self.get_transferred_total)
