"""The shared state page never shows a reader in another process a word that is not a value the
writer stored (struct.pack_into zero-fills its target first: a reader saw max_phy == 0 about once
in 200 reads, and the pull actor answered a queue of thousands of messages as empty)."""

from __future__ import annotations

import os
from typing import Any

from store.state_page import OFF_MAX_PHY, StatePage
from store.stats_page import OFF_PUT_TIMES, StatsPage

WRITES = 400_000
READS = 400_000


def _race(tmp: str, page_cls: Any, off: int) -> int:
    """Fork a writer that stores increasing values; count the reader's reads of 0."""
    path = os.path.join(tmp, "page")
    writer = page_cls(path, writable=True)
    writer.set(off, 1)
    reader = page_cls(path, writable=False)
    pid = os.fork()
    if pid == 0:  # the writer process: increasing values, never 0
        try:
            for i in range(2, WRITES + 2):
                writer.set(off, i)
        finally:
            os._exit(0)
    zeros = 0
    try:
        for _ in range(READS):  # bounded: as many reads as the writer makes stores
            if reader.get(off) == 0:
                zeros += 1
    finally:
        os.waitpid(pid, 0)
    assert reader.get(off) == WRITES + 1  # the writer really ran
    reader.close()
    writer.close()
    return zeros


def test_state_page_word_never_reads_as_zero_while_written(tmp_path: Any) -> None:
    assert _race(str(tmp_path), StatePage, OFF_MAX_PHY) == 0


def test_stats_page_word_never_reads_as_zero_while_written(tmp_path: Any) -> None:
    assert _race(str(tmp_path), StatsPage, OFF_PUT_TIMES) == 0
