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


def test_a_new_page_appears_whole(tmp_path, monkeypatch) -> None:
    """A reader in another process opens the state page as soon as it exists (the HA test
    watched for it and read it short: the writer had made the file and not allocated it
    yet). The page is made under another name and linked into place whole: at the link it
    has its full size and its magic; nothing else is left in the directory."""
    from store import state_page

    path = str(tmp_path / "state")
    seen: list[tuple[int, int]] = []
    real_link = os.link

    def link(src: str, dst: str) -> None:
        assert not os.path.exists(dst)
        with open(src, "rb") as f:
            head = f.read(8)
        seen.append((os.path.getsize(src), int.from_bytes(head, "little", signed=True)))
        real_link(src, dst)

    monkeypatch.setattr(state_page.os, "link", link)
    writer = StatePage(path, writable=True)
    assert seen == [(state_page.STATE_PAGE_SIZE, state_page.STATE_MAGIC)]
    assert sorted(os.listdir(tmp_path)) == ["state"]
    second = StatePage(path, writable=True)  # there already: opened, not made again
    assert len(seen) == 1
    writer.set(OFF_MAX_PHY, 77)
    assert StatePage(path, writable=False).get(OFF_MAX_PHY) == second.get(OFF_MAX_PHY) == 77


def test_two_writers_making_the_page_at_once_share_one(tmp_path, monkeypatch) -> None:
    """The second writer's link finds the first's page: it opens that one (not its own)."""
    from store import state_page

    path = str(tmp_path / "state")
    first: list[StatePage] = []
    real_link = os.link

    def link(src: str, dst: str) -> None:
        if not first:  # another writer makes and links the page just before this one
            monkeypatch.setattr(state_page.os, "link", real_link)
            first.append(StatePage(path, writable=True))
        real_link(src, dst)

    monkeypatch.setattr(state_page.os, "link", link)
    second = StatePage(path, writable=True)
    first[0].set(OFF_MAX_PHY, 5)
    assert second.get(OFF_MAX_PHY) == 5
    assert sorted(os.listdir(tmp_path)) == ["state"]
