"""The shared state page never shows a reader in another process a word that is not a value the
writer stored (struct.pack_into zero-fills its target first: a reader saw max_phy == 0 about once
in 200 reads, and the pull actor answered a queue of thousands of messages as empty)."""

from __future__ import annotations

import os
from typing import Any

from store.state_page import OFF_MAX_PHY, StatePage
from store.stats_page import OFF_PUT_TIMES, StatsPage

WRITES = 400_000
MAX_READS = 20_000_000


def _race(tmp: str, page_cls: Any, off: int) -> int:
    """Fork a writer that stores increasing values while this process reads; the reads of 0.
    The reads must overlap the writes (checked), or the test would prove nothing."""
    path = os.path.join(tmp, "page")
    writer = page_cls(path, writable=True)
    writer.set(off, 1)
    reader = page_cls(path, writable=False)
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer process: increasing values, never 0, once the reader is going
        try:
            os.read(go_r, 1)
            for i in range(2, WRITES + 2):
                writer.set(off, i)
        finally:
            os._exit(0)
    zeros = overlapped = 0
    try:
        os.write(go_w, b"g")
        for _ in range(MAX_READS):  # bounded; ends when the writer's last value shows
            v = reader.get(off)
            if v == 0:
                zeros += 1
            elif v == WRITES + 1:
                break
            elif v > 1:
                overlapped += 1
    finally:
        os.waitpid(pid, 0)
        os.close(go_r)
        os.close(go_w)
    assert reader.get(off) == WRITES + 1  # the writer really ran
    assert overlapped > 1000, overlapped  # the reads ran while the writer wrote
    reader.close()
    writer.close()
    return zeros


def test_state_page_word_never_reads_as_zero_while_written(tmp_path: Any) -> None:
    assert _race(str(tmp_path), StatePage, OFF_MAX_PHY) == 0


def test_stats_page_word_never_reads_as_zero_while_written(tmp_path: Any) -> None:
    assert _race(str(tmp_path), StatsPage, OFF_PUT_TIMES) == 0
